package auth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice"
)

// How a JWT maps to Sluice: it names an existing Sluice user (by default
// in its sub claim), and that user's roles apply, exactly as if the user
// had presented a password. The JWT carries no roles of its own: roles
// stay in one place, where the access log records every change and open
// streams follow it, and a role claim could not be taken back from a
// token already issued. The user is read from Postgres on every request,
// so deleting it refuses its JWTs at once and ends its streams. Whoever
// holds the signing key can therefore act as any user, the super user
// included: guard it like the admin password.

// maxJWTBytes bounds the bearer JWTs that are parsed: real ones are a few
// hundred bytes to a few KiB; parsing has a cost per byte.
const maxJWTBytes = 16 << 10

// JWTConfig is the JWT configuration as the config keys give it.
type JWTConfig struct {
	// HS256Secret is the HMAC secret of HS256 JWTs (jwt_hs256_secret), at
	// least 32 bytes; HS256SecretFile names a file holding it instead
	// (jwt_hs256_secret_file; a final newline is not part of it).
	HS256Secret     string
	HS256SecretFile string
	// JWKSFile names a JSON Web Key Set of the public keys of RS256,
	// ES256 (and the other RSA, ECDSA and EdDSA algorithms) JWTs
	// (jwt_jwks_file).
	JWKSFile string
	// Issuer and Audience, when set, must be the JWT's iss and one of its
	// aud (jwt_issuer, jwt_audience).
	Issuer   string
	Audience string
	// UserClaim is the claim that names the Sluice user (jwt_user_claim).
	UserClaim string
	// Leeway is the clock skew allowed for exp, nbf and iat (jwt_leeway).
	Leeway time.Duration
}

// Enabled reports whether JWTs are accepted: a secret or a key set is set.
func (c JWTConfig) Enabled() bool {
	return c.HS256Secret != "" || c.HS256SecretFile != "" || c.JWKSFile != ""
}

// JWT verifies bearer JWTs: their signature with the key configured for
// their algorithm, then exp (required), nbf and iat (with a leeway), iss
// and aud. It is safe for concurrent use.
type JWT struct {
	secret    []byte      // HS256; nil: not accepted
	keys      []publicKey // from the JWKS file
	userClaim string
	leeway    time.Duration
	parser    *jwt.Parser
}

