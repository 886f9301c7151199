package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

// CreateOrganization creates organization name. It returns a Conflict error
// when it exists.
func (t *Tx) CreateOrganization(ctx context.Context, name string) error {
	if err := checkText("organization name", name); err != nil {
		return err
	}
	tag, err := t.tx.Exec(ctx, "INSERT INTO sluice.organizations (name) VALUES ($1) ON CONFLICT DO NOTHING", name)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeConflict, "organization %q already exists", name)
	}
	return nil
}

// Organizations returns every organization name, sorted.
func (db *DB) Organizations(ctx context.Context) ([]string, error) {
	rows, err := db.pool.Query(ctx, "SELECT name FROM sluice.organizations ORDER BY name")
	if err != nil {
		return nil, mapError(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, mapError(err)
}

// CreateUser creates a user with a password hash. It returns Conflict when
// the name is taken and NotFound when the organization does not exist.
func (t *Tx) CreateUser(ctx context.Context, u *sluice.User, passwordHash string) error {
	if err := checkText("organization", u.Org); err != nil {
		return err
	}
	if err := checkText("user name", u.Name); err != nil {
		return err
	}
	var orgExists bool
	if err := t.tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sluice.organizations WHERE name = $1)", u.Org).Scan(&orgExists); err != nil {
		return mapError(err)
	}
	if !orgExists {
		return sluice.Errorf(sluice.CodeNotFound, "organization %q does not exist", u.Org)
	}
	err := t.tx.QueryRow(ctx, `INSERT INTO sluice.users (org, name, password_hash, superuser)
		VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING RETURNING id`,
		u.Org, u.Name, passwordHash, u.Superuser).Scan(&u.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return sluice.Errorf(sluice.CodeConflict, "user %q already exists", u.Name)
	}
	return mapError(err)
}

// UserByName returns the user called name and its password hash, or a
// NotFound error.
func (db *DB) UserByName(ctx context.Context, name string) (*sluice.User, string, error) {
	return userByName(ctx, db.pool, name)
}

// UserByName is DB.UserByName inside the transaction.
func (t *Tx) UserByName(ctx context.Context, name string) (*sluice.User, string, error) {
	return userByName(ctx, t.tx, name)
}

func userByName(ctx context.Context, q querier, name string) (*sluice.User, string, error) {
	if err := checkText("user name", name); err != nil {
		return nil, "", err
	}
	var u sluice.User
	var hash string
	err := q.QueryRow(ctx, "SELECT id, org, name, superuser, password_hash FROM sluice.users WHERE name = $1", name).
		Scan(&u.ID, &u.Org, &u.Name, &u.Superuser, &hash)
	if errors.Is(mapError(err), errNotFound) {
		return nil, "", sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", name)
	}
	if err != nil {
		return nil, "", mapError(err)
	}
	return &u, hash, nil
}

// GrantTarget returns the user called name, as a target of a role grant on
// database dbID of organization org by one of its admins: a user of org,
// or of another organization only while it holds a role on dbID (which
// the database's admins see listed). Any other user answers as one that
// does not exist, with the same error and the same single round trip, so
// an admin cannot learn which user names other organizations hold.
func (db *DB) GrantTarget(ctx context.Context, name, org string, dbID int64) (*sluice.User, error) {
	if err := checkText("user name", name); err != nil {
		return nil, err
	}
	var u sluice.User
	err := db.pool.QueryRow(ctx, `SELECT id, org, name, superuser FROM sluice.users u WHERE name = $1
		AND (org = $2 OR EXISTS (SELECT 1 FROM sluice.roles r WHERE r.user_id = u.id AND r.db_id = $3))`, name, org, dbID).
		Scan(&u.ID, &u.Org, &u.Name, &u.Superuser)
	if errors.Is(mapError(err), errNotFound) {
		return nil, sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", name)
	}
	if err != nil {
		return nil, mapError(err)
	}
	return &u, nil
}

// Users returns every user, sorted by name.
func (db *DB) Users(ctx context.Context) ([]*sluice.User, error) {
	rows, err := db.pool.Query(ctx, "SELECT id, org, name, superuser FROM sluice.users ORDER BY name")
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var out []*sluice.User
	for rows.Next() {
		var u sluice.User
		if err := rows.Scan(&u.ID, &u.Org, &u.Name, &u.Superuser); err != nil {
			return nil, mapError(err)
		}
		out = append(out, &u)
	}
	return out, mapError(rows.Err())
}

