package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
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
// included: guard it like the admin password. Removing a key from the set
// (the answer to its compromise) refuses its JWTs at once and ends the
// streams opened with them, whatever exp their signer chose (KeyRemoved,
// OnKeysChanged).

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
	// (jwt_jwks_file), read at start and again by Reload.
	JWKSFile string
	// JWKSURL is where an identity provider publishes its JSON Web Key
	// Set instead (jwt_jwks_url): fetched at start, refreshed as its
	// Cache-Control says and when a JWT names an unknown kid. It must be
	// https, unless JWKSHTTPLoopback (jwt_jwks_http_loopback) allows http
	// on a loopback host.
	JWKSURL          string
	JWKSHTTPLoopback bool
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
	return c.HS256Secret != "" || c.HS256SecretFile != "" || c.JWKSFile != "" || c.JWKSURL != ""
}

// JWT verifies bearer JWTs: their signature with the key configured for
// their algorithm, then exp (required), nbf and iat (with a leeway), iss
// and aud. It is safe for concurrent use.
type JWT struct {
	secret    []byte  // HS256; nil: not accepted
	secretID  string  // the secret's identity (hs256ID)
	set       *keySet // the JWKS; nil: none
	userClaim string
	leeway    time.Duration
	parser    *jwt.Parser
}

// JWTDeps are what LoadJWT's verifier uses besides its configuration.
type JWTDeps struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Client fetches jwt_jwks_url (http.DefaultClient when nil).
	Client *http.Client
	// Logger receives failed refreshes of jwt_jwks_url (discarded when
	// nil).
	Logger *slog.Logger
}

// LoadJWT reads the files cfg names, fetches its JWKS URL, and returns the
// verifier, or nil when cfg enables no JWTs. Errors name the config key
// that is wrong. With a JWKS URL, call Run to keep the keys fresh.
func LoadJWT(ctx context.Context, cfg JWTConfig, deps JWTDeps) (*JWT, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if cfg.JWKSFile != "" && cfg.JWKSURL != "" {
		return nil, errors.New("jwt_jwks_file and jwt_jwks_url are both set: set one")
	}
	if cfg.JWKSURL != "" {
		if err := checkJWKSURL(cfg.JWKSURL, cfg.JWKSHTTPLoopback); err != nil {
			return nil, err
		}
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	client := http.DefaultClient
	if deps.Client != nil {
		client = deps.Client
	}
	// The keys come from the URL configured, or not at all: a redirect
	// (which a proxy or a compromised server could send anywhere, an
	// http:// URL included) is a failed fetch.
	c := *client
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("jwt_jwks_url answered with a redirect to %s: redirects are not followed; configure the URL the keys are at", req.URL.Redacted())
	}
	deps.Client = &c
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
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
	var set *keySet
	if cfg.JWKSFile != "" || cfg.JWKSURL != "" {
		set = &keySet{file: cfg.JWKSFile, url: cfg.JWKSURL, client: deps.Client, now: deps.Now, logger: deps.Logger}
		if err := set.load(ctx); err != nil {
			return nil, err
		}
	}
	return newJWT(secret, set, cfg, deps.Now)
}

// checkJWKSURL checks jwt_jwks_url: an https URL, or an http one on a
// loopback host when httpLoopback (jwt_jwks_http_loopback) allows it.
// The keys decide who may sign in as anyone: fetched over plain HTTP,
// anyone on the path could replace them.
func checkJWKSURL(raw string, httpLoopback bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		// Not shown: it may hold a password, which url.Redacted cannot
		// find in a URL it cannot parse.
		return fmt.Errorf("jwt_jwks_url: the value (%d bytes) is not an https URL: %v", len(raw), errors.Unwrap(err))
	}
	raw = u.Redacted() // shown without its password, if it has one
	if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("jwt_jwks_url: %q is not an https URL", raw)
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	a, err := netip.ParseAddr(host)
	loopback := err == nil && a.Unmap().IsLoopback() || strings.EqualFold(host, "localhost")
	switch {
	case !httpLoopback:
		return fmt.Errorf("jwt_jwks_url: %q is http, not https: the key set decides who may sign in, and over plain HTTP anyone on the path could replace it (jwt_jwks_http_loopback allows http on a loopback host, for tests)", raw)
	case !loopback:
		return fmt.Errorf("jwt_jwks_url: %q is http on a host that is not loopback; jwt_jwks_http_loopback allows http on 127.0.0.1, ::1 and localhost only", raw)
	}
	return nil
}

