package daemon_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// crossSiteWrites are the writes a page of any site can make a browser
// send with the credentials it remembers: CORS "simple" requests (a form,
// or fetch with mode no-cors), which no preflight guards. Each body is
// what Sluice would take (JSON), sent with a content type a page may use.
var crossSiteWrites = []struct {
	name, method, path, contentType, body string
}{
	{"a document, as a text/plain form", "POST", "/api/document/admin/people", "text/plain", `{"@type":"Note","@id":"Note/evil","text":"x"}`},
	{"a user, as multipart", "POST", "/api/users", "multipart/form-data; boundary=x", `{"name":"evil","organization":"admin","password":"evil-password"}`},
	{"an organization, form-encoded", "POST", "/api/organizations", "application/x-www-form-urlencoded", `{"name":"evilorg"}`},
	{"a database, form-encoded", "POST", "/api/db/admin/evildb", "application/x-www-form-urlencoded", `{"schema":"type Note { text: String }"}`},
	{"a token, as text/plain", "POST", "/api/tokens", "text/plain", `{"name":"evil"}`},
	{"a replace, as text/plain", "PUT", "/api/document/admin/people?create=true", "text/plain", `{"@type":"Note","@id":"Note/evil2","text":"x"}`},
	{"a schema, as text/plain", "PUT", "/api/schema/admin/people", "text/plain", "type Note { text: String }\ntype Evil { x: String }"},
	{"a delete", "DELETE", "/api/document/admin/people?id=Note/kept", "", ""},
}

// checkNothingWritten fails t when any write of crossSiteWrites landed.
func checkNothingWritten(t *testing.T, d *dt.Daemon) {
	t.Helper()
	for _, c := range []struct{ path, absent string }{
		{"/api/users", `"evil"`},
		{"/api/organizations", `"evilorg"`},
		{"/api/db", "evildb"},
		{"/api/tokens", "evil"},
		{"/api/document/admin/people?type=Note", "evil"},
		{"/api/schema/admin/people", "Evil"},
	} {
		if r := d.MustDo(t, 200, dt.Admin(), "GET", c.path, nil); strings.Contains(string(r.Body), c.absent) {
			t.Errorf("a cross-site write landed: GET %s holds %s: %s", c.path, c.absent, r.Body)
		}
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?id=Note/kept", nil); !strings.Contains(string(r.Body), "kept") {
		t.Errorf("a cross-site delete landed: %s", r.Body)
	}
}

