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

// Open connects to the database named by driver ("sqlite" or "mysql") and dsn. For sqlite
// an empty dsn means <dataDir>/matememory.db. Times are stored in UTC.
func Open(driver, dsn, dataDir string) (*gorm.DB, error) {
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
		// WAL lets readers run beside the one writer; immediate transactions plus a busy
		// timeout make writers queue instead of failing with SQLITE_BUSY.
		sqlDB.SetMaxOpenConns(8)
		return db, nil
	case "mysql":
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
		db, err := gorm.Open(mysql.New(mysql.Config{DSNConfig: cfg}), gcfg)
		if err != nil {
			return nil, fmt.Errorf("open mysql %s@%s/%s: %w", cfg.User, cfg.Addr, cfg.DBName, err)
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
