package engine

import (
	"context"

	"github.com/sluice-dev/sluice"
)

// Reader is what a stream subscriber may see of one database: the
// database, its schema and the subscriber's role on it.
type Reader struct {
	Database *sluice.Database
	Schema   *sluice.Schema
	Role     sluice.Role
}

// Redact returns doc (a document's API-form JSON) without the fields the
// reader's role may not see. A nil doc stays nil.
func (r *Reader) Redact(doc []byte) ([]byte, error) { return redactFor(r.Role, r.Schema, doc) }

// StreamReader authorizes u to subscribe to database org/name (the read
// role) and returns what its events must be shaped by. It fails like
// Database.
func (e *Engine) StreamReader(ctx context.Context, u *sluice.User, org, name string) (*Reader, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, err
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, err
	}
	return &Reader{Database: d, Schema: s, Role: role}, nil
}
