package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/libtnb/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	moderncsqlite "modernc.org/sqlite"
)

// Option adjusts Open.
type Option func(*options)

type options struct {
	statementTimeout time.Duration
	sqliteSync       string
}

// WithSQLiteSynchronous sets SQLite's synchronous pragma, "full" (the default: the WAL is
// fsynced at every commit) or "normal" (no fsync at commit: a power loss may lose the last
// commits). A DSN with its own _pragma parameters keeps them.
func WithSQLiteSynchronous(mode string) Option {
	return func(o *options) {
		if mode != "" {
			o.sqliteSync = mode
		}
	}
}

// WithStatementTimeout sets the deadline given to a statement whose context has none
// (DefaultStatementTimeout otherwise).
func WithStatementTimeout(d time.Duration) Option {
	return func(o *options) { o.statementTimeout = d }
}

// Open connects to the database named by driver ("sqlite" or "mysql") and dsn. For sqlite
// an empty dsn means <dataDir>/matememory.db. Times are stored in UTC. Every statement gets
// a deadline (see Watch) and, on MySQL, the driver's read and write timeouts (MySQLConfig).
func Open(driver, dsn, dataDir string, opts ...Option) (*gorm.DB, error) {
	o := options{statementTimeout: DefaultStatementTimeout, sqliteSync: "full"}
	for _, fn := range opts {
		fn(&o)
	}
	gcfg := &gorm.Config{
		Logger:         logger.Discard,
		NowFunc:        func() time.Time { return time.Now().UTC() },
		TranslateError: true,
	}
	switch driver {
	case "sqlite":
		if dsn == "" {
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return nil, fmt.Errorf("create data dir %s: %w", dataDir, err)
			}
			path := filepath.Join(dataDir, "matememory.db")
			if err := privateDatabase(path); err != nil {
				return nil, err
			}
			dsn = "file:" + path
		}
		dsn, err := sqliteDSN(dsn, o.sqliteSync)
		if err != nil {
			return nil, err
		}
		conn, err := moderncsqlite.NewConnector(dsn)
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", dsn, err)
		}
		sqlDB := sql.OpenDB(cachingConnector{conn})
		// WAL lets readers run beside the one writer; immediate transactions plus a busy
		// timeout make writers queue instead of failing with SQLITE_BUSY.
		sqlDB.SetMaxOpenConns(8)
		sqlDB.SetMaxIdleConns(8) // an idle connection keeps its prepared statements
		db, err := gorm.Open(sqlite.New(sqlite.Config{Conn: sqlDB}), gcfg)
		if err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", dsn, err)
		}
		if err := db.Use(NewWatch(o.statementTimeout)); err != nil {
			return nil, err
		}
		return db, nil
	case "mysql":
		cfg, err := MySQLConfig(dsn)
		if err != nil {
			return nil, err
		}
		db, err := gorm.Open(mysql.New(mysql.Config{DSNConfig: cfg}), gcfg)
		if err != nil {
			return nil, fmt.Errorf("open mysql %s@%s/%s: %w", cfg.User, cfg.Addr, cfg.DBName, err)
		}
		if err := db.Use(NewWatch(o.statementTimeout)); err != nil {
			return nil, err
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		// Every connection the pool may open stays idle in it: with database/sql's default
		// of 2 idle connections, each burst of more than 2 concurrent statements closed what
		// it had just opened, and the next burst dialled again (issue 32 measured 1.17 new
		// server connections per event). An idle connection is closed after a while, and
		// any after its lifetime (a server or proxy failover is then picked up).
		sqlDB.SetMaxOpenConns(MySQLMaxOpenConns)
		sqlDB.SetMaxIdleConns(MySQLMaxOpenConns)
		sqlDB.SetConnMaxIdleTime(MySQLConnMaxIdleTime)
		sqlDB.SetConnMaxLifetime(MySQLConnMaxLifetime)
		return db, nil
	default:
		return nil, fmt.Errorf("unknown database driver %q; accepted: sqlite, mysql", driver)
	}
}

// The MySQL pool: at most MySQLMaxOpenConns connections, all of which may stay idle; an
// idle one is closed after MySQLConnMaxIdleTime, any one after MySQLConnMaxLifetime.
const (
	MySQLMaxOpenConns    = 32
	MySQLConnMaxIdleTime = 10 * time.Minute
	MySQLConnMaxLifetime = time.Hour
)