// TestCrossOriginWritesRefused: no state-changing request a page of an
// unlisted origin makes a browser send with remembered Basic credentials
// is served, whether the browser says where it comes from in
// Sec-Fetch-Site (every current browser) or in Origin only (older ones);
// each is a 403 naming cors_origins, and nothing is written. A listed
// origin, the daemon's own pages, and clients that are no browser (no
// such headers: curl's -d sends application/x-www-form-urlencoded) keep
// writing.
func TestCrossOriginWritesRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://app.example"))
	d.CreateDatabase(t, "people", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Note","@id":"Note/kept","text":"x"}`)
	evil := map[string][]string{
		"a current browser": {"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"},
		"a same-site page":  {"Origin", "https://sub.app.example", "Sec-Fetch-Site", "same-site"},
		"an older browser":  {"Origin", "https://evil.example"},
		"a sandboxed page":  {"Origin", "null", "Sec-Fetch-Site", "cross-site"},
		"another scheme":    {"Origin", "http://app.example", "Sec-Fetch-Site", "cross-site"},
	}
	for _, w := range crossSiteWrites {
		for from, h := range evil {
			if w.contentType != "" {
				h = append(slices.Clone(h), "Content-Type", w.contentType)
			}
			var body any
			if w.body != "" {
				body = w.body
			}
			r := d.Do(t, dt.Admin(), w.method, w.path, body, h...)
			if typ, msg := errBody(t, r); r.Status != 403 || typ != "api:Forbidden" || !strings.Contains(msg, "cors_origins") {
				t.Errorf("%s from %s: %d %s, want 403 naming cors_origins", w.name, from, r.Status, r.Body)
			}
		}
	}
	// GraphQL mutations too (JSON needs a preflight, but the rule is one).
	r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/people", `{"query":"mutation { _deleteDocuments(ids: [\"Note/kept\"]) }"}`,
		"Content-Type", "application/json", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if r.Status != 403 {
		t.Errorf("a cross-site GraphQL mutation: %d %s", r.Status, r.Body)
	}
	checkNothingWritten(t, d)

	// Reads with Basic credentials are refused too (they run on the
	// user's budgets), but for a link followed; with a bearer token, which
	// the page's own script sent, they are not.
	if r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/people?type=Note", nil, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); r.Status != 403 {
		t.Errorf("a cross-site read with Basic credentials: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?type=Note", nil, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")

	// The listed origin, the daemon's own pages and curl write.
	for i, h := range [][]string{
		{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"},
		{"Origin", d.URL, "Sec-Fetch-Site", "same-origin"},
		{"Origin", d.URL}, // an older browser on the daemon's own page
		{"Sec-Fetch-Site", "none"},
		{"Content-Type", "application/x-www-form-urlencoded"}, // curl -d
		{},
	} {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people",
			fmt.Sprintf(`{"@type":"Note","@id":"Note/ok%d","text":"x"}`, i), h...)
	}
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"fine","organization":"admin","password":"fine-password"}`,
		"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site")
}

// TestCrossOriginWritesWithAnyOrigin: with cors_origins "*" a page of any
// origin may write with a bearer token its own script sends, never with
// the Basic credentials a browser adds by itself.
func TestCrossOriginWritesWithAnyOrigin(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("*"))
	d.CreateDatabase(t, "people", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Note","@id":"Note/kept","text":"x"}`)
	for _, w := range crossSiteWrites {
		var body any
		if w.body != "" {
			body = w.body
		}
		if r := d.Do(t, dt.Admin(), w.method, w.path, body, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); r.Status != 403 {
			t.Errorf("%s from any origin with Basic credentials: %d %s, want 403", w.name, r.Status, r.Body)
		}
	}
	checkNothingWritten(t, d)
	tok := d.MustDo(t, 201, dt.Admin(), "POST", "/api/tokens", `{"name":"app"}`)
	secret := jsonField(t, tok.Body, "token")
	d.MustDo(t, 200, dt.Bearer(secret), "POST", "/api/document/admin/people", `{"@type":"Note","@id":"Note/app","text":"x"}`,
		"Content-Type", "application/json", "Origin", "https://any.example", "Sec-Fetch-Site", "cross-site")
}

// TestPasswordTimingDoesNotTellUsers: a wrong password takes as long for a
// user who does not exist as for one who does (medians within 3x, with
// passwords hashed at bcrypt's default cost, as in production), so timing
// does not tell which user names exist.
func TestPasswordTimingDoesNotTellUsers(t *testing.T) {
	t.Parallel()
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 8}, func(c *config.Config) { c.AuthMaxFailures = 1000 })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"exists","organization":"admin","password":"the-right-password"}`)
	timeOf := func(user string) time.Duration {
		start := time.Now()
		d.MustDo(t, 401, dt.Basic(user, "a-wrong-password"), "GET", "/api/info", nil)
		return time.Since(start)
	}
	var known, unknown []time.Duration
	for range 9 { // alternating, so both see the same machine
		known = append(known, timeOf("exists"))
		unknown = append(unknown, timeOf("nobody"))
	}
	slices.Sort(known)
	slices.Sort(unknown)
	k, u := known[len(known)/2], unknown[len(unknown)/2]
	t.Logf("median time of a wrong password: existing user %v, unknown user %v", k, u)
	if k > 3*u || u > 3*k {
		t.Errorf("a wrong password takes %v for an existing user and %v for an unknown one: timing tells them apart", k, u)
	}
}

// TestPasswordGuessesThrottled: past auth_max_failures failed passwords of
// one user from one address, that address is answered 429 with
// Retry-After, the right password included, before any hash is checked;
// the user still signs in from another address, and other users from
// the same one.
func TestPasswordGuessesThrottled(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.AuthMaxFailures, c.AuthFailureWindow = 3, time.Hour })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"bea","organization":"admin","password":"bea-password"}`)
	checks := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_auth_password_checks_total")
	}
	for i := range 3 {
		d.MustDo(t, 401, dt.Basic("bea", "guess"+strconv.Itoa(i)), "GET", "/api/info", nil)
	}
	n := checks()
	for _, pw := range []string{"guess9", "bea-password"} {
		r := d.Do(t, dt.Basic("bea", pw), "GET", "/api/info", nil)
		ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		if r.Status != 429 || ra < 3000 || ra > 3600 || !strings.Contains(string(r.Body), "auth_max_failures") {
			t.Fatalf("a guess past the limit: %d Retry-After %q %s, want 429 with about an hour", r.Status, r.Header.Get("Retry-After"), r.Body)
		}
	}
	if m := checks(); m != n {
		t.Errorf("throttled guesses ran %v password hashes, want none", m-n)
	}
	// Another user from the same address, and bea from another one.
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/info", nil)
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	req, _ := http.NewRequest("GET", d.URL+"/api/info", nil)
	req.SetBasicAuth("bea", "bea-password")
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("bea from another address: %d, want 200", resp.StatusCode)
	}
	// A name no user can have (a NUL, invalid UTF-8) is a wrong password
	// too, counted as one: it was a 400 from Postgres, never throttled.
	third := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}).DialContext}}
	for i, want := range []int{401, 401, 401, 429} {
		req, _ := http.NewRequest("GET", d.URL+"/api/info", nil)
		req.SetBasicAuth("bea\x00", "guess")
		resp, err := third.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("guess %d with a NUL in the name: %d, want %d", i, resp.StatusCode, want)
		}
	}
}

