package pii

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
)

// SQLStore keeps the keys in a table of a SQL database: by default the embedded
// catalog's SQLite file (catalog.Lakehouse.DB), so the keys live and are backed up with
// the catalog, never in the warehouse. Rows hold the key id (a hash of the subject,
// never the subject) and the key.
type SQLStore struct {
	db *sql.DB
}

var _ KeyStore = (*SQLStore)(nil)

// keysTable is the table of SQLStore.
const keysTable = "goldbridge_pii_keys"

// NewSQLStore returns a store over db, creating its table when needed.
func NewSQLStore(ctx context.Context, db *sql.DB) (*SQLStore, error) {
	if db == nil {
		return nil, errors.New("pii key store: no database (the embedded sql catalog is required)")
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+keysTable+` (key_id TEXT PRIMARY KEY, key BLOB NOT NULL)`); err != nil {
		return nil, fmt.Errorf("pii key store: %w", err)
	}
	return &SQLStore{db: db}, nil
}

// Key implements KeyStore. Concurrent creators of one id agree on the first key stored.
func (s *SQLStore) Key(ctx context.Context, id string, create bool) ([]byte, bool, error) {
	var key []byte
	err := s.db.QueryRowContext(ctx, `SELECT key FROM `+keysTable+` WHERE key_id = ?`, id).Scan(&key)
	if err == nil {
		return key, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	if !create {
		return nil, false, nil
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, false, err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT OR IGNORE INTO `+keysTable+` (key_id, key) VALUES (?, ?)`, id, key); err != nil {
		return nil, false, err
	}
	return s.Key(ctx, id, false)
}

// Delete implements KeyStore.
func (s *SQLStore) Delete(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM `+keysTable+` WHERE key_id = ?`, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
