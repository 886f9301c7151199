package daemon_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// ecJWKS returns the JWKS publishing keys by kid.
func ecJWKS(t *testing.T, keys map[string]*ecdsa.PrivateKey) []byte {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	var set []map[string]any
	for kid, k := range keys {
		p, err := k.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		set = append(set, map[string]any{"kty": "EC", "kid": kid, "use": "sig", "crv": "P-256", "x": b64(p[1:33]), "y": b64(p[33:])})
	}
	b, err := json.Marshal(map[string]any{"keys": set})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// adminJWT returns an ES256 JWT for the admin user signed with key.
func adminJWT(t *testing.T, kid string, key *ecdsa.PrivateKey) dt.Auth {
	return dt.Bearer(signJWT(t, jwt.SigningMethodES256, kid, jwtClaims("admin", time.Now().Add(time.Hour), nil), key))
}

// TestJWKSURLWithRotatingKey: a daemon verifies JWTs with the keys a
// local identity provider publishes at its JWKS URL, follows a key
// rotation without a restart (a JWT of the new key makes it fetch the
// set again), drops the retired key on a reload (SIGHUP), and keeps the
// keys it has while the URL is down.
func TestJWKSURLWithRotatingKey(t *testing.T) {
	t.Parallel()
	first, second := newECKey(t), newECKey(t)
	var mu sync.Mutex
	published, status, fetches := ecJWKS(t, map[string]*ecdsa.PrivateKey{"first": first}), 200, 0
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.WriteHeader(status)
		_, _ = w.Write(published)
	}))
	t.Cleanup(idp.Close)
	publish := func(b []byte, code int) {
		mu.Lock()
		published, status = b, code
		mu.Unlock()
	}
	d := dt.Start(t, func(c *config.Config) {
		c.JWTJWKSURL = idp.URL + "/.well-known/jwks.json"
		c.JWTJWKSHTTPLoopback = true // the test identity provider is plain HTTP on loopback
		c.JWTAudience = jwtAudience
		c.JWTIssuer = jwtIssuer
	})
	d.MustDo(t, 200, adminJWT(t, "first", first), "GET", "/api/info", nil)

	// Rotation: the provider publishes the second key and signs with it.
	publish(ecJWKS(t, map[string]*ecdsa.PrivateKey{"first": first, "second": second}), 200)
	d.MustDo(t, 200, adminJWT(t, "second", second), "GET", "/api/info", nil)
	mu.Lock()
	if fetches != 2 {
		t.Errorf("%d fetches of the JWKS, want 2 (start, unknown kid)", fetches)
	}
	mu.Unlock()

	// The first key is retired; a reload drops it.
	publish(ecJWKS(t, map[string]*ecdsa.PrivateKey{"second": second}), 200)
	if err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := d.MustDo(t, 401, adminJWT(t, "first", first), "GET", "/api/info", nil)
	if !strings.Contains(string(r.Body), `no key with kid \"first\" in jwt_jwks_url`) {
		t.Errorf("JWT of the retired key: %s", r.Body)
	}

	// The provider is down: the keys fetched last still verify.
	publish([]byte("down"), 503)
	if err := d.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Reload with the JWKS URL down: %v", err)
	}
	d.MustDo(t, 200, adminJWT(t, "second", second), "GET", "/api/info", nil)
}

// TestJWKSFileReload: a new jwt_jwks_file is read on Reload (SIGHUP), and
// a JWT of a key it no longer holds is refused at once, even one that
// verified just before (remembered); a broken file leaves the keys in use
// as they were.
func TestJWKSFileReload(t *testing.T) {
	t.Parallel()
	first, second := newECKey(t), newECKey(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ecJWKS(t, map[string]*ecdsa.PrivateKey{"first": first}))
	d := dt.Start(t, func(c *config.Config) { c.JWTJWKSFile = path })
	d.MustDo(t, 401, adminJWT(t, "second", second), "GET", "/api/info", nil)
	old := adminJWT(t, "first", first)
	d.MustDo(t, 200, old, "GET", "/api/info", nil)

	write(ecJWKS(t, map[string]*ecdsa.PrivateKey{"second": second}))
	if err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, adminJWT(t, "second", second), "GET", "/api/info", nil)
	d.MustDo(t, 401, old, "GET", "/api/info", nil)

	write([]byte(`{"keys":[`))
	if err := d.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "jwt_jwks_file") {
		t.Fatalf("Reload of a broken file: %v", err)
	}
	d.MustDo(t, 200, adminJWT(t, "second", second), "GET", "/api/info", nil)
}