// TestConcurrentPasswordGuessesThrottled: wrong passwords sent at once
// for one user from one address run at most auth_max_failures bcrypt
// checks, answered 401; the rest are 429 before any check (found by
// review: 60 guesses at once all passed the throttle's check, 60 × 401
// and 60 bcrypts, the failures counted only after them).
func TestConcurrentPasswordGuessesThrottled(t *testing.T) {
	t.Parallel()
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 10}, func(c *config.Config) { c.AuthMaxFailures, c.AuthFailureWindow = 3, time.Hour })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"bea","organization":"admin","password":"bea-password"}`)
	checks := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_auth_password_checks_total")
	}
	before := checks()
	// The guesses come from 127.0.0.2, so that the metrics are read from
	// an address they do not throttle.
	guesser := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	const guesses = 60
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		status = map[int]int{}
	)
	for i := range guesses {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", d.URL+"/api/info", nil)
			req.SetBasicAuth("bea", "guess"+strconv.Itoa(i))
			resp, err := guesser.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			status[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	ran := checks() - before
	t.Logf("%d guesses at once: %v, %v bcrypt checks", guesses, status, ran)
	if status[401] < 1 || status[401] > 3 || status[401]+status[429] != guesses || ran > 3 {
		t.Errorf("%d guesses at once with auth_max_failures 3: %v and %v bcrypt checks, want 1 to 3 × 401 and as many checks, the rest 429", guesses, status, ran)
	}
}

// TestSameGuessAtOnceTellsNoUserName: 30 requests at once from one
// address with the same wrong password are answered alike, 30 × 401,
// whether the user name exists or not. Found by review: for an existing
// user they shared one bcrypt, one failure counted; for a name no user
// has each ran its own decoy bcrypt and was counted, so past
// auth_max_failures they were refused (10 × 401 and 20 × 429), which told
// the names apart.
func TestSameGuessAtOnceTellsNoUserName(t *testing.T) {
	t.Parallel()
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 10}, func(c *config.Config) { c.AuthMaxFailures, c.AuthFailureWindow = 10, time.Hour })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"bea","organization":"admin","password":"bea-password"}`)
	checks := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_auth_password_checks_total")
	}
	// From 127.0.0.2, so that the metrics are read from an address the
	// guesses do not throttle.
	guesser := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	const guesses = 30
	burst := func(user string) map[int]int {
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			status = map[int]int{}
		)
		start := make(chan struct{})
		for range guesses {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", d.URL+"/api/info", nil)
				req.SetBasicAuth(user, "the-same-guess")
				<-start
				resp, err := guesser.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				status[resp.StatusCode]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		return status
	}
	for _, user := range []string{"bea", "nobody"} {
		before := checks()
		status := burst(user)
		ran := checks() - before
		t.Logf("%s: %v, %v bcrypt checks", user, status, ran)
		// They share a check: fewer than auth_max_failures run, where a
		// check each ran that many.
		if status[401] != guesses || ran >= 10 {
			t.Errorf("%d guesses at once of one password for %s: %v, %v bcrypt checks; want %d × 401 and a shared check, as for any other name", guesses, user, status, ran, guesses)
		}
	}
}

