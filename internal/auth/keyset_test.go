package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// jwksServer is an identity provider's JWKS endpoint whose keys, status
// and Cache-Control a test changes, counting the requests it answers.
type jwksServer struct {
	*httptest.Server
	requests atomic.Int64
	served   chan struct{} // receives after each answer, when not full

	mu           sync.Mutex
	jwks         []byte
	status       int
	cacheControl string
}

func newJWKSServer(t *testing.T, jwks []byte) *jwksServer {
	s := &jwksServer{jwks: jwks, status: 200, cacheControl: "public, max-age=600", served: make(chan struct{}, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, status, cc := s.jwks, s.status, s.cacheControl
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
		s.requests.Add(1)
		select {
		case s.served <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) publish(jwks []byte, status int) {
	s.mu.Lock()
	s.jwks, s.status = jwks, status
	s.mu.Unlock()
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestJWKSURLRotation: the set is fetched at start; a JWT whose kid is
// new makes Sluice fetch again (once, however many such JWTs arrive
// within jwksKidInterval); a key dropped by the provider is refused once
// the set is fetched again; while the URL fails, the keys fetched last
// stay in use, up to jwksMaxStale past their refresh time.
func TestJWKSURLRotation(t *testing.T) {
	t.Parallel()
	old, next := ecKey(t), ecKey(t)
	srv := newJWKSServer(t, marshalJWKS(t, map[string]any{"old": &old.PublicKey}))
	clk := &clock{now: time.Now()}
	v, err := LoadJWT(t.Context(), JWTConfig{JWKSURL: srv.URL + "/.well-known/jwks.json", JWKSHTTPLoopback: true}, JWTDeps{Now: clk.Now, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d requests at start, want 1", n)
	}
	token := func(kid string, key *ecdsa.PrivateKey) string {
		return sign(t, jwt.SigningMethodES256, kid, jwt.MapClaims{"sub": "rita", "exp": clk.Now().Add(time.Hour).Unix()}, key)
	}
	verify := func(tok string) error {
		_, _, _, err := v.Verify(tok)
		return err
	}
	if err := verify(token("old", old)); err != nil {
		t.Fatalf("JWT of the published key: %v", err)
	}

	// The provider publishes its next key and signs with it.
	srv.publish(marshalJWKS(t, map[string]any{"old": &old.PublicKey, "next": &next.PublicKey}), 200)
	if err := verify(token("next", next)); err != nil {
		t.Fatalf("JWT of the rotated key: %v", err)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d requests after an unknown kid, want 2", n)
	}
	// Made-up kids within the interval cost the provider nothing more.
	for i := range 20 {
		err := verify(token("made-up-"+string(rune('a'+i)), next))
		if err == nil || !strings.Contains(err.Error(), "no key with kid") || !strings.Contains(err.Error(), "jwt_jwks_url") {
			t.Fatalf("JWT with an unknown kid: %v", err)
		}
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d requests after 20 unknown kids within %v, want still 2", n, jwksKidInterval)
	}
	clk.add(jwksKidInterval)
	_ = verify(token("made-up-later", next))
	if n := srv.requests.Load(); n != 3 {
		t.Fatalf("%d requests after an unknown kid past the interval, want 3", n)
	}

	// The old key is withdrawn: refused once the set is fetched again
	// (here by Reload, as SIGHUP does).
	srv.publish(marshalJWKS(t, map[string]any{"next": &next.PublicKey}), 200)
	if err := v.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := verify(token("old", old)); err == nil || !strings.Contains(err.Error(), `no key with kid "old"`) {
		t.Fatalf("JWT of the withdrawn key: %v", err)
	}

	// The URL fails: the keys fetched last stay in use...
	srv.publish([]byte(`{"error":"unavailable"}`), 503)
	if err := v.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Reload with the URL down: %v", err)
	}
	clk.add(jwksMaxStale) // the set had max-age=600: now 600 s short of the limit
	if err := verify(token("next", next)); err != nil {
		t.Fatalf("JWT while the URL is down: %v", err)
	}
	// ...until jwksMaxStale past their refresh time.
	clk.add(10*time.Minute + time.Second)
	if err := verify(token("next", next)); err == nil || !strings.Contains(err.Error(), "the key set of jwt_jwks_url is stale") {
		t.Fatalf("JWT a day after the URL went down: %v", err)
	}
	// The URL is back: the next fetch restores service.
	srv.publish(marshalJWKS(t, map[string]any{"next": &next.PublicKey}), 200)
	if err := v.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := verify(token("next", next)); err != nil {
		t.Fatalf("JWT once the URL is back: %v", err)
	}
}

// TestJWKSURLRefreshesWhenStale: Run fetches the set again once its
// Cache-Control time has passed, and returns when its context ends.
func TestJWKSURLRefreshesWhenStale(t *testing.T) {
	t.Parallel()
	k := ecKey(t)
	srv := newJWKSServer(t, marshalJWKS(t, map[string]any{"k": &k.PublicKey}))
	clk := &clock{now: time.Now()}
	v, err := LoadJWT(t.Context(), JWTConfig{JWKSURL: srv.URL, JWKSHTTPLoopback: true}, JWTDeps{Now: clk.Now, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	<-srv.served // the fetch at start
	clk.add(600 * time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); v.Run(ctx) }()
	select {
	case <-srv.served:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not refresh a set past its max-age")
	}
	cancel()
	<-done
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestJWKSURLErrors(t *testing.T) {
	t.Parallel()
	k := ecKey(t)
	srv := newJWKSServer(t, marshalJWKS(t, map[string]any{"k": &k.PublicKey}))
	redirect := httptest.NewServer(http.RedirectHandler(srv.URL, http.StatusFound))
	t.Cleanup(redirect.Close)
	cases := []struct {
		name string
		cfg  JWTConfig
		edit func()
		want string
	}{
		{"file and URL", JWTConfig{JWKSURL: srv.URL, JWKSFile: "/x.json"}, nil, "jwt_jwks_file and jwt_jwks_url are both set"},
		{"not http", JWTConfig{JWKSURL: "file:///etc/jwks.json"}, nil, "jwt_jwks_url: \"file:///etc/jwks.json\" is not an https URL"},
		{"http", JWTConfig{JWKSURL: srv.URL}, nil, "is http, not https"},
		{"http elsewhere", JWTConfig{JWKSURL: "http://id.example.com/jwks.json", JWKSHTTPLoopback: true}, nil, "is http on a host that is not loopback"},
		{"redirected", JWTConfig{JWKSURL: redirect.URL, JWKSHTTPLoopback: true}, nil, "redirects are not followed"},
		{"not found", JWTConfig{JWKSURL: srv.URL, JWKSHTTPLoopback: true}, func() { srv.publish([]byte("not here"), 404) }, "jwt_jwks_url: GET " + srv.URL + ": 404 Not Found"},
		{"not a key set", JWTConfig{JWKSURL: srv.URL, JWKSHTTPLoopback: true}, func() { srv.publish([]byte(`{"keys":[]}`), 200) }, "no signature key"},
	}
	for _, c := range cases { // not parallel: they share the server
		if c.edit != nil {
			c.edit()
		}
		_, err := LoadJWT(t.Context(), c.cfg, JWTDeps{Client: srv.Client()})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestCacheTTL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		header string
		want   time.Duration
	}{
		{"", jwksDefaultTTL},
		{"public, max-age=3600", time.Hour},
		{"max-age=\"7200\", must-revalidate", 2 * time.Hour},
		{"max-age=5", jwksMinTTL},
		{"no-cache", jwksMinTTL},
		{"no-store, max-age=3600", jwksMinTTL},
		{"max-age=999999999", jwksMaxTTL},
		{"max-age=-1", jwksDefaultTTL},
		{"private", jwksDefaultTTL},
	} {
		if got := cacheTTL(tt.header); got != tt.want {
			t.Errorf("cacheTTL(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

// TestJWTKeyWithoutKid: a JWT without kid is checked against every key
// of its algorithm, and Verify names the one that verified it.
func TestJWTKeyWithoutKid(t *testing.T) {
	t.Parallel()
	a, b := ecKey(t), ecKey(t)
	v, err := NewJWT(nil, marshalJWKS(t, map[string]any{"a": &a.PublicKey, "b": &b.PublicKey}), JWTConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*ecdsa.PrivateKey{a, b} {
		_, _, key, err := v.Verify(sign(t, jwt.SigningMethodES256, "", jwt.MapClaims{"sub": "rita", "exp": time.Now().Add(time.Hour).Unix()}, k))
		if err != nil {
			t.Fatal(err)
		}
		if want := must(keyID("ES256", &k.PublicKey)); key != want {
			t.Errorf("key %q, want %q", key, want)
		}
	}
	if v.HasKey(must(keyID("ES256", &ecKey(t).PublicKey))) || v.HasKey("") {
		t.Error("HasKey of a key not in the set")
	}
}

// TestJWKSKeysChanged: OnKeysChanged's function is called after a reload
// or a fetch that changes the set, when HasKey already answers for the
// new set, and not after one that fails or brings the same set.
func TestJWKSKeysChanged(t *testing.T) {
	t.Parallel()
	a, b := ecKey(t), ecKey(t)
	idA, idB := must(keyID("ES256", &a.PublicKey)), must(keyID("ES256", &b.PublicKey))
	both, onlyB := marshalJWKS(t, map[string]any{"a": &a.PublicKey, "b": &b.PublicKey}), marshalJWKS(t, map[string]any{"b": &b.PublicKey})

	// check reloads v and checks how many times the function was called
	// and what HasKey answered for a and b then.
	type seen struct{ a, b bool }
	check := func(t *testing.T, v *JWT, calls *[]seen, reloadErr bool, want []seen) {
		t.Helper()
		if err := v.Reload(t.Context()); (err != nil) != reloadErr {
			t.Fatalf("Reload: %v", err)
		}
		if len(*calls) != len(want) {
			t.Fatalf("called %d times, want %d", len(*calls), len(want))
		}
		for i := range want {
			if (*calls)[i] != want[i] {
				t.Errorf("call %d saw %+v, want %+v", i, (*calls)[i], want[i])
			}
		}
	}
	watch := func(v *JWT) *[]seen {
		var calls []seen // Reload calls the function before it returns
		v.OnKeysChanged(func() { calls = append(calls, seen{v.HasKey(idA), v.HasKey(idB)}) })
		return &calls
	}

	t.Run("file", func(t *testing.T) {
		t.Parallel()
		path := t.TempDir() + "/jwks.json"
		write := func(b []byte) {
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(both)
		v, err := LoadJWT(t.Context(), JWTConfig{JWKSFile: path}, JWTDeps{})
		if err != nil {
			t.Fatal(err)
		}
		calls := watch(v)
		check(t, v, calls, false, nil) // the same set
		write(onlyB)
		check(t, v, calls, false, []seen{{false, true}})
		write([]byte(`{"keys":[`))
		check(t, v, calls, true, []seen{{false, true}}) // kept
		if !v.HasKey(idB) {
			t.Error("a broken file dropped the keys")
		}
	})
	t.Run("URL", func(t *testing.T) {
		t.Parallel()
		srv := newJWKSServer(t, both)
		v, err := LoadJWT(t.Context(), JWTConfig{JWKSURL: srv.URL, JWKSHTTPLoopback: true}, JWTDeps{Client: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		calls := watch(v)
		check(t, v, calls, false, nil)
		srv.publish(onlyB, 200)
		check(t, v, calls, false, []seen{{false, true}})
		srv.publish([]byte("down"), 503)
		check(t, v, calls, true, []seen{{false, true}}) // kept
		srv.publish(both, 200)
		check(t, v, calls, false, []seen{{false, true}, {true, true}})
	})
}

// TestJWKSKeyRemoved: a key is removed only if a reload or fetch took it
// out of the set: a key the set never held (another replica may have
// learnt it first) is not, one that comes back is no longer, and the
// record is forgotten after jwksRemovedFor. The HS256 secret never is.
func TestJWKSKeyRemoved(t *testing.T) {
	t.Parallel()
	a, b, c := ecKey(t), ecKey(t), ecKey(t)
	idA, idB, idC := must(keyID("ES256", &a.PublicKey)), must(keyID("ES256", &b.PublicKey)), must(keyID("ES256", &c.PublicKey))
	path := t.TempDir() + "/jwks.json"
	clk := &clock{now: time.Now()}
	publish := func(keys map[string]any) {
		t.Helper()
		if err := os.WriteFile(path, marshalJWKS(t, keys), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	publish(map[string]any{"a": &a.PublicKey})
	v, err := LoadJWT(t.Context(), JWTConfig{JWKSFile: path, HS256Secret: testSecret}, JWTDeps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	reload := func(keys map[string]any) {
		t.Helper()
		publish(keys)
		if err := v.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, wantA, wantB, wantC bool) {
		t.Helper()
		if got := [3]bool{v.KeyRemoved(idA), v.KeyRemoved(idB), v.KeyRemoved(idC)}; got != [3]bool{wantA, wantB, wantC} {
			t.Errorf("%s: removed a, b, c: %v, want %v", when, got, [3]bool{wantA, wantB, wantC})
		}
		if v.KeyRemoved(hs256ID([]byte(testSecret))) || v.KeyRemoved("") {
			t.Errorf("%s: the HS256 secret, or no key, counts as removed", when)
		}
	}
	// KeyChanges lists the same removals, and the keys of the set
	// (which webhooks are judged by, through Postgres).
	changes := func(when string, removed, held []string) {
		t.Helper()
		r, h := v.KeyChanges()
		for _, l := range [][]string{r, removed, h, held} {
			slices.Sort(l)
		}
		if !slices.Equal(r, removed) || !slices.Equal(h, held) {
			t.Errorf("%s: KeyChanges %v, %v; want %v, %v", when, r, h, removed, held)
		}
	}
	check("at start", false, false, false)
	changes("at start", nil, []string{idA})
	if v.HasKey(idB) {
		t.Fatal("HasKey of a key never in the set")
	}
	reload(map[string]any{"a": &a.PublicKey, "b": &b.PublicKey})
	check("b added", false, false, false)
	reload(map[string]any{"a": &a.PublicKey})
	check("b removed", false, true, false) // c was never seen: not removed
	reload(map[string]any{"a": &a.PublicKey, "b": &b.PublicKey})
	check("b back", false, false, false)
	changes("b back", nil, []string{idA, idB})
	reload(map[string]any{"c": &c.PublicKey})
	check("a and b removed", true, true, false)
	changes("a and b removed", []string{idA, idB}, []string{idC})
	clk.add(jwksRemovedFor - time.Second)
	check("just before the record is forgotten", true, true, false)
	clk.add(time.Second)
	check("the record forgotten", false, false, false)
	changes("the record forgotten", nil, []string{idC})

	// At most jwksMaxRemoved are remembered, the oldest forgotten first.
	s := v.set
	s.mu.Lock()
	var many []publicKey
	for i := range jwksMaxRemoved + 1 {
		many = append(many, publicKey{id: "ES256:" + strconv.Itoa(i)})
	}
	s.noteRemoved(many[:1], nil)
	clk.add(time.Second)
	s.noteRemoved(many[1:], nil)
	n := len(s.removed)
	_, first := s.removed[many[0].id]
	_, last := s.removed[many[len(many)-1].id]
	s.mu.Unlock()
	if n != jwksMaxRemoved || first || !last {
		t.Errorf("%d remembered (want %d), the oldest kept: %v, the newest: %v", n, jwksMaxRemoved, first, last)
	}
}

// TestUnknownKidsLogOncePerFetch: JWTs of unknown kids waiting on one slow
// fetch of the set log its failure once, from the request that started
// it, with the kid cut short: every waiter logged its own kid whole (300
// requests of 10 KB kids wrote 3 MB of log while the URL was slow).
func TestUnknownKidsLogOncePerFetch(t *testing.T) {
	key := ecKey(t)
	jwks := marshalJWKS(t, map[string]any{"k": &key.PublicKey})
	release := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jwks)
			return
		}
		<-release // slow, then down
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	// Run before srv.Close, which waits for the handler: a failure
	// before the release must not hang the test.
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	var log bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, nil))
	v, err := LoadJWT(t.Context(), JWTConfig{JWKSURL: srv.URL + "/jwks", JWKSHTTPLoopback: true}, JWTDeps{Client: srv.Client(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 20
	var wg sync.WaitGroup
	for i := range waiters {
		token := sign(t, jwt.SigningMethodES256, fmt.Sprintf("k%d-%s", i, strings.Repeat("x", 10000)), jwt.MapClaims{"sub": "rita", "exp": time.Now().Add(time.Hour).Unix()}, key)
		wg.Go(func() { _, _, _, _ = v.Verify(token) })
	}
	// Every Verify waits on the one fetch in flight.
	eventually.True(t, 10*time.Second, "every JWT waits on the fetch", func() bool {
		buf := make([]byte, 8<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*keySet).refreshForKid(") == waiters
	})
	unblock()
	wg.Wait()
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(log.String(), "unknown kid"); n != 1 || strings.Contains(log.String(), strings.Repeat("x", 100)) {
		t.Errorf("%d log lines of the failed fetch (%d bytes of log), want one with the kid cut short", n, log.Len())
	}
}
