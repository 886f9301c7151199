package daemon_test

import (
	"context"
	"crypto/ecdsa"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestJWTKeyRemovalEndsStreams: removing a key from jwt_jwks_file (how an
// operator answers its compromise) and reloading ends at once every
// stream opened with a JWT that key signed, whatever its exp: REST and
// GraphQL SSE streams, a graphql-ws socket's subscription, a stream
// opened with a stream ticket the JWT made; and a ticket it made that was
// not used yet opens nothing. Streams of the key still in the set go on,
// also across a reload that changes the set but keeps both keys.
func TestJWTKeyRemovalEndsStreams(t *testing.T) {
	t.Parallel()
	keyA, keyB, keyC := newECKey(t), newECKey(t), newECKey(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	publish := func(keys map[string]*ecdsa.PrivateKey) {
		t.Helper()
		if err := os.WriteFile(path, ecJWKS(t, keys), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	publish(map[string]*ecdsa.PrivateKey{"a": keyA, "b": keyB})
	d := dt.Start(t, func(c *config.Config) {
		c.JWTJWKSFile = path
		c.JWTIssuer = jwtIssuer
		c.JWTAudience = jwtAudience
	})
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/notes", mustJSON(t, map[string]string{"schema": notesSDL}))
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"ulla","organization":"acme","password":"ulla-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"read"}`)

	// Whoever holds a key chooses exp.
	never := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	tokA := signJWT(t, jwt.SigningMethodES256, "a", jwtClaims("ulla", never, nil), keyA)
	jwtA := dt.Bearer(tokA)
	jwtB := dt.Bearer(signJWT(t, jwt.SigningMethodES256, "b", jwtClaims("ulla", never, nil), keyB))
	ticket, _ := newTicket(t, d, jwtA, "")
	unused, _ := newTicket(t, d, jwtA, "")

	sse := dt.StreamRequest{Method: "POST", Path: "/api/graphql/acme/notes", Body: noteSub, Header: []string{"Accept", "text/event-stream"}}
	rest := dt.StreamRequest{Path: restNotes}
	ofA := []kindStream{
		{"graphql-sse of key a", d.MustOpenStream(t, jwtA, sse), "sse"},
		{"rest of key a", d.MustOpenStream(t, jwtA, rest), "rest"},
		{"rest with a ticket of key a", d.MustOpenStream(t, dt.NoAuth(), eventSource(restNotes, ticket)), "rest"},
	}
	ofB := []kindStream{
		{"graphql-sse of key b", d.MustOpenStream(t, jwtB, sse), "sse"},
		{"rest of key b", d.MustOpenStream(t, jwtB, rest), "rest"},
	}
	all := append(append([]kindStream{}, ofA...), ofB...)
	for _, k := range all {
		if first := k.s.Next().String(); !strings.HasPrefix(first, ": connected") {
			t.Fatalf("%s: first frame %q", k.name, first)
		}
	}
	ws := openJWTSocket(t, d, "/api/graphql/acme/notes", tokA)
	ws.subscribe(t, "added", "subscription { Note_added { _id } }")

	// A set that changes but keeps both keys ends nothing.
	publish(map[string]*ecdsa.PrivateKey{"a": keyA, "b": keyB, "c": keyC})
	if err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n1","text":"both keys"}`)
	expectEvent(t, all, "Note/n1")
	if m := ws.read(t); !strings.Contains(m, `"Note/n1"`) {
		t.Fatalf("graphql-ws: %s, want Note/n1", m)
	}

	// Key a is withdrawn. Reload returns once its streams are ended: a
	// commit made after it reaches none of them.
	publish(map[string]*ecdsa.PrivateKey{"b": keyB, "c": keyC})
	if err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n2","text":"after a left"}`)
	expectEnd(t, ofA, "Note/n2", "UNAUTHENTICATED", "NotAuthenticated", time.Now())
	expectEvent(t, ofB, "Note/n2")
	if code, reason := ws.closed(t); code != 4403 || !strings.Contains(reason, "the key that signed the JWT") {
		t.Errorf("graphql-ws closed with %d %q, want 4403 saying the key was removed", code, reason)
	}
	status, typ, msg := refused(t, d, dt.NoAuth(), eventSource(restNotes, unused))
	if status != 401 || typ != "api:NotAuthenticated" || !strings.Contains(msg, "was removed (jwt_jwks_file/jwt_jwks_url)") {
		t.Errorf("a ticket of key a redeemed after it left: %d %s %q", status, typ, msg)
	}
	d.MustDo(t, 401, jwtA, "GET", "/api/info", nil)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n3","text":"b goes on"}`)
	expectEvent(t, ofB, "Note/n3")
}

// TestJWTKeyUnseenByReplica: a key this replica never had is not a
// removed key. An identity provider publishes key b and signs with it;
// replica A has it (an unknown-kid fetch, or its SIGHUP came first),
// replica B not yet (it fetches on its Cache-Control schedule, or its
// SIGHUP comes later). A stream ticket made on A with a JWT of key b
// opens a stream on B: the ticket never shows B the JWT, so nothing there
// would fetch the key. Once B had key b and dropped it, such a ticket is
// refused there.
func TestJWTKeyUnseenByReplica(t *testing.T) {
	t.Parallel()
	keyA, keyB := newECKey(t), newECKey(t)
	dir := t.TempDir()
	publish := func(path string, keys map[string]*ecdsa.PrivateKey) {
		t.Helper()
		if err := os.WriteFile(path, ecJWKS(t, keys), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pathA, pathB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	publish(pathA, map[string]*ecdsa.PrivateKey{"a": keyA, "b": keyB})
	publish(pathB, map[string]*ecdsa.PrivateKey{"a": keyA})
	withJWKS := func(path string) dt.Option {
		return func(c *config.Config) {
			c.JWTJWKSFile = path
			c.JWTIssuer = jwtIssuer
			c.JWTAudience = jwtAudience
		}
	}
	a := dt.Start(t, withJWKS(pathA))
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), withJWKS(pathB))
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/notes", mustJSON(t, map[string]string{"schema": notesSDL}))
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"ulla","organization":"acme","password":"ulla-password"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"read"}`)

	jwtB := dt.Bearer(signJWT(t, jwt.SigningMethodES256, "b", jwtClaims("ulla", time.Now().Add(time.Hour), nil), keyB))
	ticket, _ := newTicket(t, a, jwtB, "")
	s := b.MustOpenStream(t, dt.NoAuth(), eventSource(restNotes, ticket))
	if first := s.Next().String(); !strings.HasPrefix(first, ": connected") {
		t.Fatalf("first frame %q", first)
	}
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n1","text":"on b"}`)
	expectEvent(t, []kindStream{{"rest on B with a ticket of key b", s, "rest"}}, "Note/n1")

	// B learns key b, and drops it: now it was removed there.
	publish(pathB, map[string]*ecdsa.PrivateKey{"a": keyA, "b": keyB})
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	publish(pathB, map[string]*ecdsa.PrivateKey{"a": keyA})
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n2","text":"after b left B"}`)
	expectEnd(t, []kindStream{{"rest on B with a ticket of key b", s, "rest"}}, "Note/n2", "UNAUTHENTICATED", "NotAuthenticated", time.Now())
	ticket, _ = newTicket(t, a, jwtB, "")
	status, typ, msg := refused(t, b, dt.NoAuth(), eventSource(restNotes, ticket))
	if status != 401 || typ != "api:NotAuthenticated" || !strings.Contains(msg, "was removed (jwt_jwks_file/jwt_jwks_url)") {
		t.Errorf("a ticket of key b redeemed on B after b left it: %d %s %q", status, typ, msg)
	}
}

// openJWTSocket opens and initialises a graphql-ws socket on path with
// the bearer JWT token.
func openJWTSocket(t *testing.T, d *dt.Daemon, path, token string) *outageSocket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+path,
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	s := &outageSocket{c: c, ctx: ctx}
	s.send(t, `{"type":"connection_init","payload":{"Authorization":"Bearer `+token+`"}}`)
	if m := s.read(t); m != `{"type":"connection_ack"}` {
		t.Fatalf("graphql-ws: %s", m)
	}
	return s
}