// trickle sends a write whose body arrives a byte every interval (for at
// most n bytes) and returns the answer's status and body; ok is false
// when the server never cut it.
func trickle(t *testing.T, d *dt.Daemon, interval time.Duration, n int) (status int, body string, ok bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	doc := `{"@type":"Note","text":"` + strings.Repeat("x", n) + `"}`
	fmt.Fprintf(conn, "POST /api/document/admin/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		basic("admin", dt.AdminPassword), len(doc))
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(resp.Body)
		status, body = resp.StatusCode, string(b)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range len(doc) {
		select {
		case <-answered:
			return status, body, true
		case <-tick.C:
		}
		if _, err := conn.Write([]byte{doc[i]}); err != nil {
			<-answered
			return status, body, true
		}
	}
	return 0, "", false
}

// TestTrickledBodyIsCut: a body sent a byte at a time, never silent for
// body_idle_timeout, is cut once it falls behind body_min_rate, and
// nothing of it is written.
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.BodyIdleTimeout, c.BodyMinRate = time.Second, 1000 })
	d.CreateDatabase(t, "slow", "type Note { text: String }")
	// 400 bytes at 20 a second would take 20 s; the rule allows 1 s and
	// then 1000 bytes a second.
	status, body, ok := trickle(t, d, 50*time.Millisecond, 400)
	if !ok {
		t.Fatal("a body trickled a byte every 50ms was never cut")
	}
	if status != 400 || !strings.Contains(body, "body_min_rate") {
		t.Fatalf("trickled body: %d %s", status, body)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/slow?type=Note&as_list=true", nil); strings.TrimSpace(string(r.Body)) != "[]" {
		t.Errorf("a cut body wrote documents: %s", r.Body)
	}
}

// TestSlowBodiesAreCapped: bodies still arriving count toward
// max_request_bodies; past it a request with a body is answered 503 with
// Retry-After, requests without one are served, and a place frees once
// a body ends.
func TestSlowBodiesAreCapped(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxRequestBodies, c.BodyIdleTimeout, c.BodyMinRate = 2, time.Minute, 0 })
	d.CreateDatabase(t, "slow", "type Note { text: String }")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two slow clients, each sending the start of a body and no more. A
	// client refused because the test's own requests held the places
	// when it came (503) sends again, until it holds one; so does one
	// whose refusal came back as an error (the server answers 503 and
	// closes before the body is sent, and the client may then report
	// its write's error instead of the answer).
	var wg sync.WaitGroup
	defer wg.Wait()
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				body, feed := io.Pipe()
				go func() { _, _ = feed.Write([]byte(`{"@type":"Note",`)) }() // and no more
				// The client waits for its body to end before it gives
				// up: the body ends with the test.
				stop := context.AfterFunc(ctx, func() { feed.Close() })
				req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+"/api/document/admin/slow", body)
				dt.Admin()(req)
				resp, err := http.DefaultClient.Do(req)
				stop()
				feed.Close()
				if err != nil {
					continue // the loop ends with the test
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 503 {
					if ctx.Err() == nil {
						// It holds no place any more: say why, if the
						// test then fails.
						t.Logf("a slow client was answered %d %s", resp.StatusCode, b)
					}
					return
				}
			}
		})
	}
	defer cancel() // before the clients are waited for
	// Once the server has both, a third body is refused.
	var last string // what the last third body was answered, if not 503
	defer func() {
		if t.Failed() {
			t.Logf("the last third body was answered %s", last)
		}
	}()
	eventually.True(t, 30*time.Second, "a third body refused while two are in progress", func() bool {
		r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/slow", `{"@type":"Note","text":"x"}`)
		if r.Status == 503 && (r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "max_request_bodies")) {
			t.Fatalf("a body past the cap: %d %v %s", r.Status, r.Header, r.Body)
		}
		last = fmt.Sprintf("%d %s", r.Status, r.Body)
		return r.Status == 503
	})
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/slow?type=Note", nil)
	cancel() // the slow clients give up: their places free
	eventually.True(t, 30*time.Second, "a body accepted after the slow ones ended", func() bool {
		return d.Do(t, dt.Admin(), "POST", "/api/document/admin/slow", `{"@type":"Note","text":"x"}`).Status == 200
	})
}

// openBody opens a connection to addr and sends head (a request line and
// headers) with a chunked body, and the body's first chunk, and no more:
// the body never ends while the connection is open.
func openBody(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	first := `{"@type":"Note",`
	fmt.Fprintf(conn, "%s\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", head, len(first), first)
	return conn
}

// startBody is openBody of a document write as user:password.
func startBody(t *testing.T, d *dt.Daemon, user, password string) net.Conn {
	t.Helper()
	return openBody(t, strings.TrimPrefix(d.URL, "http://"), "POST /api/document/admin/slow HTTP/1.1\r\nAuthorization: Basic "+basic(user, password)+"\r\nContent-Type: application/json")
}

