package webhook_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// publishJWKS writes the public keys of keys, by kid, to path as a JWKS.
func publishJWKS(t *testing.T, path string, keys map[string]*ecdsa.PrivateKey) {
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
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// bearerJWT returns a bearer ES256 JWT for user, signed with key (kid),
// that never expires: whoever holds a key chooses exp.
func bearerJWT(t *testing.T, user, kid string, key *ecdsa.PrivateKey) dt.Auth {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": user, "exp": time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return dt.Bearer(s)
}

// TestWebhookOfARemovedJWTKeyIsRevoked: removing a key from the JWT key
// set is how an operator answers its compromise, and its holder could
// sign as anyone, for ever. A webhook made (or last re-pointed) with a
// JWT that key verified is paused as revoked, as one made with an API
// token is when the token is revoked, on every replica: here replica B
// drops the key while replica A (which took the lease first, and still
// has the key) delivers. A plain resume is refused, on either replica,
// while the key stays removed; a resume with after, as the admin who
// resumes it, goes on (and a plain resume once the key is back). A
// webhook made afterwards on A with a JWT of the key is paused when it
// starts. A webhook of a key still in the set goes on.
// Found by review: such webhooks went on delivering after the key was
// removed.
func TestWebhookOfARemovedJWTKeyIsRevoked(t *testing.T) {
	t.Parallel()
	keyA, keyB := newKey(t), newKey(t)
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	both := map[string]*ecdsa.PrivateKey{"a": keyA, "b": keyB}
	publishJWKS(t, pathA, both)
	publishJWKS(t, pathB, both)
	withJWKS := func(path string) dt.Option { return func(c *config.Config) { c.JWTJWKSFile = path } }
	ra, rb := startGoReceiver(t), startGoReceiver(t)
	a := dt.Start(t, fastRetries, withJWKS(pathA))
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), fastRetries, withJWKS(pathB))
	a.CreateDatabase(t, "keyed", personSchema)
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/keyed", `{"user":"rita","role":"admin"}`)
	jwtA, jwtB := bearerJWT(t, "rita", "a", keyA), bearerJWT(t, "rita", "b", keyB)
	var ha, hb hook
	if err := json.Unmarshal(b.MustDo(t, 201, jwtA, "POST", "/api/webhooks/admin/keyed", fmt.Sprintf(`{"url":%q}`, ra.srv.URL)).Body, &ha); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.MustDo(t, 201, jwtB, "POST", "/api/webhooks/admin/keyed", fmt.Sprintf(`{"url":%q}`, rb.srv.URL)).Body, &hb); err != nil {
		t.Fatal(err)
	}
	insert(t, a, "keyed", "before")
	for _, r := range []*goReceiver{ra, rb} {
		if body := r.next(t); !strings.Contains(body, "Person/before") {
			t.Fatalf("before the key's removal: %s", body)
		}
	}
	// The receiver has the request before the deliverer records its
	// answer: a pause in between leaves the webhook before the commit,
	// which a resume from its position then delivers again (at least
	// once). The key is removed once the delivery is recorded.
	waitStatus(t, a, "keyed", ha.ID, 30*time.Second, func(m map[string]any) bool {
		p, _ := m["position"].(string)
		return p != "" && !strings.Contains(p, "-0-")
	})

	publishJWKS(t, pathB, map[string]*ecdsa.PrivateKey{"b": keyB})
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, a, "keyed", ha.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
	if msg := st["status_message"].(string); !strings.Contains(msg, "rita") || !strings.Contains(msg, "key") || !strings.Contains(msg, "removed") {
		t.Fatalf("revoked status message %q, want it to name rita and the removed key", msg)
	}
	insert(t, a, "keyed", "after")
	if body := rb.next(t); !strings.Contains(body, "Person/after") {
		t.Fatalf("the webhook of the key kept: %s", body)
	}
	drained(t, ra, "Person/after")

	// Replica A, not reloaded yet, still takes JWTs of key a: a webhook
	// made there with one is paused as soon as it starts.
	rc := startGoReceiver(t)
	var hc hook
	if err := json.Unmarshal(a.MustDo(t, 201, jwtA, "POST", "/api/webhooks/admin/keyed", fmt.Sprintf(`{"url":%q}`, rc.srv.URL)).Body, &hc); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, "keyed", hc.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
	insert(t, a, "keyed", "later")
	if body := rb.next(t); !strings.Contains(body, "Person/later") {
		t.Fatalf("the webhook of the key kept: %s", body)
	}
	drained(t, rc, "Person/later")

	for _, d := range []*dt.Daemon{a, b} {
		res := d.Do(t, dt.Admin(), "POST", hookPath("keyed", ha.ID, "/resume"), nil)
		if res.Status != 409 || !strings.Contains(string(res.Body), "removed") {
			t.Fatalf("a plain resume of the webhook of the removed key: %d %s, want 409 saying the key was removed", res.Status, res.Body)
		}
	}
	pos := status(t, a, "keyed", ha.ID)["position"].(string)
	a.MustDo(t, 200, dt.Admin(), "POST", hookPath("keyed", ha.ID, "/resume"), fmt.Sprintf(`{"after":%q}`, pos))
	if body := ra.next(t); !strings.Contains(body, "Person/after") {
		t.Fatalf("resumed as the admin, from where it stood: %s", body)
	}
	if st := status(t, a, "keyed", ha.ID); st["creator"] != "admin" || st["state"] != "active" {
		t.Fatalf("resumed with after: creator %v, state %v; want admin, active", st["creator"], st["state"])
	}

	// Key a comes back on B: a plain resume of the webhook made with it
	// is allowed again (the webhooks stay paused until then).
	publishJWKS(t, pathB, both)
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "a plain resume once key a is back", func() bool {
		return a.Do(t, dt.Admin(), "POST", hookPath("keyed", hc.ID, "/resume"), nil).Status == 200
	})
	if body := rc.next(t); !strings.Contains(body, "Person/later") {
		t.Fatalf("resumed from where it stood: %s", body)
	}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