// NewJWT returns a verifier of HS256 JWTs signed with secret (none when
// empty) and of JWTs signed with the public keys of the JSON Web Key Set
// jwks (none when empty), checked as cfg says (its file names are not
// read). now is the clock (time.Now when nil).
func NewJWT(secret, jwks []byte, cfg JWTConfig, now func() time.Time) (*JWT, error) {
	var set *keySet
	if len(jwks) > 0 {
		keys, err := parseJWKS(jwks)
		if err != nil {
			return nil, fmt.Errorf("jwt_jwks_file: %w", err)
		}
		set = &keySet{keys: keys, now: now}
	}
	return newJWT(secret, set, cfg, now)
}

// newJWT returns the verifier of HS256 JWTs signed with secret and of
// JWTs signed with set's keys.
func newJWT(secret []byte, set *keySet, cfg JWTConfig, now func() time.Time) (*JWT, error) {
	if len(secret) > 0 && len(secret) < 32 {
		// RFC 7518 3.2: an HS256 key must be at least as long as the hash.
		return nil, fmt.Errorf("jwt_hs256_secret: %d bytes; it must be at least 32", len(secret))
	}
	if len(secret) == 0 && set == nil {
		return nil, errors.New("jwt: no HS256 secret and no keys, so no JWT could be verified")
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "sub"
	}
	if now == nil {
		now = time.Now
	}
	// The accepted algorithms: never "none", and never HS256 unless a
	// secret is set (so a public key can never be used as an HMAC
	// secret). With a key set, every public-key algorithm passes the
	// parser, since a reloaded or rotated set may bring another; key
	// then uses each key only with its own algorithm.
	var algs []string
	if len(secret) > 0 {
		algs = append(algs, "HS256")
	}
	if set != nil {
		algs = append(algs, publicKeyAlgs()...)
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
	j := &JWT{secret: secret, set: set, userClaim: cfg.UserClaim, leeway: cfg.Leeway, parser: jwt.NewParser(opts...)}
	if len(secret) > 0 {
		j.secretID = hs256ID(secret)
	}
	return j, nil
}

// hs256ID returns the identity of the HS256 secret, as keyID does for a
// public key: the secret is not reloaded, but replicas may be configured
// with different ones, and a stream ticket made on one is redeemed on
// another (postgres.CreateStreamTicket stores the identity). An HMAC of a
// fixed text keyed with the secret tells nothing more of the secret than
// any JWT signed with it, which its holder shows to every client.
func hs256ID(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sluice: the identity of the HS256 secret of jwt_hs256_secret"))
	return "HS256:" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verify checks the JWT raw and returns the user name it names, when it
// stops being valid (its exp plus the leeway: a stream opened with it ends
// exactly when a request with it would start being refused) and the
// identity of the key that verified it (see keyID and KeyRemoved: a
// stream opened with it ends when that key leaves the set). Errors are
// Unauthenticated and say what is wrong, never with the token.
func (j *JWT) Verify(raw string) (user string, expires time.Time, key string, err error) {
	fail := func(format string, args ...any) (string, time.Time, string, error) {
		return "", time.Time{}, "", sluice.Errorf(sluice.CodeUnauthenticated, format, args...)
	}
	if len(raw) > maxJWTBytes {
		return fail("invalid JWT: longer than %d bytes", maxJWTBytes)
	}
	if err := uniqueMembers(raw); err != nil {
		return fail("invalid JWT: %v", err)
	}
	claims := jwt.MapClaims{}
	// The keys the parser was given to try, to tell which one verified.
	var tried []publicKey
	t, err := j.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		keys, err := j.key(t)
		if err != nil {
			return nil, err
		}
		tried = keys
		if len(keys) == 1 {
			return keys[0].key, nil
		}
		var set jwt.VerificationKeySet
		for _, k := range keys {
			set.Keys = append(set.Keys, k.key)
		}
		return set, nil
	})
	if err != nil {
		return fail("invalid JWT: %v", err)
	}
	key, ok := verifiedBy(t, raw, tried)
	if !ok { // the parser found one; kept for safety
		return fail("invalid JWT: no key verifies its signature")
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil { // the parser requires it; kept for safety
		return fail("invalid JWT: no exp claim")
	}
	name, ok := claims[j.userClaim].(string)
	if !ok || name == "" {
		return fail("invalid JWT: claim %q (jwt_user_claim), which names the Sluice user, is missing or not a string", j.userClaim)
	}
	return name, exp.Add(j.leeway), key, nil
}

// verifiedBy returns the identity of the key among keys that verifies the
// signature of t, parsed from raw: the parser tries every key of a set and
// does not say which one did (a JWT without kid is checked against every
// key of its algorithm), so with more than one the signature is checked
// again with each.
func verifiedBy(t *jwt.Token, raw string, keys []publicKey) (string, bool) {
	if len(keys) == 1 {
		return keys[0].id, true
	}
	signed := raw[:strings.LastIndexByte(raw, '.')]
	for _, k := range keys {
		if t.Method.Verify(signed, t.Signature, k.key) == nil {
			return k.id, true
		}
	}
	return "", false
}

// uniqueMembers refuses a JWT whose header or payload names a member
// twice: JSON decoders differ on which one counts (Go's takes the last,
// others the first), so a token with two "sub" could name one user to
// its issuer and another to Sluice (RFC 7519 7.2 says to reject it).
func uniqueMembers(raw string) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return errors.New("a JWT has three parts separated by dots")
	}
	for i, what := range []string{"header", "payload"} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return fmt.Errorf("the %s is not base64url: %w", what, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("the %s is not a JSON object", what)
		}
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return fmt.Errorf("the %s is not valid JSON: %w", what, err)
			}
			name, _ := t.(string)
			if seen[name] {
				return fmt.Errorf("the %s names %q twice", what, name)
			}
			seen[name] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("the %s is not valid JSON: %w", what, err)
			}
		}
	}
	return nil
}

