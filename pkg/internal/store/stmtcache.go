package store

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
)

// stmtCacheSize bounds the statements kept per connection. The service runs a few dozen
// distinct statements (gorm builds the same text for the same call); more than this means
// text that varies with the data (IN lists of varying length), which then just misses.
const stmtCacheSize = 128

// cachingConnector gives every connection of an SQLite pool a cache of prepared statements.
// database/sql prepares, runs and finalizes a statement for every call made without an
// explicit Prepare, and gorm makes every call that way: SQLite then parses and plans the
// same text again and again (13–16 % of the pipeline's CPU, issue 14). The cache keeps the
// prepared statement by its text on the connection it was prepared on; modernc.org/sqlite
// resets a statement after each run, so a cached one holds no lock and no read snapshot.
type cachingConnector struct {
	driver.Connector
}

// Connect opens a connection wrapped with its statement cache.
func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newCachingConn(conn)
}

// driverConn is what the SQLite driver's connections implement; the wrapper forwards all of
// it, since database/sql falls back to weaker context-free paths for any interface a
// wrapper hides.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type cachingConn struct {
	driverConn
	byQuery map[string]*list.Element // of *cachedStmt
	lru     list.List                // front: most recently used
}

type cachedStmt struct {
	query string
	stmt  interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	// busy: rows of the statement are open; a second use of the same text on this
	// connection before they close (a query inside a row loop) runs uncached.
	busy bool
}

func newCachingConn(conn driver.Conn) (driver.Conn, error) {
	dc, ok := conn.(driverConn)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("sqlite driver connection lacks the context interfaces the statement cache needs")
	}
	return &cachingConn{driverConn: dc, byQuery: map[string]*list.Element{}}, nil
}

// Unwrap returns the driver's connection (modernc.org/sqlite looks through wrappers this way).
func (c *cachingConn) Unwrap() driver.Conn { return c.driverConn }

// get returns the idle cached statement for query, preparing and caching it if there is
// none; nil (with no error) when the cached one is busy.
func (c *cachingConn) get(ctx context.Context, query string) (*cachedStmt, error) {
	if el, ok := c.byQuery[query]; ok {
		cs := el.Value.(*cachedStmt)
		if cs.busy {
			return nil, nil
		}
		c.lru.MoveToFront(el)
		return cs, nil
	}
	s, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	typed, ok := s.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		_ = s.Close()
		return nil, nil
	}
	cs := &cachedStmt{query: query, stmt: typed}
	c.byQuery[query] = c.lru.PushFront(cs)
	c.evict()
	return cs, nil
}

// evict closes the least recently used idle statements beyond the cache's size.
func (c *cachingConn) evict() {
	for el := c.lru.Back(); el != nil && c.lru.Len() > stmtCacheSize; {
		prev := el.Prev()
		if cs := el.Value.(*cachedStmt); !cs.busy {
			c.lru.Remove(el)
			delete(c.byQuery, cs.query)
			_ = cs.stmt.Close()
		}
		el = prev
	}
}

// ExecContext runs query with the cached statement of its text.
func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.driverConn.ExecContext(ctx, query, args)
	}
	return cs.stmt.ExecContext(ctx, args)
}

// QueryContext runs query with the cached statement of its text; the statement stays busy
// until its rows are closed.
func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.driverConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	cs.busy = true
	return &cachedRows{Rows: rows, release: func() { cs.busy = false }}, nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	for el := c.lru.Front(); el != nil; el = el.Next() {
		_ = el.Value.(*cachedStmt).stmt.Close()
	}
	c.lru.Init()
	clear(c.byQuery)
	return c.driverConn.Close()
}

// cachedRows releases its statement for the next use when closed. It forwards the column
// type interfaces gorm's scanner uses.
type cachedRows struct {
	driver.Rows
	release func()
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypeLength(i int) (length int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
