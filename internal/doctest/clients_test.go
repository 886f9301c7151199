package doctest_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// The runnable examples that the docs show whole, and the page that
// shows each.
var examples = map[string]string{
	"test/clients/examples/follow-graphql-sse.mjs": "docs/subscriptions.md",
	"test/clients/examples/follow-graphql-ws.mjs":  "docs/subscriptions.md",
	"test/browser/examples/follow-eventsource.js":  "docs/subscriptions.md",
	"test/clients/examples/edit-safely.mjs":        "docs/rest.md",
}

// TestDocsShowExamples checks that the docs show each runnable example
// exactly as the file that the tests below run.
func TestDocsShowExamples(t *testing.T) {
	t.Parallel()
	for path, page := range examples {
		doc, err := os.ReadFile("../../" + page)
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile("../../" + path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```js\n"+string(src)+"```\n") {
			t.Errorf("%s does not show %s as it is: copy the file into its ```js block", page, path)
		}
	}
}

// TestEditSafelyExample runs the example that edits a document safely
// (test/clients/examples/edit-safely.mjs): three copies at once, against
// two replicas, each adding 1 to one count ten times. Read-modify-write
// races all the time, so without conditional writes some additions would
// be lost: the count must end at 30, in 30 commits. It runs only when
// SLUICE_GRAPHQL_CLIENTS=1 (make test-graphql-clients).
func TestEditSafelyExample(t *testing.T) {
	dir := dt.NodeProject(t, "SLUICE_GRAPHQL_CLIENTS", "clients", "graphql-ws")
	t.Parallel()
	settings := func(c *config.Config) { c.AdminPassword = adminPassword }
	a := dt.Start(t, settings)
	b := dt.Start(t, settings, dt.WithDatabaseURL(a.DatabaseURL))
	a.MustDo(t, http.StatusCreated, admin(), http.MethodPost, "/api/db/admin/counters", `{"schema":"type Counter { count: Int }"}`)
	a.MustDo(t, http.StatusOK, admin(), http.MethodPost, "/api/document/admin/counters", `{"@type":"Counter","@id":"visits","count":0}`)
	errs := make(chan error, 3)
	for i, d := range []*dt.Daemon{a, b, a} {
		cmd := exec.Command("node", "examples/edit-safely.mjs", d.URL+"/api/document/admin/counters?id=Counter/visits", "10")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SLUICE_CREDENTIALS=admin:"+adminPassword)
		go func() {
			out, err := cmd.CombinedOutput()
			t.Logf("example %d:\n%s", i, out)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("an example failed: %v", err)
		}
	}
	var doc struct{ Count int }
	if err := json.Unmarshal(a.MustDo(t, http.StatusOK, admin(), http.MethodGet, "/api/document/admin/counters?id=Counter/visits", nil).Body, &doc); err != nil || doc.Count != 30 {
		t.Fatalf("count %d after 30 additions (%v)", doc.Count, err)
	}
	var log []json.RawMessage
	if err := json.Unmarshal(a.MustDo(t, http.StatusOK, admin(), http.MethodGet, "/api/log/admin/counters", nil).Body, &log); err != nil || len(log) != 31 {
		t.Fatalf("%d commits, want 31 (%v)", len(log), err)
	}
}

// TestClientExamples runs the Node examples that follow a subscription for
// good (test/clients/examples: graphql-sse and graphql-ws), each against a
// daemon that is stopped while a commit is made and started again: each
// must print every event once, in order. It needs Node 20 and `npm ci` in
// test/clients, so it runs only when SLUICE_GRAPHQL_CLIENTS=1 (make
// test-graphql-clients, part of make test).
func TestClientExamples(t *testing.T) {
	dir := dt.NodeProject(t, "SLUICE_GRAPHQL_CLIENTS", "clients", "graphql-ws")
	t.Parallel()
	for _, c := range []struct{ script, scheme string }{
		{"follow-graphql-sse.mjs", "http"},
		{"follow-graphql-ws.mjs", "ws"},
	} {
		t.Run(c.script, func(t *testing.T) {
			t.Parallel()
			followAcrossRestart(t, nil, false, func(d *dt.Daemon, from string) *exec.Cmd {
				url := c.scheme + strings.TrimPrefix(d.URL, "http") + "/api/graphql/admin/people"
				cmd := exec.Command("node", "examples/"+c.script, url, from)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "SLUICE_CREDENTIALS=admin:"+adminPassword)
				return cmd
			})
		})
	}
}

