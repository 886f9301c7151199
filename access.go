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
	// PasswordHash is the user's password hash when a password or a JWT
	// was presented (a password change ends the streams of both), so that
	// a later check can tell the password is unchanged. Never shown.
	PasswordHash string
	// AccessVersion is the access log version read in the same snapshot as
	// the credential.
	AccessVersion int64
	// ExpiresAt, when not zero, is when the credential stops being valid
	// (a JWT's exp plus the leeway; a stream ticket passes on the expiry
	// of the credential that made it, not its own short lifetime): open
	// streams that authenticated with it end then.
	ExpiresAt time.Time
	// JWTKey identifies the key that verified the JWT presented (its
	// algorithm and a digest of the key; see auth.JWT.Verify), empty for
	// any other credential; a stream ticket made with a JWT passes it on.
	// Open streams that authenticated with it end when a reload or a
	// fetch of the key set removes the key (changefeed.Hub.JWTKeysChanged):
	// removing a key is how an operator answers its compromise, and its
	// holder chose the JWT's exp.
	JWTKey string
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

// Affects returns the error that ends what holds grant (an open stream, a
// webhook) after access change c, or nil when c leaves the grant intact:
// the one judgement of an access change that every consumer of the log
// applies, up to the access version of what it hands on, before handing
// it on (the stream guards, live query results, webhooks).
func (c AccessChange) Affects(grant *Grant) *Error {
	u, d := grant.User, grant.Database
	switch c.Kind {
	case AccessToken:
		if grant.TokenID != 0 && grant.TokenID == c.TokenID {
			return Errorf(CodeUnauthenticated, "the token this stream was opened with was revoked")
		}
	case AccessPassword:
		if grant.TokenID == 0 && u.ID == c.UserID {
			return Errorf(CodeUnauthenticated, "the password of %s changed; authenticate again", u.Name)
		}
	case AccessUser:
		if u.ID == c.UserID {
			return Errorf(CodeUnauthenticated, "user %s was deleted", u.Name)
		}
	case AccessRole:
		if !u.Superuser && u.ID == c.UserID && d.ID == c.DatabaseID && c.Role < grant.Role {
			if c.Role == RoleNone {
				return Errorf(CodeForbidden, "the access of %s to %s was revoked", u.Name, d.Path())
			}
			return Errorf(CodeForbidden, "the role of %s on %s was narrowed to %s; subscribe again", u.Name, d.Path(), c.Role)
		}
	case AccessDatabase:
		if d.ID == c.DatabaseID {
			return Errorf(CodeNotFound, "database %s was deleted", d.Path())
		}
	case AccessOrganization:
		if d.Org == c.Org || u.Org == c.Org {
			return Errorf(CodeNotFound, "organization %s was deleted", c.Org)
		}
	default:
		// A kind this binary does not know (a newer replica wrote it):
		// end rather than guess; a client subscribes again.
		return Errorf(CodeForbidden, "the access of %s changed; subscribe again", u.Name)
	}
	return nil
}
