// Package auth authenticates requests: Basic auth against bcrypt password
// hashes and bearer API tokens, whose secrets are stored only as SHA-256
// hashes. Authorization (which role a user has on a database) is the engine's
// job.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/ttlcache"
)

// TokenPrefix starts every API token, so leaked tokens are easy to grep for.
const TokenPrefix = "sluice_"

// Store is what authentication reads.
type Store interface {
	UserByName(ctx context.Context, name string) (*sluice.User, string, error)
	UserByToken(ctx context.Context, hash []byte) (*sluice.User, error)
}

// Authenticator checks credentials. It is safe for concurrent use.
type Authenticator struct {
	store Store
	cost  int
	// verified remembers credentials that checked out, by a SHA-256 of the
	// Authorization header, for CacheTTL: bcrypt costs tens of
	// milliseconds and a token check a round trip, on every request.
	verified *ttlcache.Cache[[sha256.Size]byte, *sluice.User]
}

// CacheTTL is how long verified credentials are remembered. A password
// change or token revocation takes effect at once on the replica that made
// it (Forget) and within CacheTTL on the others.
const CacheTTL = 2 * time.Second

// New returns an Authenticator reading users from store. cost is the bcrypt
// cost for new hashes (bcrypt.DefaultCost when 0; tests use bcrypt.MinCost).
func New(store Store, cost int) *Authenticator {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	return &Authenticator{store: store, cost: cost, verified: ttlcache.New[[sha256.Size]byte, *sluice.User](CacheTTL, time.Now)}
}

// Forget drops every remembered credential (after a revocation or a
// password change).
func (a *Authenticator) Forget() { a.verified.Clear() }

// HashPassword returns the bcrypt hash of password.
func (a *Authenticator) HashPassword(password string) (string, error) {
	if len(password) > 72 {
		return "", sluice.Errorf(sluice.CodeInvalid, "password is longer than 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), a.cost)
	return string(h), err
}

// CheckPassword reports whether password matches hash.
func CheckPassword(hash, password string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// NewToken returns a new random token secret and the hash to store.
func NewToken() (secret string, hash []byte) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashToken(secret)
}

// HashToken returns the stored form of a token secret.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// RandomPassword returns a random password for the first start.
func RandomPassword() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ErrNoCredentials is returned by Authenticate for a request that carries
// none; the HTTP layer answers 401 with WWW-Authenticate.
var ErrNoCredentials = sluice.Errorf(sluice.CodeUnauthenticated, "authentication required: use Basic auth or a bearer token")

// Authenticate returns the user the request's Authorization header names.
// It returns ErrNoCredentials when there is none and an Unauthenticated
// error for wrong credentials.
func (a *Authenticator) Authenticate(r *http.Request) (*sluice.User, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, ErrNoCredentials
	}
	key := sha256.Sum256([]byte(h))
	if u, ok := a.verified.Get(key); ok {
		return u, nil
	}
	u, err := a.check(r, h)
	if err == nil {
		a.verified.Put(key, u)
	}
	return u, err
}

func (a *Authenticator) check(r *http.Request, h string) (*sluice.User, error) {
	scheme, cred, _ := strings.Cut(h, " ")
	switch strings.ToLower(scheme) {
	case "basic":
		name, password, ok := r.BasicAuth()
		if !ok {
			return nil, sluice.Errorf(sluice.CodeUnauthenticated, "malformed Basic authorization header")
		}
		u, hash, err := a.store.UserByName(r.Context(), name)
		if sluice.ErrorCode(err) == sluice.CodeNotFound || (err == nil && !CheckPassword(hash, password)) {
			return nil, sluice.Errorf(sluice.CodeUnauthenticated, "wrong user name or password")
		}
		return u, err
	case "bearer", "token":
		cred = strings.TrimSpace(cred)
		if cred == "" {
			return nil, sluice.Errorf(sluice.CodeUnauthenticated, "empty bearer token")
		}
		u, err := a.store.UserByToken(r.Context(), HashToken(cred))
		var se *sluice.Error
		if errors.As(err, &se) {
			return nil, err
		}
		return u, err
	default:
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "unsupported authorization scheme %q: use Basic or Bearer", scheme)
	}
}

type userKey struct{}

// WithUser returns ctx carrying the authenticated user u.
func WithUser(ctx context.Context, u *sluice.User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the authenticated user carried by ctx, or nil.
func UserFrom(ctx context.Context) *sluice.User {
	u, _ := ctx.Value(userKey{}).(*sluice.User)
	return u
}
