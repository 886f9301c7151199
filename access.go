package sluice

import "time"

// AccessKind says what an AccessChange changed.
type AccessKind string

// The kinds of access change.
const (
	AccessToken        AccessKind = "token"        // TokenID was revoked
	AccessPassword     AccessKind = "password"     // UserID's password changed
	AccessUser         AccessKind = "user"         // UserID was deleted
	AccessRole         AccessKind = "role"         // UserID's role on DatabaseID is now Role
	AccessDatabase     AccessKind = "database"     // DatabaseID was deleted
	AccessOrganization AccessKind = "organization" // Org was deleted, with its users and databases
)

// AccessChange is one entry of the access log: a change to credentials or
// access, numbered by a gapless version that equals commit order (see
// migrations/0005_access_log.sql). Open streams apply every access change
// visible in the snapshot a commit was read in before that commit reaches
// them.
type AccessChange struct {
	Version    int64
	Kind       AccessKind
	UserID     int64
	TokenID    int64
	DatabaseID int64
	Org        string
	Role       Role
}

// Credential is how a request authenticated: the user, and the credential
// it presented, as of access log version AccessVersion.
type Credential struct {
	User *User
	// TokenID is the API token presented; 0 for a password (Basic auth).
	TokenID int64
	// PasswordHash is the user's password hash when a password was
	// presented, so that a later check can tell the password is unchanged.
	// Never shown.
	PasswordHash string
	// AccessVersion is the access log version read in the same snapshot as
	// the credential.
	AccessVersion int64
	// ExpiresAt, when not zero, is when the credential stops being valid
	// (a JWT's exp, a stream ticket's lifetime): open streams that
	// authenticated with it end then.
	ExpiresAt time.Time
}

// Grant is what an open stream was allowed when it opened: a credential, a
// database and the role its payloads are shaped for. The change feed keeps
// one per stream and ends the stream when an access change takes any of it
// away.
type Grant struct {
	Credential
	Database *Database
	Role     Role
}