// SetPassword replaces user u's password hash and records the change in
// the access log (streams authenticated with the old password end). A user
// deleted since u was read is NotFound, never a silent success.
func (t *Tx) SetPassword(ctx context.Context, u *sluice.User, hash string) error {
	tag, err := t.tx.Exec(ctx, "UPDATE sluice.users SET password_hash = $2 WHERE id = $1", u.ID, hash)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", u.Name)
	}
	t.changeAccess(sluice.AccessChange{Kind: sluice.AccessPassword, UserID: u.ID})
	return nil
}

// DeleteUser deletes user u (its tokens and roles go with it) and records
// it in the access log.
func (t *Tx) DeleteUser(ctx context.Context, u *sluice.User) error {
	tag, err := t.tx.Exec(ctx, "DELETE FROM sluice.users WHERE id = $1", u.ID)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", u.Name)
	}
	t.changeAccess(sluice.AccessChange{Kind: sluice.AccessUser, UserID: u.ID})
	return nil
}

// OrganizationMembers returns the users of organization org.
func (t *Tx) OrganizationMembers(ctx context.Context, org string) ([]*sluice.User, error) {
	rows, err := t.tx.Query(ctx, "SELECT id, org, name, superuser FROM sluice.users WHERE org = $1 ORDER BY name", org)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*sluice.User, error) {
		var u sluice.User
		err := row.Scan(&u.ID, &u.Org, &u.Name, &u.Superuser)
		return &u, err
	})
	return out, mapError(err)
}

// DeleteOrganization deletes organization org, which must hold no users
// and no databases any more (delete them first, in the same Tx), and
// records it in the access log.
func (t *Tx) DeleteOrganization(ctx context.Context, org string) error {
	tag, err := t.tx.Exec(ctx, "DELETE FROM sluice.organizations WHERE name = $1", org)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "23503" { // foreign_key_violation
		// A database or a user of the organization made after the
		// deletion read them (a creation racing it) still names it.
		return sluice.Errorf(sluice.CodeConflict, "organization %q got a database or a user while it was being deleted; delete it again", org)
	}
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeNotFound, "organization %q does not exist", org)
	}
	t.changeAccess(sluice.AccessChange{Kind: sluice.AccessOrganization, Org: org})
	return nil
}

// PasswordCredential returns the credential of user name for a password
// check: the user, its password hash and the access log's version, from
// one snapshot. A missing user is a NotFound error.
func (db *DB) PasswordCredential(ctx context.Context, name string) (*sluice.Credential, error) {
	if checkText("user name", name) != nil {
		// No user has such a name: not found, as any unknown name (the
		// authenticator counts it as a wrong password, not a bad
		// request), without a round trip Postgres would refuse.
		return nil, sluice.Errorf(sluice.CodeNotFound, "user %s does not exist", quote(name))
	}
	var u sluice.User
	c := &sluice.Credential{User: &u}
	err := db.pool.QueryRow(ctx, "SELECT id, org, name, superuser, password_hash, "+accessVersionSQL+" FROM sluice.users WHERE name = $1", name).
		Scan(&u.ID, &u.Org, &u.Name, &u.Superuser, &c.PasswordHash, &c.AccessVersion)
	if errors.Is(mapError(err), errNotFound) {
		return nil, sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", name)
	}
	if err != nil {
		return nil, mapError(err)
	}
	return c, nil
}

// TokenCredential returns the credential of the unrevoked token whose
// secret hashes to hash: its owner, its id and the access log's version,
// from one snapshot. An unknown or revoked token is an Unauthenticated
// error.
func (db *DB) TokenCredential(ctx context.Context, hash []byte) (*sluice.Credential, error) {
	var u sluice.User
	c := &sluice.Credential{User: &u}
	err := db.pool.QueryRow(ctx, `SELECT u.id, u.org, u.name, u.superuser, t.id, `+accessVersionSQL+` FROM sluice.tokens t
		JOIN sluice.users u ON u.id = t.user_id WHERE t.hash = $1 AND t.revoked_at IS NULL`, hash).
		Scan(&u.ID, &u.Org, &u.Name, &u.Superuser, &c.TokenID, &c.AccessVersion)
	if errors.Is(mapError(err), errNotFound) {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "invalid or revoked token")
	}
	if err != nil {
		return nil, mapError(err)
	}
	return c, nil
}

