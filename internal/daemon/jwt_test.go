package daemon_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

const (
	jwtSecret   = "the-hs256-secret-of-these-tests-is-long-enough"
	jwtIssuer   = "https://id.example.com/"
	jwtAudience = "sluice"
	jwtLeeway   = time.Second
)

// jwtFixture is a daemon that accepts HS256 JWTs and RS256 and ES256 JWTs
// whose keys are in a JWKS file, with database acme/notes readable by
// ulla.
type jwtFixture struct {
	d   *dt.Daemon
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newJWTFixture(t *testing.T) *jwtFixture {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	ecPoint, err := ek.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
		{"kty": "EC", "kid": "ec-1", "use": "sig", "crv": "P-256", "x": b64(ecPoint[1:33]), "y": b64(ecPoint[33:])},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	d := dt.Start(t, func(c *config.Config) {
		c.JWTHS256Secret = jwtSecret
		c.JWTJWKSFile = path
		c.JWTIssuer = jwtIssuer
		c.JWTAudience = jwtAudience
		c.JWTLeeway = jwtLeeway
	})
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/notes", mustJSON(t, map[string]string{"schema": notesSDL}))
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"ulla","organization":"acme","password":"ulla-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"read"}`)
	return &jwtFixture{d: d, rsa: rk, ec: ek}
}

// claims returns valid claims for user, expiring at exp, edited by edit.
func jwtClaims(user string, exp time.Time, edit func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"sub": user, "iss": jwtIssuer, "aud": jwtAudience, "exp": exp.Unix(), "iat": now.Unix(), "nbf": now.Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

func signJWT(t *testing.T, m jwt.SigningMethod, kid string, claims jwt.MapClaims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWT: requests with HS256, RS256 and ES256 JWTs naming a user act as
// that user; every way a JWT can be wrong is a 401 that says why.
func TestJWT(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	hour := time.Now().Add(time.Hour)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: func() []byte {
		b, err := x509.MarshalPKIXPublicKey(&f.rsa.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()})
	secret := []byte(jwtSecret)
	cases := []struct {
		name   string
		token  func(*testing.T) string // signed when the subtest runs: a parallel subtest may wait long for its turn
		status int
		msg    string
	}{
		{"HS256", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, nil), secret)
		}, 200, ""},
		{"RS256", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodRS256, "rsa-1", jwtClaims("ulla", hour, nil), f.rsa)
		}, 200, ""},
		{"ES256", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodES256, "ec-1", jwtClaims("ulla", hour, nil), f.ec)
		}, 200, ""},
		{"ES256 without kid", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodES256, "", jwtClaims("ulla", hour, nil), f.ec)
		}, 200, ""},
		{"unknown user", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("nobody", hour, nil), secret)
		}, 401, `names user "nobody", who does not exist`},
		{"bad signature", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodRS256, "rsa-1", jwtClaims("ulla", hour, nil), other)
		}, 401, "signature is invalid"},
		{"wrong secret", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, nil), []byte("not-the-secret-but-long-enough-anyway"))
		}, 401, "signature is invalid"},
		{"HS256 signed with the RSA public key", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "rsa-1", jwtClaims("ulla", hour, nil), pubPEM)
		}, 401, "signature is invalid"},
		{"wrong alg for the key", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodES256, "rsa-1", jwtClaims("ulla", hour, nil), f.ec)
		}, 401, `key "rsa-1" is for RS256, not ES256`},
		{"alg not configured", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodRS512, "", jwtClaims("ulla", hour, nil), f.rsa)
		}, 401, "no key for RS512 in jwt_jwks_file"},
		{"alg none", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodNone, "", jwtClaims("ulla", hour, nil), jwt.UnsafeAllowNoneSignatureType)
		}, 401, "signing method none is invalid"},
		{"expired", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", time.Now().Add(-time.Minute), nil), secret)
		}, 401, "token is expired"},
		{"no exp", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, func(c jwt.MapClaims) { delete(c, "exp") }), secret)
		}, 401, "missing required claim: exp"},
		{"not yet valid", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Minute).Unix() }), secret)
		}, 401, "token is not valid yet"},
		{"issued in the future", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Minute).Unix() }), secret)
		}, 401, "token used before issued"},
		{"wrong issuer", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, func(c jwt.MapClaims) { c["iss"] = "https://other.example.com/" }), secret)
		}, 401, "invalid issuer"},
		{"no issuer", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, func(c jwt.MapClaims) { delete(c, "iss") }), secret)
		}, 401, "iss claim is required"},
		{"wrong audience", func(t *testing.T) string {
			return signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, func(c jwt.MapClaims) { c["aud"] = []string{"billing"} }), secret)
		}, 401, "invalid audience"},
		{"garbage", func(t *testing.T) string { return "a.b.c" }, 401, "invalid JWT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			token := c.token(t)
			r := f.d.Do(t, dt.Bearer(token), "GET", "/api/document/acme/notes", nil)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.status == 200 {
				return
			}
			if _, msg := errBody(t, r); !strings.Contains(msg, c.msg) {
				t.Errorf("message %q, want %q", msg, c.msg)
			}
			if strings.Contains(string(r.Body), token) {
				t.Errorf("the answer shows the token: %s", r.Body)
			}
			if r.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("the user's roles apply", func(t *testing.T) {
		t.Parallel()
		tok := signJWT(t, jwt.SigningMethodHS256, "", jwtClaims("ulla", hour, nil), secret)
		r := f.d.Do(t, dt.Bearer(tok), "POST", "/api/document/acme/notes", `{"@type":"Note","text":"x"}`)
		if typ, _ := errBody(t, r); r.Status != 403 || typ != "api:Forbidden" {
			t.Errorf("a reader's JWT writes: %d %s, want 403", r.Status, typ)
		}
	})
	t.Run("a deleted user's JWT", func(t *testing.T) {
		t.Parallel()
		f.d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"gone","organization":"acme","password":"gone-password"}`)
		tok := signJWT(t, jwt.SigningMethodRS256, "rsa-1", jwtClaims("gone", hour, nil), f.rsa)
		f.d.MustDo(t, 200, dt.Bearer(tok), "GET", "/api/info", nil)
		f.d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/users/gone", nil)
		if r := f.d.Do(t, dt.Bearer(tok), "GET", "/api/info", nil); r.Status != 401 {
			t.Errorf("after the user was deleted: %d, want 401", r.Status)
		}
	})
}

// TestJWTStreamEndsAtExp: streams opened with a JWT, directly or through a
// stream ticket the JWT made, get events until the JWT expires (exp plus
// the leeway), then end with an error.
func TestJWTStreamEndsAtExp(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	// Whole seconds, as exp is; long enough for the streams to open and
	// get an event on a loaded machine (running the whole suite, -race):
	// past exp the streams are refused, and the test fails.
	exp := time.Now().Add(15 * time.Second).Truncate(time.Second)
	tok := signJWT(t, jwt.SigningMethodES256, "ec-1", jwtClaims("ulla", exp, nil), f.ec)
	ticket, ticketExp := newTicket(t, f.d, dt.Bearer(tok), "")
	if ticketExp.After(exp.Add(jwtLeeway)) {
		t.Errorf("the ticket expires at %v, after the JWT that made it (%v)", ticketExp, exp.Add(jwtLeeway))
	}
	gql := dt.StreamRequest{Method: "POST", Path: "/api/graphql/acme/notes", Body: noteSub, Header: []string{"Accept", "text/event-stream"}}
	streams := []kindStream{
		{"graphql-sse", f.d.MustOpenStream(t, dt.Bearer(tok), gql), "sse"},
		{"rest", f.d.MustOpenStream(t, dt.Bearer(tok), dt.StreamRequest{Path: "/api/subscribe/acme/notes/Note"}), "rest"},
		{"rest with a ticket", f.d.MustOpenStream(t, dt.NoAuth(), eventSource("/api/subscribe/acme/notes/Note", ticket)), "rest"},
	}
	for _, k := range streams {
		if first := k.s.Next().String(); !strings.HasPrefix(first, ": connected") {
			t.Fatalf("%s: first frame %q", k.name, first)
		}
	}
	f.d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n1","text":"before exp"}`)
	expectEvent(t, streams, "Note/n1")
	expectEnd(t, streams, "", "UNAUTHENTICATED", "NotAuthenticated", time.Now())
	if ended := time.Now(); ended.Before(exp.Add(jwtLeeway)) {
		t.Errorf("the streams ended at %v, before the JWT expired at %v", ended, exp.Add(jwtLeeway))
	}
	if r := f.d.Do(t, dt.Bearer(tok), "GET", "/api/document/acme/notes", nil); r.Status != 401 {
		t.Errorf("a request with the expired JWT: %d, want 401", r.Status)
	}
}