// TestBrowserExample runs the EventSource example
// (test/browser/examples/follow-eventsource.js) in headless Chromium, in a
// page of another origin that holds an API token, across a restart as
// TestClientExamples does. It runs only when SLUICE_BROWSER_TEST=1 (make
// test-browser; see dt.RunBrowserScript for what it needs).
func TestBrowserExample(t *testing.T) {
	dir := dt.NodeProject(t, "SLUICE_BROWSER_TEST", "browser", "puppeteer-core")
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>another origin</title><p>A page that follows Sluice.</p>\n"))
	}))
	defer page.Close()
	followAcrossRestart(t, []string{page.URL}, true, func(d *dt.Daemon, from string) *exec.Cmd {
		r := d.MustDo(t, http.StatusCreated, admin(), http.MethodPost, "/api/tokens", `{"name":"page"}`)
		var body struct{ Token string }
		if err := json.Unmarshal(r.Body, &body); err != nil || body.Token == "" {
			t.Fatalf("POST /api/tokens: %s (%v)", r.Body, err)
		}
		cmd := exec.Command("node", "follow.mjs", d.URL, page.URL, body.Token, from)
		cmd.Dir = dir
		return cmd
	})
}

func admin() dt.Auth { return dt.Basic("admin", adminPassword) }

var personID = regexp.MustCompile(`Person/[a-z]+`)

// followAcrossRestart runs the example that start returns, following
// admin/people's Person documents from the position of a read, on a daemon (CORS
// allowing origins) that it then stops; while it is down another daemon
// commits on the same data, and a daemon is started again on the same
// address. The example must print each person's id once, in commit order:
// the one committed before it started (after the position it was given),
// the one committed while it was disconnected, and one committed after.
// An example that stopsOnEOF ends when its standard input does; the
// others are killed.
func followAcrossRestart(t *testing.T, origins []string, stopsOnEOF bool, start func(d *dt.Daemon, from string) *exec.Cmd) {
	settings := func(listen string) dt.Option {
		return func(c *config.Config) {
			c.AdminPassword = adminPassword
			c.CORSOrigins = origins
			if listen != "" {
				c.Listen = listen
			}
		}
	}
	d1 := dt.Start(t, settings(""))
	addr := strings.TrimPrefix(d1.URL, "http://")
	d1.MustDo(t, http.StatusCreated, admin(), http.MethodPost, "/api/db/admin/people", `{"schema":"type Person { name: String! }"}`)
	insert := func(d *dt.Daemon, name string) {
		d.MustDo(t, http.StatusOK, admin(), http.MethodPost, "/api/document/admin/people",
			`{"@type":"Person","@id":"`+strings.ToLower(name)+`","name":"`+name+`"}`)
	}
	// The example starts after Ann, from the position of a read.
	insert(d1, "Ann")
	from := d1.MustDo(t, http.StatusOK, admin(), http.MethodGet, "/api/document/admin/people?type=Person", nil).Header.Get("Sluice-Position")
	insert(d1, "Alice")

	cmd := start(d1, from)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	defer func() {
		_ = stdin.Close()
		if !stopsOnEOF {
			_ = cmd.Process.Kill()
		}
		timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		for range lines { // until the example's output ends
		}
		timer.Stop()
		_ = cmd.Wait()
		t.Logf("the example printed %q; on stderr:\n%s", seen, stderr.String())
	}()
	await := func(id string) {
		t.Helper()
		timer := time.NewTimer(90 * time.Second)
		defer timer.Stop()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the example ended before printing %s", id)
				}
				t.Logf("example: %s", line)
				if strings.HasPrefix(line, "FAIL") {
					t.Fatalf("the example failed: %s", line)
				}
				if m := personID.FindString(line); m != "" {
					seen = append(seen, m)
					if m == id {
						return
					}
				}
			case <-timer.C:
				t.Fatalf("the example printed no %s within 90 s", id)
			}
		}
	}

	await("Person/alice")
	d1.Stop(t)
	d2 := dt.Start(t, settings(""), dt.WithDatabaseURL(d1.DatabaseURL))
	insert(d2, "Bob") // while the example cannot reach Sluice
	d2.Stop(t)
	d3 := dt.Start(t, settings(addr), dt.WithDatabaseURL(d1.DatabaseURL))
	await("Person/bob")
	insert(d3, "Carol")
	await("Person/carol")
	if want := []string{"Person/alice", "Person/bob", "Person/carol"}; !slices.Equal(seen, want) {
		t.Errorf("the example received %q, want %q: each once, in commit order", seen, want)
	}
}