// CreateToken stores a new token for userID and returns it, or a TooMany
// error when userID already holds maxActive unrevoked tokens.
func (t *Tx) CreateToken(ctx context.Context, userID int64, name string, hash []byte, maxActive int) (*sluice.Token, error) {
	if err := checkText("token name", name); err != nil {
		return nil, err
	}
	// One user's creations take turns on the user's row, so that
	// concurrent ones cannot all pass the count (lockUser).
	if err := lockUser(ctx, t.tx, userID); err != nil {
		return nil, err
	}
	var active int
	if err := t.tx.QueryRow(ctx, "SELECT count(*) FROM sluice.tokens WHERE user_id = $1 AND revoked_at IS NULL", userID).Scan(&active); err != nil {
		return nil, mapError(err)
	}
	if active >= maxActive {
		return nil, sluice.Errorf(sluice.CodeTooMany, "the user holds %d API tokens, the most allowed (%d); revoke unused ones (DELETE /api/tokens/{id})", active, maxActive)
	}
	tok := &sluice.Token{Name: name}
	err := t.tx.QueryRow(ctx, "INSERT INTO sluice.tokens (user_id, name, hash) VALUES ($1, $2, $3) RETURNING id, created_at",
		userID, name, hash).Scan(&tok.ID, &tok.CreatedAt)
	return tok, mapError(err)
}

// lockUser locks user id's row in tx until it ends, so that a count of
// the user's rows and the insert it admits are one step: of concurrent
// creations (16 at once made up to 14 tokens, or 9 tickets, under a cap
// of 2), each counts after the one before committed. The lock is on
// Sluice's own row, which no other role may lock (an advisory lock's key
// could be taken by any role that may log in, and creations made to wait
// for good); it lets foreign keys to the row be checked meanwhile.
func lockUser(ctx context.Context, tx querier, id int64) error {
	_, err := tx.Exec(ctx, "SELECT 1 FROM sluice.users WHERE id = $1 FOR NO KEY UPDATE", id)
	return mapError(err)
}

// ListedRevokedTokens bounds the revoked tokens a user keeps, which a
// listing shows: a revocation deletes the older ones (RevokeToken), so a
// user who keeps making and revoking tokens grows neither the table nor
// its listing.
const ListedRevokedTokens = 1000

// Tokens returns userID's tokens, newest first: every unrevoked one and
// the newest ListedRevokedTokens revoked ones.
func (db *DB) Tokens(ctx context.Context, userID int64) ([]*sluice.Token, error) {
	rows, err := db.pool.Query(ctx, `(SELECT id, name, created_at, revoked_at FROM sluice.tokens WHERE user_id = $1 AND revoked_at IS NULL)
		UNION ALL
		(SELECT id, name, created_at, revoked_at FROM sluice.tokens WHERE user_id = $1 AND revoked_at IS NOT NULL ORDER BY id DESC LIMIT $2)
		ORDER BY id DESC`, userID, ListedRevokedTokens)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var out []*sluice.Token
	for rows.Next() {
		var t sluice.Token
		if err := rows.Scan(&t.ID, &t.Name, &t.CreatedAt, &t.RevokedAt); err != nil {
			return nil, mapError(err)
		}
		out = append(out, &t)
	}
	return out, mapError(rows.Err())
}

// RevokeToken revokes token id of userID and records it in the access log.
// It returns NotFound when userID has no such unrevoked token.
func (t *Tx) RevokeToken(ctx context.Context, userID, id int64) error {
	tag, err := t.tx.Exec(ctx, "UPDATE sluice.tokens SET revoked_at = now() WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL", id, userID)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeNotFound, "token %d does not exist or is already revoked", id)
	}
	// Revoked tokens past the newest ListedRevokedTokens of the user go:
	// the listing shows no more, a revoked token answers nothing, and
	// kept, a user making and revoking tokens in a loop grew the table
	// without bound. (Its stream tickets go with it: they were refused
	// since the revocation.)
	if _, err := t.tx.Exec(ctx, `DELETE FROM sluice.tokens WHERE user_id = $1 AND revoked_at IS NOT NULL AND id < (
		SELECT min(id) FROM (SELECT id FROM sluice.tokens WHERE user_id = $1 AND revoked_at IS NOT NULL ORDER BY id DESC LIMIT $2) newest)`,
		userID, ListedRevokedTokens); err != nil {
		return mapError(err)
	}
	t.changeAccess(sluice.AccessChange{Kind: sluice.AccessToken, UserID: userID, TokenID: id})
	return nil
}