// TestJWTConfigErrors: a daemon with a wrong JWT configuration does not
// start, and its error names the key without showing the secret.
func TestJWTConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badJWKS := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badJWKS, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(jwtSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewDatabase(t)
	cases := []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"short secret", func(c *config.Config) { c.JWTHS256Secret = "short-secret" }, "jwt_hs256_secret: 12 bytes; it must be at least 32"},
		{"secret twice", func(c *config.Config) { c.JWTHS256Secret = jwtSecret; c.JWTHS256SecretFile = secretFile }, "both set"},
		{"missing JWKS file", func(c *config.Config) { c.JWTJWKSFile = filepath.Join(dir, "none.json") }, "jwt_jwks_file: open"},
		{"symmetric key in the JWKS", func(c *config.Config) { c.JWTJWKSFile = badJWKS }, "set it as jwt_hs256_secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runWith(dbURL, c.set)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want an error with %q", err, c.want)
			}
			if strings.Contains(err.Error(), "short-secret") || strings.Contains(err.Error(), jwtSecret) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
	t.Run("secret file", func(t *testing.T) {
		d := dt.Start(t, dt.WithDatabaseURL(dbURL), func(c *config.Config) { c.JWTHS256SecretFile = secretFile })
		tok := signJWT(t, jwt.SigningMethodHS256, "", jwt.MapClaims{"sub": "admin", "exp": time.Now().Add(time.Hour).Unix()}, []byte(jwtSecret))
		d.MustDo(t, 200, dt.Bearer(tok), "GET", "/api/info", nil)
	})
}