// key returns the keys that may verify t: the HS256 secret, or the JWKS
// key its kid names, or with no kid every JWKS key of its algorithm. A key
// is used only with its own algorithm.
func (j *JWT) key(t *jwt.Token) ([]publicKey, error) {
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
		return []publicKey{{alg: alg, key: j.secret, id: j.secretID}}, nil
	}
	if j.set == nil {
		return nil, fmt.Errorf("%s is not accepted (no jwt_jwks_file or jwt_jwks_url)", alg)
	}
	keys, err := j.set.current()
	if err != nil {
		return nil, err
	}
	if kid != "" {
		k, ok := keyByID(keys, kid)
		// A provider publishes a new key before it signs with it: an
		// unknown kid means the set changed since it was fetched.
		if !ok && j.set.refreshForKid(kid) {
			if keys, err = j.set.current(); err != nil {
				return nil, err
			}
			k, ok = keyByID(keys, kid)
		}
		if !ok {
			return nil, fmt.Errorf("no key with kid %q in %s", kid, j.set.source())
		}
		if k.alg != alg {
			return nil, fmt.Errorf("key %q is for %s, not %s", kid, k.alg, alg)
		}
		return []publicKey{k}, nil
	}
	var ofAlg []publicKey
	for _, k := range keys {
		if k.alg == alg {
			ofAlg = append(ofAlg, k)
		}
	}
	if len(ofAlg) == 0 {
		return nil, fmt.Errorf("no key for %s in %s", alg, j.set.source())
	}
	return ofAlg, nil
}

func keyByID(keys []publicKey, kid string) (publicKey, bool) {
	for _, k := range keys {
		if k.kid == kid {
			return k, true
		}
	}
	return publicKey{}, false
}

// Reload reads jwt_jwks_file again (on SIGHUP), or fetches jwt_jwks_url
// now. A set that cannot be read or parsed leaves the keys in use as they
// were, and the error says why; without a key set it returns ErrNoKeySet.
func (j *JWT) Reload(ctx context.Context) error {
	if j == nil || j.set == nil || (j.set.file == "" && j.set.url == "") {
		return ErrNoKeySet
	}
	return j.set.load(ctx)
}

// generation returns a number that moves whenever the key set changes
// (Reload, a fetch of jwt_jwks_url): a JWT verified before then must be
// verified again.
func (j *JWT) generation() uint64 {
	if j == nil || j.set == nil {
		return 0
	}
	return j.set.gen.Load()
}