// readAnswer reads the answer on conn to a request that what starts with
// (the method, then a space), failing the test when none came within a
// minute; when closes is set, the connection must then close
// within the minute too.
func readAnswer(t *testing.T, conn net.Conn, what string, closes bool) *http.Response {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(conn)
	var req *http.Request // a GET's, by default
	if method, _, _ := strings.Cut(what, " "); method == http.MethodHead {
		req = &http.Request{Method: method}
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("%s: no answer while its body was still open: %v", what, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: %d, its body unread: %v", what, resp.StatusCode, err)
	}
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	if closes {
		if !resp.Close {
			t.Errorf("%s: %d without Connection: close", what, resp.StatusCode)
		}
		if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: %d, and its connection still open a minute after", what, resp.StatusCode)
		}
	}
	return resp
}

// TestRefusedBodyIsAnsweredAtOnce: a body refused because the server
// reads its most bodies is answered without being read, and its
// connection closes: reading it (net/http reads up to 256 KiB of an
// unread body, to keep the connection, before it answers, or after when
// the answer closes it) would be reading one more body than
// max_request_bodies allows, for as long as its client likes, and a
// client whose body has not ended would not see its 503.
func TestRefusedBodyIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxRequestBodies, c.BodyIdleTimeout, c.BodyMinRate = 2, 10*time.Minute, 0 })
	d.CreateDatabase(t, "slow", "type Note { text: String }")
	slow := []net.Conn{startBody(t, d, "admin", dt.AdminPassword), startBody(t, d, "admin", dt.AdminPassword)}
	defer func() {
		if !t.Failed() {
			return
		}
		// Say what a slow body was answered, if it was.
		for i, c := range slow {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			b, err := io.ReadAll(c)
			t.Logf("slow body %d was answered %q (%v)", i, b, err)
		}
	}()
	eventually.True(t, 30*time.Second, "a third body refused while two are in progress", func() bool {
		// A slow body the server read after one of these requests was
		// refused, that request holding the place it came for: it is
		// sent again.
		for i, c := range slow {
			_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
			var b [1]byte
			if _, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
				slow[i] = startBody(t, d, "admin", dt.AdminPassword)
			}
		}
		return d.Do(t, dt.Admin(), "POST", "/api/document/admin/slow", `{"@type":"Note","text":"x"}`).Status == 503
	})
	resp := readAnswer(t, startBody(t, d, "admin", dt.AdminPassword), "a refused body", true)
	if resp.StatusCode != 503 {
		t.Fatalf("a refused body: %d", resp.StatusCode)
	}
}

// TestBodiesWaitingForCredentialsHoldNoPlace: a request whose credentials
// are being checked holds no place among the max_request_bodies bodies
// read at once: a body takes one at its first read (found by review: with
// max_request_bodies 8 and bcrypt cost 13, 8 POST /api/tokens with wrong
// passwords, each body never read and answered 401, made the super
// user's writes 503 meanwhile). Here with one place: an anonymous POST
// held in its password check, and the admin's write reads its body
// meanwhile; a third body, past the place the write holds, is still
// refused, a GraphQL one too (503, where its refusal, now found as the
// body is read, would otherwise be answered as a malformed request).
func TestBodiesWaitingForCredentialsHoldNoPlace(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // a failing test lets the held check go, so the daemon stops
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, OnPasswordCheck: func() {
		if armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
	}}, func(c *config.Config) {
		// The body held open below holds its place however long the
		// checks take on a loaded machine (the default body_idle_timeout,
		// 30 s, would cut it and free the place).
		c.MaxRequestBodies, c.BodyIdleTimeout, c.BodyMinRate = 1, 10*time.Minute, 0
	})
	d.CreateDatabase(t, "slow", "type Note { text: String }")
	// The admin's token, made before any check is held: a write with it
	// checks no password.
	var tok struct{ Token string }
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/tokens", `{"name":"writer"}`).Body, &tok); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	anonymous := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", d.URL+"/api/tokens", strings.NewReader(`{"name":"x"}`))
		req.SetBasicAuth("nobody1", "wrong-password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			anonymous <- err.Error()
			return
		}
		resp.Body.Close()
		anonymous <- resp.Status
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the anonymous request's password check did not start")
	}
	r := d.Do(t, dt.Bearer(tok.Token), "POST", "/api/document/admin/slow", `{"@type":"Note","text":"x"}`)
	if r.Status != 200 {
		t.Fatalf("the admin's write while an anonymous request waits for its password check: %d %s, want 200", r.Status, r.Body)
	}
	unblock()
	if got := <-anonymous; !strings.HasPrefix(got, "401") {
		t.Fatalf("the anonymous request: %s, want 401", got)
	}
	// The place is still a cap: a body held open holds it, and another
	// is refused with 503 naming the setting, its connection closed.
	slow := startBody(t, d, "admin", dt.AdminPassword)
	eventually.True(t, 2*time.Minute, "a second body refused while one is read", func() bool {
		// The held body and the request below race for the one place:
		// the held body, read while that request held the place, was
		// refused (answered 503, its connection closed), and every
		// request after it would find the place free. It is sent again.
		_ = slow.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		if _, err := slow.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			slow = startBody(t, d, "admin", dt.AdminPassword)
		}
		r := d.Do(t, dt.Bearer(tok.Token), "POST", "/api/document/admin/slow", `{"@type":"Note","text":"y"}`)
		if r.Status == 503 && (r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "max_request_bodies")) {
			t.Fatalf("a body past the cap: %d %v %s", r.Status, r.Header, r.Body)
		}
		return r.Status == 503
	})
	// A GraphQL request refused so is a 503 too, not a malformed one.
	r = d.Do(t, dt.Bearer(tok.Token), "POST", "/api/graphql/admin/slow", `{"query":"{ __typename }"}`, "Content-Type", "application/json")
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "max_request_bodies") {
		t.Fatalf("a GraphQL body past the cap: %d %v %s", r.Status, r.Header, r.Body)
	}
}