// LoadJWT reads the files cfg names and returns the verifier, or nil when
// cfg enables no JWTs. now is the clock (time.Now when nil). Errors name
// the config key that is wrong.
func LoadJWT(cfg JWTConfig, now func() time.Time) (*JWT, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	secret := []byte(cfg.HS256Secret)
	if cfg.HS256SecretFile != "" {
		if cfg.HS256Secret != "" {
			return nil, errors.New("jwt_hs256_secret and jwt_hs256_secret_file are both set: set one")
		}
		b, err := os.ReadFile(cfg.HS256SecretFile)
		if err != nil {
			return nil, fmt.Errorf("jwt_hs256_secret_file: %w", err)
		}
		// Files written by echo or an editor end with a newline that no
		// JWT issuer's secret has.
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	var jwks []byte
	if cfg.JWKSFile != "" {
		var err error
		if jwks, err = os.ReadFile(cfg.JWKSFile); err != nil {
			return nil, fmt.Errorf("jwt_jwks_file: %w", err)
		}
	}
	return NewJWT(secret, jwks, cfg, now)
}

// NewJWT returns a verifier of HS256 JWTs signed with secret (none when
// empty) and of JWTs signed with the public keys of the JSON Web Key Set
// jwks (none when empty), checked as cfg says (its file names are not
// read). now is the clock (time.Now when nil).
func NewJWT(secret, jwks []byte, cfg JWTConfig, now func() time.Time) (*JWT, error) {
	if len(secret) > 0 && len(secret) < 32 {
		// RFC 7518 3.2: an HS256 key must be at least as long as the hash.
		return nil, fmt.Errorf("jwt_hs256_secret: %d bytes; it must be at least 32", len(secret))
	}
	var keys []publicKey
	if len(jwks) > 0 {
		var err error
		if keys, err = parseJWKS(jwks); err != nil {
			return nil, fmt.Errorf("jwt_jwks_file: %w", err)
		}
	}
	if len(secret) == 0 && len(keys) == 0 {
		return nil, errors.New("jwt: no HS256 secret and no keys, so no JWT could be verified")
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "sub"
	}
	if now == nil {
		now = time.Now
	}
	// The accepted algorithms are exactly those of the configured keys:
	// never "none", and never HS256 unless a secret is set (so a public
	// key can never be used as an HMAC secret).
	var algs []string
	if len(secret) > 0 {
		algs = append(algs, "HS256")
	}
	for _, k := range keys {
		if !slices.Contains(algs, k.alg) {
			algs = append(algs, k.alg)
		}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	return &JWT{secret: secret, keys: keys, userClaim: cfg.UserClaim, leeway: cfg.Leeway, parser: jwt.NewParser(opts...)}, nil
}

// Verify checks the JWT raw and returns the user name it names and when it
// stops being valid (its exp plus the leeway: a stream opened with it ends
// exactly when a request with it would start being refused). Errors are
// Unauthenticated and say what is wrong, never with the token.
func (j *JWT) Verify(raw string) (user string, expires time.Time, err error) {
	if len(raw) > maxJWTBytes {
		return "", time.Time{}, sluice.Errorf(sluice.CodeUnauthenticated, "invalid JWT: longer than %d bytes", maxJWTBytes)
	}
	claims := jwt.MapClaims{}
	if _, err := j.parser.ParseWithClaims(raw, claims, j.key); err != nil {
		return "", time.Time{}, sluice.Errorf(sluice.CodeUnauthenticated, "invalid JWT: %v", err)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil { // the parser requires it; kept for safety
		return "", time.Time{}, sluice.Errorf(sluice.CodeUnauthenticated, "invalid JWT: no exp claim")
	}
	name, ok := claims[j.userClaim].(string)
	if !ok || name == "" {
		return "", time.Time{}, sluice.Errorf(sluice.CodeUnauthenticated, "invalid JWT: claim %q (jwt_user_claim), which names the Sluice user, is missing or not a string", j.userClaim)
	}
	return name, exp.Add(j.leeway), nil
}

// key returns the key that verifies t: the HS256 secret, or the JWKS key
// its kid names, or with no kid every JWKS key of its algorithm. A key is
// used only with its own algorithm.
func (j *JWT) key(t *jwt.Token) (any, error) {
	// RFC 7515 4.1.11: a JWT whose crit header names extensions the
	// verifier does not understand must be refused; Sluice knows none.
	if _, ok := t.Header["crit"]; ok {
		return nil, errors.New("the JWT has a crit header, whose extensions this server does not support")
	}
	alg := t.Method.Alg()
	kid, _ := t.Header["kid"].(string)
	if alg == "HS256" {
		if j.secret == nil {
			return nil, errors.New("HS256 is not accepted (no jwt_hs256_secret)")
		}
		return j.secret, nil
	}
	if kid != "" {
		for _, k := range j.keys {
			if k.kid == kid {
				if k.alg != alg {
					return nil, fmt.Errorf("key %q is for %s, not %s", kid, k.alg, alg)
				}
				return k.key, nil
			}
		}
		return nil, fmt.Errorf("no key with kid %q in jwt_jwks_file", kid)
	}
	var set jwt.VerificationKeySet
	for _, k := range j.keys {
		if k.alg == alg {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("no key for %s in jwt_jwks_file", alg)
	}
	return set, nil
}

// jwtCredential authenticates the bearer JWT raw: the user it names, read
// from Postgres as for a password (so a deleted user is refused), with no
// password hash (a password change does not concern a JWT, though it
// ends the streams of every credential of the user that is not a token)
// and the JWT's expiry.
func (a *Authenticator) jwtCredential(ctx context.Context, raw string) (*sluice.Credential, error) {
	if a.jwt == nil {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "the bearer token is a JWT, and this server accepts none (configure jwt_hs256_secret, jwt_hs256_secret_file or jwt_jwks_file)")
	}
	name, expires, err := a.jwt.Verify(raw)
	if err != nil {
		return nil, err
	}
	c, err := a.store.PasswordCredential(ctx, name)
	if sluice.ErrorCode(err) == sluice.CodeNotFound {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "the JWT names user %q, who does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	c.PasswordHash = ""
	c.ExpiresAt = expires
	return c, nil
}