// privateDatabase makes the SQLite database at path readable by its owner only: SQLite
// creates a database 0644 (less the umask) and gives its -wal, -shm and -journal files the
// database's mode, so the database is created 0600 before SQLite opens it (an empty file is
// an empty database), and files an earlier version left readable to others are narrowed.
func privateDatabase(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("create sqlite database %s: %w", path, err)
	}
	_ = f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check the mode of %s: %w", p, err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, st.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("make %s private (mode 0600): %w", p, err)
			}
		}
	}
	return nil
}

// Driver timeouts a MySQL DSN gets unless it sets its own: a connection that stops
// answering (packets dropped, no reset) fails a read or write after these instead of
// hanging its caller. The read timeout is above the longest wait a statement may have
// (the migration lock, 60 s).
const (
	MySQLDialTimeout  = 10 * time.Second
	MySQLReadTimeout  = 90 * time.Second
	MySQLWriteTimeout = 30 * time.Second
)

// MySQLConfig parses dsn and completes it the way Open connects: parseTime, UTC, utf8mb4,
// the driver's dial, read and write timeouts unless the DSN sets them, and
// interpolateParams=true unless the DSN sets it or another charset.
//
// interpolateParams has the driver put the arguments into the statement text (escaped for
// the connection's charset) instead of preparing it on the server, running and closing it:
// one round trip per statement instead of three (issue 14 measured −23 % CPU, −17 % p50 per
// event on MariaDB).
func MySQLConfig(dsn string) (*mysqldrv.Config, error) {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["charset"]; !ok {
		cfg.Params["charset"] = "utf8mb4"
	}
	if !strings.Contains(dsn, "interpolateParams=") {
		switch cfg.Params["charset"] {
		case "utf8mb4", "utf8", "utf8mb3":
			// escaping is exact for these; some multi-byte charsets (gbk, big5, sjis)
			// can hide a backslash, so a DSN naming one keeps server-side prepares
			cfg.InterpolateParams = true
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = MySQLDialTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = MySQLReadTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = MySQLWriteTimeout
	}
	return cfg, nil
}

// sqliteDSN completes dsn the way Open connects: times written as
// "2006-01-02 15:04:05.999999999-07:00" and read back as time.Time (the format files written
// by earlier versions hold), and, unless the DSN sets its own _pragma parameters, WAL, a
// 10 s busy timeout, immediate transactions and the synchronous mode sync.
func sqliteDSN(dsn, sync string) (string, error) {
	path, rawQuery, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("parse sqlite dsn %q: %w", dsn, err)
	}
	var add []string
	addIfMissing := func(key, value string) {
		if !q.Has(key) {
			add = append(add, key+"="+value)
		}
	}
	addIfMissing("_time_format", "sqlite")
	addIfMissing("_texttotime", "1")
	addIfMissing("_inttotime", "1")
	if !q.Has("_pragma") {
		switch sync {
		case "full", "normal":
		default:
			return "", fmt.Errorf("sqlite synchronous mode %q is not supported; accepted: full, normal", sync)
		}
		// secure_delete: a deleted row's bytes are overwritten with zeros, not left in a
		// free page (an erasure must reach the bytes on disk).
		add = append(add, "_pragma=busy_timeout(10000)", "_pragma=journal_mode(WAL)", "_pragma=secure_delete(1)",
			"_pragma=synchronous("+strings.ToUpper(sync)+")")
		addIfMissing("_txlock", "immediate")
	}
	if len(add) == 0 {
		return dsn, nil
	}
	if rawQuery == "" {
		return path + "?" + strings.Join(add, "&"), nil
	}
	return dsn + "&" + strings.Join(add, "&"), nil
}

// Ping checks the database answers.
func Ping(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close closes the pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// IsDuplicate reports whether err is a unique-key violation.
func IsDuplicate(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }

// IsDeadlock reports a transaction the database rolled back to break a deadlock, or one that
// waited too long for a lock (MySQL/MariaDB 1213 and 1205): nothing of it was applied, and
// running it again is safe.
func IsDeadlock(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