// HasKey reports whether the key identified by id (as Verify returns it,
// sluice.Credential.JWTKey) is the HS256 secret or a key of the current
// set. Streams are not ended by it but by KeyRemoved: a key missing from
// the set may be one this replica has not learnt yet.
func (j *JWT) HasKey(id string) bool {
	switch {
	case j == nil || id == "":
		return false
	case id == j.secretID:
		return true
	case j.set != nil:
		return j.set.has(id)
	}
	return false
}

// KeyRemoved reports whether the key identified by id (as Verify returns
// it, sluice.Credential.JWTKey) was removed from this replica's key set
// by a reload of jwt_jwks_file or a fetch of jwt_jwks_url, less than an
// hour ago (jwksRemovedFor), and did not come back since: a stream opened
// with a JWT it verified, or with a ticket made with one, is refused and
// ended (the daemon wires it to changefeed.HubOptions.JWTKeyRemoved).
//
// A key the set never held is not removed. An identity provider
// publishes a key before it signs with it, and replicas learn it at
// different times: one by the fetch an unknown kid causes, another only
// on its Cache-Control schedule; with jwt_jwks_file, replicas reload one
// by one. A stream ticket made on the first replica with a JWT of the new
// key and redeemed on the other never shows that replica the JWT, so
// nothing would make it fetch the key: it must open the stream. The
// HS256 secret is never removed. A key set that could not be refreshed
// keeps its keys (JWTs are refused once it is too stale, but streams are
// not ended for that: only a set that drops the key says that the key was
// withdrawn).
func (j *JWT) KeyRemoved(id string) bool {
	if j == nil || id == "" || id == j.secretID || j.set == nil {
		return false
	}
	return j.set.wasRemoved(id)
}

// KeyChanges returns the identities (as Verify returns them,
// sluice.Credential.JWTKey) of the keys a reload or fetch removed from
// this replica's key set less than an hour ago (as KeyRemoved judges
// them), and of the keys the set holds. Once the set changed, webhooks
// made with a JWT of the first are paused
// (webhook.Deliverer.JWTKeysChanged) through a record in Postgres that
// every replica reads, and which the second clear: a key the set holds
// again is no longer removed, however long ago it left. The HS256
// secret is in neither: it is never removed.
func (j *JWT) KeyChanges() (removed, held []string) {
	if j == nil || j.set == nil {
		return nil, nil
	}
	return j.set.changes()
}

// OnKeysChanged makes f be called each time the key set changes (a
// reload of jwt_jwks_file, a fetch of jwt_jwks_url that brought another
// set), after the change, from the goroutine that made it, with no lock
// held: the daemon ends there the streams of JWTs whose key was removed
// (KeyRemoved). A set that failed to load, or loaded unchanged, calls
// nothing.
func (j *JWT) OnKeysChanged(f func()) {
	if j != nil && j.set != nil {
		j.set.onChange.Store(&f)
	}
}

// Run keeps the keys of jwt_jwks_url fresh until ctx ends (see
// keyset.go); without a URL it returns at once.
func (j *JWT) Run(ctx context.Context) {
	if j != nil && j.set != nil {
		j.set.run(ctx)
	}
}

// jwtCredential authenticates the bearer JWT raw: the user it names, read
// from Postgres as for a password (so a deleted user is refused), with
// the user's password hash as read, the JWT's expiry and the identity of
// the key that verified it. The JWT itself does not depend on the
// password, but a password change ends the streams of every credential of
// the user that is not a token (sluice.AccessChange.Affects): the hash is
// what lets engine.CheckGrant, which judges a grant against Postgres
// rather than the access log, and a stream ticket the JWT makes, tell
// that the password changed since. Without it a JWT's grant judged by
// CheckGrant outlived the change the access log ends it for.
func (a *Authenticator) jwtCredential(ctx context.Context, raw string) (*sluice.Credential, error) {
	if a.jwt == nil {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "the bearer token is a JWT, and this server accepts none (configure jwt_hs256_secret, jwt_hs256_secret_file, jwt_jwks_file or jwt_jwks_url)")
	}
	name, expires, key, err := a.jwt.Verify(raw)
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
	c.ExpiresAt = expires
	c.JWTKey = key
	return c, nil
}