// TestStrayBodiesAreRefused: a GET, HEAD or OPTIONS request with a body
// (a WebSocket upgrade is a GET) is answered 400 at once and its
// connection closes: no route reads such a body, and net/http reads one
// left unread before a stream's first event (a stream then waited for
// the client's body, holding a body's place) or, past 256 KiB, leaves it
// on the connection, where a parked stream's connection would read it as
// the next request. And a request answered before its body is read
// (cross-origin, an upgrade where none is served) is answered within
// body_idle_timeout of its body's last byte.
func TestStrayBodiesAreRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.BodyIdleTimeout, c.BodyMinRate = time.Second, 0 })
	d.CreateDatabase(t, "slow", "type Note { text: String }")
	addr := strings.TrimPrefix(d.URL, "http://")
	admin := "\r\nAuthorization: Basic " + basic("admin", dt.AdminPassword)
	// An empty chunked body is no body (a proxy sends one for an HTTP/2
	// client's GET that did not end its stream): served, connection kept.
	for _, path := range []string{"/api/ok", "/api/document/admin/slow?type=Note&as_list=true"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x%s\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", path, admin)
		resp := readAnswer(t, conn, "GET "+path+" with an empty chunked body", false)
		conn.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Errorf("GET %s with an empty chunked body: %d (closes the connection: %v)", path, resp.StatusCode, resp.Close)
		}
	}
	for _, c := range []struct {
		head   string
		status int
		closes bool
	}{
		{"GET /api/subscribe/admin/slow/Note HTTP/1.1" + admin, 400, true},
		{"GET /api/graphql/admin/slow?query=subscription%7BNote_added%7Bid%7D%7D HTTP/1.1\r\nAccept: text/event-stream" + admin, 400, true},
		{"HEAD /api/document/admin/slow HTTP/1.1" + admin, 400, true},
		{"OPTIONS /api/document/admin/slow HTTP/1.1\r\nOrigin: https://elsewhere.example\r\nAccess-Control-Request-Method: POST", 400, true},
		{"GET /api/graphql/admin/slow HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws", 400, true},
		// Answered before the body is read: not refused as stray, but
		// bounded.
		{"POST /api/document/admin/slow HTTP/1.1\r\nSec-Fetch-Site: cross-site\r\nContent-Type: application/json" + admin, 403, false},
		{"POST /api/document/admin/slow HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Type: application/json" + admin, 400, false},
	} {
		what, _, _ := strings.Cut(c.head, "\r\n")
		resp := readAnswer(t, openBody(t, addr, c.head), what, c.closes)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || c.closes && !strings.HasPrefix(what, "HEAD") && !strings.Contains(string(b), "carries no body") {
			t.Errorf("%s with a body: %d %s, want %d", what, resp.StatusCode, b, c.status)
		}
	}
}