// SetRole grants user u role on database d (RoleNone removes the grant)
// and records it in the access log. A database or a user deleted since it
// was read is NotFound.
func (t *Tx) SetRole(ctx context.Context, u *sluice.User, d *sluice.Database, role sluice.Role) error {
	userID := u.ID
	// The database's row before the user's (lockorder.go): the grant's
	// foreign keys take a key share of the user's row, then of the
	// database's, and an organization's deletion deletes its databases
	// before its users.
	tag, err := t.tx.Exec(ctx, "SELECT 1 FROM sluice.databases WHERE id = $1 FOR KEY SHARE", d.ID)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.ErrNoDatabase(d.Org, d.Name)
	}
	// Then the user's, which a deletion of the user that committed
	// since u was read has taken: the grant's foreign key check found
	// it gone, an internal error.
	tag, err = t.tx.Exec(ctx, "SELECT 1 FROM sluice.users WHERE id = $1 FOR KEY SHARE", userID)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", u.Name)
	}
	if role == sluice.RoleNone {
		_, err = t.tx.Exec(ctx, "DELETE FROM sluice.roles WHERE user_id = $1 AND db_id = $2", userID, d.ID)
	} else {
		_, err = t.tx.Exec(ctx, `INSERT INTO sluice.roles (user_id, db_id, role) VALUES ($1, $2, $3)
			ON CONFLICT (user_id, db_id) DO UPDATE SET role = EXCLUDED.role`, userID, d.ID, int(role))
	}
	if err != nil {
		return mapError(err)
	}
	t.changeAccess(sluice.AccessChange{Kind: sluice.AccessRole, UserID: userID, DatabaseID: d.ID, Role: role})
	return nil
}

// Role returns userID's granted role on dbID (RoleNone when none).
func (db *DB) Role(ctx context.Context, userID, dbID int64) (sluice.Role, error) {
	var r int
	err := db.pool.QueryRow(ctx, "SELECT role FROM sluice.roles WHERE user_id = $1 AND db_id = $2", userID, dbID).Scan(&r)
	if errors.Is(mapError(err), errNotFound) {
		return sluice.RoleNone, nil
	}
	return sluice.Role(r), mapError(err)
}

// DatabaseForUser returns database org/name, its SDL and userID's granted
// role on it (RoleNone when none) in one round trip, or ErrNoDatabase. A
// caller that must not reveal whether a database it refuses exists asks
// this for both a refused database and one that does not exist, so both
// cost the same single query.
func (db *DB) DatabaseForUser(ctx context.Context, org, name string, userID int64) (*sluice.Database, string, sluice.Role, error) {
	if err := checkText("organization", org); err != nil {
		return nil, "", sluice.RoleNone, err
	}
	if err := checkText("database name", name); err != nil {
		return nil, "", sluice.RoleNone, err
	}
	var role int
	d, sdl, err := scanDatabase(withRole{db.pool.QueryRow(ctx, `SELECT `+databaseColumns+`, COALESCE(r.role, 0)
		FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id
		LEFT JOIN sluice.roles r ON r.db_id = d.id AND r.user_id = $3
		WHERE d.org = $1 AND d.name = $2`, org, name, userID), &role})
	if errors.Is(err, errNotFound) {
		return nil, "", sluice.RoleNone, sluice.ErrNoDatabase(org, name)
	}
	if err != nil {
		return nil, "", sluice.RoleNone, err
	}
	return d, sdl, sluice.Role(role), nil
}

// withRole is a row of databaseColumns followed by a role, scanned by
// scanDatabase with the role going to role.
type withRole struct {
	row  pgx.Row
	role *int
}

func (w withRole) Scan(dest ...any) error { return w.row.Scan(append(dest, w.role)...) }

// Grant is a role granted to a user on a database.
type Grant struct {
	User string
	Role sluice.Role
}

// DatabaseRoles returns the roles granted on database dbID, by user name.
func (db *DB) DatabaseRoles(ctx context.Context, dbID int64) ([]Grant, error) {
	rows, err := db.pool.Query(ctx, `SELECT u.name, r.role FROM sluice.roles r JOIN sluice.users u ON u.id = r.user_id
		WHERE r.db_id = $1 ORDER BY u.name`, dbID)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Grant, error) {
		var g Grant
		var r int
		err := row.Scan(&g.User, &r)
		g.Role = sluice.Role(r)
		return g, err
	})
	return out, mapError(err)
}

// Roles returns userID's granted roles by database id.
func (db *DB) Roles(ctx context.Context, userID int64) (map[int64]sluice.Role, error) {
	rows, err := db.pool.Query(ctx, "SELECT db_id, role FROM sluice.roles WHERE user_id = $1", userID)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	out := map[int64]sluice.Role{}
	for rows.Next() {
		var id int64
		var r int
		if err := rows.Scan(&id, &r); err != nil {
			return nil, mapError(err)
		}
		out[id] = sluice.Role(r)
	}
	return out, mapError(rows.Err())
}

// TokenValid reports whether token id of userID exists and is unrevoked.
func (db *DB) TokenValid(ctx context.Context, userID, id int64) (bool, error) {
	var ok bool
	err := db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sluice.tokens WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL)", id, userID).Scan(&ok)
	return ok, mapError(err)
}
