package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Option adjusts Open.
type Option func(*options)

type options struct {
	statementTimeout time.Duration
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
	o := options{statementTimeout: DefaultStatementTimeout}
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
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return nil, fmt.Errorf("create data dir %s: %w", dataDir, err)
			}
			dsn = "file:" + filepath.Join(dataDir, "matememory.db")
		}
		dsn = sqliteDSN(dsn)
		db, err := gorm.Open(sqlite.Open(dsn), gcfg)
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", dsn, err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		if err := db.Use(NewWatch(o.statementTimeout)); err != nil {
			return nil, err
		}
		// WAL lets readers run beside the one writer; immediate transactions plus a busy
		// timeout make writers queue instead of failing with SQLITE_BUSY.
		sqlDB.SetMaxOpenConns(8)
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
		sqlDB.SetMaxOpenConns(32)
		sqlDB.SetConnMaxLifetime(5 * time.Minute)
		return db, nil
	default:
		return nil, fmt.Errorf("unknown database driver %q; accepted: sqlite, mysql", driver)
	}
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
// and the driver's dial, read and write timeouts unless the DSN sets them.
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

func sqliteDSN(dsn string) string {
	if strings.Contains(dsn, "_pragma=") {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
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