// TestUnreadBodyIsBounded: a body its handler never read (its request
// failed before: wrong credentials) is not waited for without end: it is
// answered at once and its connection closed (net/http read what was left
// of it, before it answered, until body_idle_timeout, before
// TestUnauthenticatedBodyIsNotRead).
func TestUnreadBodyIsBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.BodyIdleTimeout, c.BodyMinRate = time.Second, 0 })
	d.CreateDatabase(t, "slow", "type Note { text: String }")
	resp := readAnswer(t, startBody(t, d, "admin", "a wrong password"), "a body with wrong credentials", false)
	if resp.StatusCode != 401 {
		t.Fatalf("a body with wrong credentials: %d", resp.StatusCode)
	}
}

// TestTwoAuthorizationHeaders: which of two Authorization headers counts
// would be a guess; the request is refused, on every kind of route.
func TestTwoAuthorizationHeaders(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "two", "type Note { text: String }")
	two := func(r *http.Request) {
		r.Header.Add("Authorization", "Basic "+basic("admin", dt.AdminPassword))
		r.Header.Add("Authorization", "Basic "+basic("admin", "wrong"))
	}
	for _, path := range []string{"/api/info", "/api/subscribe/admin/two/Note", "/api/graphql/admin/two?query=%7B__typename%7D", "/metrics"} {
		r := d.Do(t, two, "GET", path, nil)
		if r.Status != 400 || !strings.Contains(string(r.Body), "2 Authorization headers") {
			t.Errorf("GET %s with two Authorization headers: %d %s", path, r.Status, r.Body)
		}
	}
}

// TestMetricsNeedCredentials: /metrics names databases and shows their
// activity, so it answers the super user and the bearer metrics_token
// only; with metrics_listen it moves to a listener of its own, open to
// whoever reaches it.
func TestMetricsNeedCredentials(t *testing.T) {
	t.Parallel()
	const token = "a-metrics-token-0123456789"
	d := dt.Start(t, func(c *config.Config) { c.MetricsToken = token })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	if r := d.Do(t, dt.NoAuth(), "GET", "/metrics", nil); r.Status != 401 || r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("/metrics without credentials: %d %s", r.Status, r.Body)
	}
	if r := d.Do(t, dt.Basic("rita", "rita-password"), "GET", "/metrics", nil); r.Status != 403 {
		t.Errorf("/metrics as a user: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, 401, dt.Bearer("a-wrong-token-0123456789"), "GET", "/metrics", nil)
	// Beside another Authorization header, the token is refused as two
	// headers are everywhere (it was served when given first).
	tokenAndMore := func(r *http.Request) {
		r.Header.Add("Authorization", "Bearer "+token)
		r.Header.Add("Authorization", "Basic "+basic("rita", "rita-password"))
	}
	if r := d.Do(t, tokenAndMore, "GET", "/metrics", nil); r.Status != 400 || !strings.Contains(string(r.Body), "2 Authorization headers") {
		t.Errorf("/metrics with the token and another Authorization header: %d %.200s", r.Status, r.Body)
	}
	for _, auth := range []dt.Auth{dt.Admin(), dt.Bearer(token)} {
		if r := d.MustDo(t, 200, auth, "GET", "/metrics", nil); !strings.Contains(string(r.Body), "sluice_http_requests_total") {
			t.Errorf("/metrics: %s", r.Body)
		}
	}

	e := dt.Start(t, func(c *config.Config) {
		c.MetricsListen = "127.0.0.1:0"
		c.MetricsAllowHosts = []string{"x"} // the Host openBody sends
	})
	e.MustDo(t, 404, dt.Admin(), "GET", "/metrics", nil)
	resp, err := http.Get("http://" + e.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "sluice_http_requests_total") {
		t.Errorf("the metrics listener: %d %s", resp.StatusCode, b)
	}
	// Its requests are bounded as a whole: net/http reads a body left
	// unread before it answers, and waited for a body that never ends.
	if resp := readAnswer(t, openBody(t, e.MetricsAddr(), "GET /metrics HTTP/1.1"), "GET /metrics with a body", false); resp.StatusCode != 200 {
		t.Errorf("GET /metrics with a body: %d", resp.StatusCode)
	}
}

// TestMetricsListenerChecksHost: the metrics listener answers without
// credentials, so a page that makes its own name resolve to it (DNS
// rebinding) could read it through its visitor's browser; it answers only
// requests whose Host is an IP address, localhost or a name in
// metrics_allow_hosts, and refuses the others naming the host.
func TestMetricsListenerChecksHost(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) {
		c.MetricsListen = "127.0.0.1:0"
		c.MetricsAllowHosts = []string{"sluice.internal"}
	})
	_, port, err := net.SplitHostPort(d.MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	get := func(host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+d.MetricsAddr()+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port,
		"localhost.evil.example:" + port, "sluice.internal.evil.example:" + port} {
		code, body := get(host)
		if code != 403 || !strings.Contains(body, strconv.Quote(host)) || strings.Contains(body, "sluice_") {
			t.Errorf("Host: %s: %d %.200s; want 403 naming the host", host, code, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost", "[::1]:" + port, "10.1.2.3",
		"sluice.internal:" + port, "Sluice.Internal.:" + port} {
		if code, body := get(host); code != 200 || !strings.Contains(body, "sluice_") {
			t.Errorf("Host: %s: %d %.200s", host, code, body)
		}
	}
}

// basic returns the credentials of a Basic Authorization header.
func basic(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// jsonField returns the string field key of the JSON object b.
func jsonField(t *testing.T, b []byte, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	s, ok := m[key].(string)
	if !ok {
		t.Fatalf("no string %s in %s", key, b)
	}
	return s
}

// TestUnauthenticatedSocketsCostLittle: eight anonymous graphql-ws sockets
// each sending a 60 MiB connection_init (which cost a daemon reading up to
// max_body_bytes over a gigabyte; docs/benchmarks.md, "Measured choices in
// the code") are closed with 1009 once they pass
// max_header_bytes, and the daemon's peak memory grows by a few MB. The
// daemon runs as its own process, so that its memory is its own.
func TestUnauthenticatedSocketsCostLittle(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword}, nil)
	pid := p.Cmd.Process.Pid
	// A request or two first, so that the baseline holds what serving
	// anything costs.
	for range 3 {
		if resp, err := http.Get("http://" + p.Addr + "/api/ok"); err == nil {
			resp.Body.Close()
		}
	}
	peak0, rss0 := procMemory(t, pid, "VmHWM"), procMemory(t, pid, "VmRSS")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	chunk := []byte(strings.Repeat("x", 64<<10))
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			c, _, err := websocket.Dial(ctx, "ws://"+p.Addr+"/api/graphql/admin/any", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
			if err != nil {
				errs <- err
				return
			}
			defer c.CloseNow()
			sent := 0
			if w, err := c.Writer(ctx, websocket.MessageText); err == nil {
				_, err = w.Write([]byte(`{"type":"connection_init","payload":{"pad":"`))
				for ; err == nil && sent < 60<<20; sent += len(chunk) {
					_, err = w.Write(chunk)
				}
			}
			_, _, err = c.Read(ctx)
			if websocket.CloseStatus(err) != websocket.StatusMessageTooBig && sent >= 60<<20 {
				errs <- fmt.Errorf("a 60 MiB connection_init was sent whole, and the socket ended with %v", err)
				return
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	peak, rss := procMemory(t, pid, "VmHWM"), procMemory(t, pid, "VmRSS")
	t.Logf("8 sockets sending 60 MiB connection_init each: peak RSS %d -> %d KiB (+%d), RSS %d -> %d KiB", peak0, peak, peak-peak0, rss0, rss)
	if peak-peak0 > 16<<10 {
		t.Errorf("the daemon's peak RSS grew by %d KiB for 8 unauthenticated sockets, want a few MB", peak-peak0)
	}
}

// procMemory returns field (VmRSS, VmHWM) of /proc/<pid>/status in KiB.
func procMemory(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse %q: %v", l, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestMetricsMethodsAreBounded: net/http takes any token as a method,
// before anything is authenticated; the metrics count every method
// Sluice does not serve as "other", so anonymous clients cannot add a
// series per request (each one lived until the process ended).
func TestMetricsMethodsAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	for i := range 3 {
		method := fmt.Sprintf("M%dX%s", i, strings.Repeat("A", 1000))
		if r := d.Do(t, dt.NoAuth(), method, "/healthz", nil); r.Status != http.StatusMethodNotAllowed {
			t.Fatalf("%.10s…: %d", method, r.Status)
		}
	}
	m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
	if strings.Contains(m, "M0XAAA") || !strings.Contains(m, `method="other"`) {
		t.Errorf("the metrics of three unknown methods: %s", grepLines(m, "sluice_http_requests_total"))
	}
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
