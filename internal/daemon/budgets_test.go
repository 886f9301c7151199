package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// resetPeak resets the peak RSS (VmHWM) of process pid to its current RSS.
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

// TestChangeSetOfLargeCommitIsBounded: _ChangeSet(commit:) of a commit of
// 150,000 documents, asked by four clients at once, reads the commit in
// pieces and stops at graphql_max_result_rows: each gets the error naming
// it, and the daemon's peak memory grows by tens of MB (reading the whole
// commit took 2.25 GB). Its metadata alone reads one piece, and a
// smaller bound is a smaller read. The daemon runs as its own process,
// so that its memory is its own.
func TestChangeSetOfLargeCommitIsBounded(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword}, nil)
	d := dt.Remote("http://" + p.Addr)
	d.CreateDatabase(t, "big", "type Note { text: String n: Int }")
	const n = 150000
	var body strings.Builder
	for i := range n {
		fmt.Fprintf(&body, `{"@type":"Note","@id":"Note/n%06d","text":"%s","n":%d}`+"\n", i, strings.Repeat("x", 100), i)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", body.String(), "Content-Type", "application/x-ndjson")
	pid := p.Cmd.Process.Pid
	resetPeak(t, pid)
	peak0 := procMemory(t, pid, "VmHWM")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/big", `{"query":"{ _ChangeSet(commit: \"1\") { Note_added { _id text n } } }"}`, "Content-Type", "application/json")
			if !strings.Contains(string(r.Body), "graphql_max_result_rows") {
				t.Errorf("_ChangeSet of %d documents: %d %.300s", n, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	peak := procMemory(t, pid, "VmHWM")
	t.Logf("4 concurrent _ChangeSet reads of a %d-document commit: peak RSS %d -> %d KiB (+%d)", n, peak0, peak, peak-peak0)
	if peak-peak0 > 128<<10 {
		t.Errorf("the daemon's peak RSS grew by %d KiB for 4 reads of the commit, want it bounded by graphql_max_result_rows", peak-peak0)
	}
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/big", `{"query":"{ _ChangeSet(commit: \"1\") { _CommitMetadata { _id } } }"}`, "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), `{"data":{"_ChangeSet":{"_CommitMetadata":{"_id":"1"}}}`) {
		t.Errorf("the metadata of the commit: %s", r.Body)
	}
}

// TestLiveQueryBudgets: a user's live queries are admitted while the
// user holds fewer than live_queries_per_user and their results fewer
// than live_rows_per_user documents, and refused (429) naming the bound
// otherwise, before anything is read (extensions.limit naming it, as the
// other budgets' errors do); a result that would take them past
// it ends its live query with an error naming it, and the others go on;
// closing one admits another; the super user is exempt.
func TestLiveQueryBudgets(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.LiveQueriesPerUser, c.LiveRowsPerUser = 3, 10 })
	d.CreateDatabase(t, "live", "type Item { n: Int! owner: String! }")
	var docs []string
	for i := 1; i <= 8; i++ {
		for _, o := range []string{"a", "b"} {
			docs = append(docs, fmt.Sprintf(`{"@type":"Item","@id":"Item/%s%d","n":%d,"owner":%q}`, o, i, i, o))
		}
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/live", "["+strings.Join(docs, ",")+"]")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/live", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	live := func(query string) dt.StreamRequest {
		b, _ := json.Marshal(map[string]string{"query": query})
		return dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/live", Body: string(b), Header: []string{"Accept", "text/event-stream"}}
	}
	open := func(auth dt.Auth, query string) *dt.Stream {
		st := d.MustOpenStream(t, auth, live(query))
		st.Next() // : connected
		return st
	}
	refused := func(query, key string) {
		t.Helper()
		st, resp := d.OpenStream(t, rita, live(query))
		if st != nil {
			t.Fatalf("%s: admitted, want a 429 naming %s", query, key)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Errors []struct {
				Extensions map[string]any
			}
		}
		if resp.StatusCode != 429 || !strings.Contains(string(b), key) || json.Unmarshal(b, &body) != nil || len(body.Errors) != 1 || body.Errors[0].Extensions["limit"] != key {
			t.Fatalf("%s: %d %s, want a 429 naming %s, in extensions.limit too", query, resp.StatusCode, b, key)
		}
	}
	count := func(f dt.Frame) int { return strings.Count(f.Field("data"), `"n":`) }

	l1 := open(rita, `subscription { Item(filter: {owner: {eq: "a"}}) { n } }`)
	if f := l1.Event(); count(f) != 8 {
		t.Fatalf("the first result: %s", f)
	}
	// 8 documents held: a result of 8 more would pass 10.
	l2 := open(rita, `subscription { Item(filter: {owner: {eq: "b"}}) { n } }`)
	if fs := l2.Ended(); len(fs) != 2 || !pastBudget(fs[0], "live_rows_per_user") || fs[1].Field("event") != "complete" {
		t.Fatalf("a result past live_rows_per_user: %v", fs)
	}
	l3 := open(rita, `subscription { Item(filter: {owner: {eq: "a"}}, limit: 1) { n } }`)
	if f := l3.Event(); count(f) != 1 {
		t.Fatalf("a result within the budget: %s", f)
	}
	l4 := open(rita, `subscription { Item(limit: 0) { n } }`)
	l4.Event()
	refused(`subscription { Item(filter: {n: {eq: 2}}) { n } }`, "live_queries_per_user")
	l4.Close()
	eventually.True(t, dt.StreamWait, "a live query closed makes room for another", func() bool {
		st, resp := d.OpenStream(t, rita, live(`subscription { Item(limit: 0) { n } }`))
		if st == nil {
			resp.Body.Close()
			return false
		}
		st.Next()
		st.Event()
		st.Close()
		return true
	})

	// 9 held, then 10: the budget is full, and a new live query waits.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/live", `{"@type":"Item","@id":"Item/a9","n":9,"owner":"a"}`)
	if f := l1.Event(); count(f) != 9 {
		t.Fatalf("the result after a write: %s", f)
	}
	refused(`subscription { Item(limit: 0) { n } }`, "live_rows_per_user")
	// The super user is exempt.
	admin := open(dt.Admin(), `subscription { Item { n } }`)
	if f := admin.Event(); count(f) != 17 {
		t.Fatalf("the super user's result: %s", f)
	}
	// A result past the budget ends its live query; the others go on.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/live", `{"@type":"Item","@id":"Item/a10","n":10,"owner":"a"}`)
	if fs := l1.Ended(); len(fs) != 2 || !pastBudget(fs[0], "live_rows_per_user") {
		t.Fatalf("a result growing past live_rows_per_user: %v", fs)
	}
	if f := admin.Event(); count(f) != 18 {
		t.Fatalf("the super user's result after the write: %s", f)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/live", `{"@type":"Item","@id":"Item/a1","n":0,"owner":"a"}`)
	if f := l3.Event(); !strings.Contains(f.Field("data"), `"n":0`) {
		t.Fatalf("the live query within the budget after the other ended: %s", f)
	}
}

// TestLiveBoundaryIsCharged: a live query listing the first documents in
// the order of a field keeps its result's last row's sort keys between
// results, to skip commits past that row (graph.Boundary), and those
// count toward live_bytes_per_user with the result's JSON. Rita's first
// live query's result is a few dozen bytes of JSON, and its last row's
// text, not selected, is 1,500 bytes: with it charged, a second result of
// about 520 bytes is past her 2,000 bytes, and ends its live query (it
// fitted while only the JSON was charged). Otto's budget has no room left
// for the sort keys after a result of his: his live query keeps none and
// goes on, each commit of a Note read again.
func TestLiveBoundaryIsCharged(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.LiveBytesPerUser = 2000 })
	d.CreateDatabase(t, "lb", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/lb",
		fmt.Sprintf(`[{"@type":"Note","@id":"Note/a","text":%q},{"@type":"Note","@id":"Note/b","text":%q}]`, strings.Repeat("y", 500), strings.Repeat("x", 1500)))
	for _, u := range []string{"rita", "otto"} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", fmt.Sprintf(`{"name":%q,"organization":"admin","password":"%s-password"}`, u, u))
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/lb", fmt.Sprintf(`{"user":%q,"role":"read"}`, u))
	}
	rita, otto := dt.Basic("rita", "rita-password"), dt.Basic("otto", "otto-password")
	open := func(auth dt.Auth, query string) *dt.Stream {
		b, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, auth, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/lb", Body: string(b), Header: []string{"Accept", "text/event-stream"}})
		st.Next() // : connected
		return st
	}
	const first = `query @live { Note(orderBy: {text: ASC}, limit: 1) { _id } }` // Note/b, by its 1,500 x
	const second = `query @live { Note(limit: 1) { text } }`                     // Note/a's 500 y

	r1 := open(rita, first)
	if f := r1.Event(); !strings.Contains(f.Field("data"), `"Note/b"`) {
		t.Fatalf("rita's first result: %s", f)
	}
	r2 := open(rita, second)
	if f := r2.Event(); !pastBudget(f, "live_bytes_per_user") {
		t.Fatalf("a result of 520 bytes next to 1,500 bytes of sort keys: %s, want the error past live_bytes_per_user", f)
	}

	o2 := open(otto, second)
	if f := o2.Event(); !strings.Contains(f.Field("data"), `"yyy`) {
		t.Fatalf("otto's first result: %s", f)
	}
	o1 := open(otto, first)
	if f := o1.Event(); !strings.Contains(f.Field("data"), `"Note/b"`) {
		t.Fatalf("otto's result whose sort keys the budget has no room for: %s", f)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/lb", `{"@type":"Note","@id":"Note/c","text":"w"}`)
	if f := o1.Event(); !strings.Contains(f.Field("data"), `"Note/c"`) {
		t.Fatalf("otto's result after a Note that sorts first: %s", f)
	}
	// Rita's first live query went on.
	if f := r1.Event(); !strings.Contains(f.Field("data"), `"Note/c"`) {
		t.Fatalf("rita's result after a Note that sorts first: %s", f)
	}
}

// pastBudget reports whether f is the error of a live query's result past
// the live query budget key: TOO_MANY_REQUESTS (429 when it refuses a live
// query), with the key in its extensions and named once in its message.
func pastBudget(f dt.Frame, key string) bool {
	var r struct {
		Errors []struct {
			Message    string
			Extensions struct{ Code, Limit string }
		}
	}
	if err := json.Unmarshal([]byte(f.Field("data")), &r); err != nil || len(r.Errors) != 1 {
		return false
	}
	e := r.Errors[0]
	return e.Extensions.Code == "TOO_MANY_REQUESTS" && e.Extensions.Limit == key && strings.Count(e.Message, key) == 1
}

// TestAnonymousGuessesThrottled: bearer guesses from one address are
// refused 429 with Retry-After once ten times auth_max_failures of them
// failed (the address's limit), before any is looked up.
func TestAnonymousGuessesThrottled(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.AuthMaxFailures, c.AuthFailureWindow = 3, time.Hour })
	for i := range 200 {
		r := d.Do(t, dt.Bearer(fmt.Sprintf("sluice_guess%d", i)), "GET", "/api/info", nil)
		want := 401
		if i >= 30 {
			want = 429
		}
		if r.Status != want || want == 429 && (r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "too many failed sign-ins from this address")) {
			t.Fatalf("guess %d: %d %s (Retry-After %q), want %d", i, r.Status, r.Body, r.Header.Get("Retry-After"), want)
		}
	}
}

// TestTokensAreBounded: a user holds at most 1,000 unrevoked API tokens
// (the 1,001st is a 429 naming the cap; revoking one makes room), and a
// token's name is at most 256 bytes (a 1 KiB one is a 400 naming the
// limit) (found by review: one user made 1,100 tokens in 0.23 s, then 6
// with 16 MiB names, and GET /api/tokens answered 100 MB).
func TestTokensAreBounded(t *testing.T) {
	t.Parallel()
	// tess revokes a thousand tokens below, past the access changes a
	// user may make at once (TestAccessChangesAreRateLimitedPerUser).
	d := dt.Start(t, func(c *config.Config) { c.AccessChangesPerUser = 0 })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"tess","organization":"admin","password":"tess-password"}`)
	tess := dt.Basic("tess", "tess-password")
	if r := d.Do(t, tess, "POST", "/api/tokens", `{"name":"`+strings.Repeat("n", 1024)+`"}`); r.Status != 400 || !strings.Contains(string(r.Body), "256") {
		t.Fatalf("a token of a 1 KiB name: %d %s, want a 400 naming 256 bytes", r.Status, r.Body)
	}
	var first struct{ ID int64 }
	if err := json.Unmarshal(d.MustDo(t, 201, tess, "POST", "/api/tokens", `{"name":"`+strings.Repeat("n", 256)+`"}`).Body, &first); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < 999; i += 4 {
				if r := d.Do(t, tess, "POST", "/api/tokens", fmt.Sprintf(`{"name":"t%d"}`, i)); r.Status != 201 {
					t.Errorf("token %d: %d %s", i+2, r.Status, r.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if r := d.Do(t, tess, "POST", "/api/tokens", `{"name":"one too many"}`); r.Status != 429 || !strings.Contains(string(r.Body), "1000") {
		t.Fatalf("the 1,001st token: %d %s, want a 429 naming the cap", r.Status, r.Body)
	}
	d.MustDo(t, 200, tess, "DELETE", fmt.Sprintf("/api/tokens/%d", first.ID), nil)
	d.MustDo(t, 201, tess, "POST", "/api/tokens", `{"name":"after a revoke"}`)
	var list []struct{ Name string }
	if err := json.Unmarshal(d.MustDo(t, 200, tess, "GET", "/api/tokens", nil).Body, &list); err != nil || len(list) != 1001 {
		t.Fatalf("the listing: %d tokens (%v), want 1,000 and the revoked one", len(list), err)
	}
	// Revoked tokens past the newest 1,000 of a user are deleted: making
	// and revoking tokens in a loop does not grow the table.
	var all []struct{ ID int64 }
	if err := json.Unmarshal(d.MustDo(t, 200, tess, "GET", "/api/tokens", nil).Body, &all); err != nil {
		t.Fatal(err)
	}
	for _, tok := range all[:len(all)-1] { // newest first: all but the one revoked
		d.MustDo(t, 200, tess, "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)
	}
	pg, err := pgx.Connect(context.Background(), d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	var rows int
	if err := pg.QueryRow(context.Background(), "SELECT count(*) FROM sluice.tokens t JOIN sluice.users u ON u.id = t.user_id WHERE u.name = 'tess'").Scan(&rows); err != nil || rows != 1000 {
		t.Fatalf("tess's 1,001 revoked tokens: %d rows (%v), want the newest 1,000", rows, err)
	}
}

// TestMetricsTokenGuessesThrottled: wrong guesses of metrics_token count
// toward their address's limit as other bearer tokens do, and past it
// the address is answered 429, the right token included (found by
// review: the comparison ran before any throttle check, so a throttled
// address still got 200 for the right guess).
func TestMetricsTokenGuessesThrottled(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-metrics"
	d := dt.Start(t, func(c *config.Config) {
		c.AuthMaxFailures, c.AuthFailureWindow, c.MetricsToken = 3, time.Hour, token
	})
	d.MustDo(t, 200, dt.Bearer(token), "GET", "/metrics", nil)
	for i := range 30 { // the address's limit for a per-user 3
		d.MustDo(t, 401, dt.Bearer(fmt.Sprintf("guess-%d", i)), "GET", "/metrics", nil)
	}
	if r := d.Do(t, dt.Bearer(token), "GET", "/metrics", nil); r.Status != 429 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the right metrics_token from a throttled address: %d %s, want 429 with Retry-After", r.Status, r.Body)
	}
}

// TestSchemaSizeBudget: a schema larger than max_schema_bytes is refused
// (413, naming the key) when a database is created with it, when it is
// put, and when it is tried (dry_run), and nothing changes; one within it
// is taken.
func TestSchemaSizeBudget(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxSchemaBytes = 512 })
	small := "type Note { text: String }"
	large := "# " + strings.Repeat("x", 600) + "\n" + small
	refused := func(r dt.Response) {
		t.Helper()
		if r.Status != 413 || !strings.Contains(string(r.Body), "max_schema_bytes") {
			t.Fatalf("a schema of %d bytes: %d %s, want a 413 naming max_schema_bytes", len(large), r.Status, r.Body)
		}
	}
	body, _ := json.Marshal(map[string]string{"schema": large})
	refused(d.Do(t, dt.Admin(), "POST", "/api/db/admin/big", string(body)))
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/schema/admin/big", nil)
	d.CreateDatabase(t, "notes", small)
	refused(d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/notes?dry_run=true", large))
	refused(d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/notes", large))
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/notes", nil); strings.Contains(string(r.Body), "xxx") {
		t.Fatalf("the schema after a refused change: %s", r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/notes", "# within the budget\n"+small)
}

// TestSharedLiveQueryLeavesItsStarter: a live query shared by two users
// is charged to the one who started it until that one leaves; then to
// the one who stays, and the first may hold live queries again.
func TestSharedLiveQueryLeavesItsStarter(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.LiveRowsPerUser = 5 })
	d.CreateDatabase(t, "share", "type Item { n: Int! }")
	var docs []string
	for i := 1; i <= 5; i++ {
		docs = append(docs, fmt.Sprintf(`{"@type":"Item","@id":"Item/%d","n":%d}`, i, i))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/share", "["+strings.Join(docs, ",")+"]")
	for _, u := range []string{"rita", "mallory"} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"`+u+`","organization":"admin","password":"`+u+`-password"}`)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/share", `{"user":"`+u+`","role":"read"}`)
	}
	rita, mallory := dt.Basic("rita", "rita-password"), dt.Basic("mallory", "mallory-password")
	live := func(query string) dt.StreamRequest {
		b, _ := json.Marshal(map[string]string{"query": query})
		return dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/share", Body: string(b), Header: []string{"Accept", "text/event-stream"}}
	}
	const all = `subscription { Item { n } }`
	first := d.MustOpenStream(t, rita, live(all))
	first.Next()
	first.Event()
	second := d.MustOpenStream(t, mallory, live(all))
	second.Next()
	second.Event()
	// rita holds the 5 documents: another live query of hers is refused.
	if st, resp := d.OpenStream(t, rita, live(`subscription { Item(limit: 1) { n } }`)); st != nil || resp.StatusCode != 429 {
		t.Fatalf("rita's second live query while she holds the share: admitted %v", st != nil)
	} else {
		resp.Body.Close()
	}
	first.Close()
	eventually.True(t, dt.StreamWait, "rita, out of the share, holds nothing of it", func() bool {
		st, resp := d.OpenStream(t, rita, live(`subscription { Item(limit: 1) { n } }`))
		if st == nil {
			resp.Body.Close()
			return false
		}
		st.Close()
		return true
	})
	// mallory, who stays, holds it now.
	if st, resp := d.OpenStream(t, mallory, live(`subscription { Item(limit: 1) { n } }`)); st != nil || resp.StatusCode != 429 {
		t.Fatalf("mallory's second live query while she holds the share: admitted %v", st != nil)
	} else {
		resp.Body.Close()
	}
}

// TestSlowReadersHoldTheirShareOfConnections: users whose listings are
// read slowly (or not at all) hold at most a quarter of the pool's
// connections each, and all users together at most seven eighths: with
// two such users, another user's requests are still served (they waited
// for a connection for as long as the slow reads lasted).
func TestSlowReadersHoldTheirShareOfConnections(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "big", "type Item { text: String! }")
	d.CreateDatabase(t, "small", "type Note { text: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", itemsNDJSON(20000, 1000), "Content-Type", "application/x-ndjson")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/small", `{"@type":"Note","@id":"n","text":"hi"}`)
	for _, u := range []struct{ name, db string }{{"rob", "big"}, {"rex", "big"}, {"wendy", "small"}} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"`+u.name+`","organization":"admin","password":"`+u.name+`-password"}`)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+u.db, `{"user":"`+u.name+`","role":"read"}`)
	}
	// As many listings of 20 MB as the pool has connections, from each of
	// two users, none read.
	for _, u := range []string{"rob", "rex"} {
		for range 16 {
			conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			fmt.Fprintf(conn, "GET /api/document/admin/big?type=Item HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n\r\n", basic(u, u+"-password"))
		}
	}
	// Once the listings hold their connections (the two users' shares of
	// them, or without shares every one).
	pg, err := pgx.Connect(context.Background(), d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	eventually.True(t, dt.StreamWait, "the listings hold connections", func() bool {
		var n int
		err := pg.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%"Item"%' AND state <> 'idle' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n >= 8
	})
	client := &http.Client{Timeout: 8 * time.Second} // less than a held request's wait for its share
	req, _ := http.NewRequest("GET", d.URL+"/api/document/admin/small?id=Note/n", nil)
	req.SetBasicAuth("wendy", "wendy-password")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("another user's read while two users' listings are not read: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("another user's read while two users' listings are not read: %d", resp.StatusCode)
	}
}

// TestWriteDocumentsBudget: a write request holding more than
// max_write_documents documents is refused (413, naming the setting),
// over REST (a JSON array, an NDJSON stream, a delete's ids) and GraphQL,
// and writes nothing; a GraphQL body larger than graphql_max_body_bytes
// is refused before it is decoded.
func TestWriteDocumentsBudget(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxWriteDocuments, c.GraphQLMaxBodyBytes = 3, 2000 })
	d.CreateDatabase(t, "few", "type Note { text: String }")
	docs := func(n int, sep string) string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf(`{"@type":"Note","@id":"n%d"}`, i))
		}
		return strings.Join(out, sep)
	}
	refused := func(r dt.Response, what string) {
		t.Helper()
		if r.Status != 413 || !strings.Contains(string(r.Body), "max_write_documents") {
			t.Errorf("%s: %d %s, want a 413 naming max_write_documents", what, r.Status, r.Body)
		}
	}
	refused(d.Do(t, dt.Admin(), "POST", "/api/document/admin/few", "["+docs(4, ",")+"]"), "4 documents in an array")
	refused(d.Do(t, dt.Admin(), "POST", "/api/document/admin/few", docs(4, "\n"), "Content-Type", "application/x-ndjson"), "4 documents in NDJSON")
	if n := logLength(t, d, "few"); n != 0 {
		t.Fatalf("refused writes made %d commits", n)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/few", "["+docs(3, ",")+"]")
	refused(d.Do(t, dt.Admin(), "DELETE", "/api/document/admin/few", `["Note/n0","Note/n1","Note/n2","Note/n3"]`), "a delete of 4 ids")
	body, _ := json.Marshal(map[string]string{"query": `mutation { Note_insert(documents: [{text: "a"}, {text: "b"}, {text: "c"}, {text: "d"}]) }`})
	if r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/few", body, "Content-Type", "application/json"); !strings.Contains(string(r.Body), "max_write_documents") {
		t.Errorf("a GraphQL insert of 4 documents: %d %s", r.Status, r.Body)
	}
	// Validation stops at the allowance: the fifth document's error is
	// not reached.
	body, _ = json.Marshal(map[string]any{"query": `mutation($j: JSON!) { _insertDocuments(json: $j) }`,
		"variables": map[string]string{"j": "[" + docs(4, ",") + `,{"@type":"Nope"}]`}})
	if r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/few", body, "Content-Type", "application/json"); !strings.Contains(string(r.Body), "max_write_documents") {
		t.Errorf("a GraphQL insert of 5 documents, the fifth invalid: %d %s", r.Status, r.Body)
	}
	big, _ := json.Marshal(map[string]any{"query": `query($x: JSON) { Note { _id } }`, "variables": map[string]string{"x": strings.Repeat("x", 3000)}})
	if r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/few", big, "Content-Type", "application/json"); r.Status != 413 {
		t.Errorf("a GraphQL body past graphql_max_body_bytes: %d %s", r.Status, r.Body)
	}
	if n := logLength(t, d, "few"); n != 1 {
		t.Fatalf("%d commits, want the one write within the budget", n)
	}
}

// itemsNDJSON returns n Items, each of a text of size bytes, as NDJSON.
func itemsNDJSON(n, size int) string {
	text := strings.Repeat("x", size)
	var body strings.Builder
	for i := range n {
		fmt.Fprintf(&body, `{"@type":"Item","@id":"i%d","text":%q}`+"\n", i, text)
	}
	return body.String()
}

// runningListings counts the Postgres backends, besides pg's own, running
// a statement of class Item that is not done: a listing being read.
func runningListings(t *testing.T, pg *pgx.Conn) int {
	t.Helper()
	var n int
	if err := pg.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%"Item"%' AND state <> 'idle' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStalledReaderIsCut: a client that stops reading an answer (its
// connection left open) is cut once a write has waited write_timeout, and
// the listing it asked for gives its Postgres connection back; a GraphQL
// WebSocket (its connection taken over after a 101 answer, which got a
// deadline) still delivers long after write_timeout.
func TestStalledReaderIsCut(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	d := dt.Start(t, func(c *config.Config) { c.WriteTimeout = timeout })
	d.CreateDatabase(t, "big", "type Item { text: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", itemsNDJSON(20000, 1000), "Content-Type", "application/x-ndjson")
	ws := openOutageSocket(t, d, "big")
	opened := time.Now()
	ws.send(t, `{"id":"1","type":"subscribe","payload":{"query":"subscription { Item_added { _id } }"}}`)

	// A listing of 20 MB, never read.
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/document/admin/big?type=Item HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n\r\n", basic("admin", dt.AdminPassword))
	pg, err := pgx.Connect(context.Background(), d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	eventually.True(t, dt.StreamWait, "the listing holds a connection", func() bool { return runningListings(t, pg) == 1 })
	eventually.True(t, dt.StreamWait, "the stalled listing gives its connection back", func() bool { return runningListings(t, pg) == 0 })
	// The client, reading now, gets part of the answer and then the end of
	// the connection.
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, conn)
	if err != nil || n >= 20000*1000 {
		t.Fatalf("the stalled client read %d bytes, then %v; want part of the listing, then the end", n, err)
	}

	// The socket has been open for longer than write_timeout: what it is
	// sent now must still reach it. (The wait is for time itself to pass.)
	if wait := 2*timeout - time.Since(opened); wait > 0 {
		<-time.After(wait)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", `{"@type":"Item","@id":"late","text":"t"}`)
	if m := ws.read(t); !strings.Contains(m, "Item/late") {
		t.Fatalf("graphql-ws after write_timeout: %s", m)
	}
}

// TestSlowSteadyReaderIsNotCut: write_timeout bounds how long a client
// makes no progress, not how long an answer takes: a document larger
// than what a client reading steadily but slowly takes in within
// write_timeout still arrives whole (it was cut, written in one Write
// with one deadline).
func TestSlowSteadyReaderIsNotCut(t *testing.T) {
	t.Parallel()
	// The daemon's socket buffers up to about 4 MB (Linux grows it), and
	// a write blocked on a full buffer returns only once about a third of
	// it has drained: at 2 MB a second, about 0.7 s, within the 1.5 s
	// that write_timeout 2 s leaves a write. The answer takes about 8 s,
	// and a write of all of it with one deadline would wait for 12 MB to
	// drain, 6 s.
	d := dt.Start(t, func(c *config.Config) { c.WriteTimeout = 2 * time.Second })
	d.CreateDatabase(t, "slow", "type Item { text: String! }")
	const size = 16 << 20
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/slow", `{"@type":"Item","@id":"big","text":"`+strings.Repeat("x", size)+`"}`)
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small receive buffer: the client's pace, not the kernel's
	// buffers, decides when the daemon's writes finish.
	if err := conn.(*net.TCPConn).SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /api/document/admin/slow?id=Item/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic %s\r\n\r\n", basic("admin", dt.AdminPassword))
	// 2 MB a second, paced by what has been read since the start rather
	// than by ticks, which a loaded machine skips (the pace then fell to
	// a third and a write outlasted its deadline).
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	got, took, err := pacedRead(conn, 2e6, -1)
	if err != nil {
		t.Fatalf("after %d bytes in %s: %v", got, took, err)
	}
	if got < size {
		t.Fatalf("the answer was cut after %d bytes (%s), want all of the %d-byte document", got, took.Round(time.Millisecond), size)
	}
}

// TestSlowSteadyStreamReaderIsNotCut: a stream's frame larger than what a
// client reading steadily but slowly takes in within write_timeout (a
// 16 MiB document in one event) still arrives whole: frames go in 64 KiB
// pieces, each bounded, whether the stream is parked or not (a frame
// was written in one write with one bound, and cut).
func TestSlowSteadyStreamReaderIsNotCut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WriteTimeout = 2 * time.Second })
	d.CreateDatabase(t, "slowev", "type Item { text: String! }")
	br := openSlowStream(t, d, "/api/subscribe/admin/slowev/Item", "")
	const size = 16 << 20
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/slowev", `{"@type":"Item","@id":"big","text":"`+strings.Repeat("x", size)+`"}`)
	// 2 MB a second, paced by what has been read since the start (see
	// TestSlowSteadyReaderIsNotCut): about 8 s for the event, four times
	// write_timeout; one 64 KiB piece takes well within it.
	if got, took, err := pacedRead(br, 2e6, size); err != nil || got < size {
		t.Fatalf("the stream was cut after %d bytes of its event (%s): %v; want all %d", got, took.Round(time.Millisecond), err, size)
	}
}

// TestSlowSteadyUnparkedStreamReaderIsNotCut: the same for a stream that
// is never parked, whose frames are written by the response's own
// writer (httpstream's writeOut, not a parked connection's blocking
// writes): a stream resumed from a position (Last-Event-ID) reads the
// log on a subscription of its own, shares nobody's events, and so
// stays on its request's goroutine. (Written in one piece, the frame was
// one write with one deadline, and cut.)
func TestSlowSteadyUnparkedStreamReaderIsNotCut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WriteTimeout = 2 * time.Second })
	d.CreateDatabase(t, "slowown", "type Item { text: String! }")
	first := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/slowown", `{"@type":"Item","@id":"small","text":"s"}`))
	br := openSlowStream(t, d, "/api/subscribe/admin/slowown/Item", "Last-Event-ID: "+first.Position+"\r\n")
	const size = 16 << 20
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/slowown", `{"@type":"Item","@id":"big","text":"`+strings.Repeat("x", size)+`"}`)
	// As above: about 8 s for the event at 2 MB a second, four times
	// write_timeout, each 64 KiB piece well within it. Not smaller: up to
	// 14 MB of a frame written in one piece went out before its deadline
	// cut it.
	if got, took, err := pacedRead(br, 2e6, size); err != nil || got < size {
		t.Fatalf("the unparked stream was cut after %d bytes of its event (%s): %v; want all %d", got, took.Round(time.Millisecond), err, size)
	}
	// Had the stream been parked, a slow reader would have unparked it
	// (a write its socket did not take whole), and the event gone
	// through the other path.
	m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
	if p, u := dt.MetricValue(m, "sluice_streams_parked"), dt.MetricValue(m, "sluice_streams_unparked_total"); p != 0 || u != 0 {
		t.Fatalf("sluice_streams_parked %v, sluice_streams_unparked_total %v: the resumed stream was parked, want it on its own goroutine", p, u)
	}
}

// openSlowStream opens the SSE stream at path as the super user on a
// connection of its own with a small receive buffer, so that the
// client's pace, not the kernel's buffers, decides when the daemon's
// writes finish, and returns it once ready (": connected"). header is
// sent with the request (each line ending in CRLF).
func openSlowStream(t *testing.T, d *dt.Daemon, path, header string) *bufio.Reader {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Basic %s\r\n%s\r\n", path, basic("admin", dt.AdminPassword), header)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the stream connected: %v", err)
		}
		if strings.HasPrefix(line, ": connected") {
			return br
		}
	}
}

// pacedRead reads r at rate bytes a second, paced by what it has read
// since it started rather than by ticks, which a loaded machine skips
// (the pace then fell to a third), until most bytes (-1: the end of r)
// or an error; it returns what it read, how long it took and the error
// (none at the end of r).
func pacedRead(r io.Reader, rate float64, most int) (got int, took time.Duration, err error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 32<<10)
	start := time.Now()
	for most < 0 || got < most {
		allowed := int(rate*time.Since(start).Seconds()) - got
		if allowed <= 0 {
			<-tick.C
			continue
		}
		n, err := r.Read(buf[:min(len(buf), allowed)])
		got += n
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return got, time.Since(start), err
		}
	}
	return got, time.Since(start), nil
}

// TestListingCutShortIsAFailedTransfer: a listing that fails after its
// first documents were sent (here its statement ran past
// statement_timeout while the client did not read) ends as a failed
// transfer, never as a complete-looking answer of fewer documents.
func TestListingCutShortIsAFailedTransfer(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.StatementTimeout, c.WriteTimeout = time.Second, time.Minute })
	d.CreateDatabase(t, "big", "type Item { text: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", itemsNDJSON(20000, 1000), "Content-Type", "application/x-ndjson")
	pg, err := pgx.Connect(context.Background(), d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	req, _ := http.NewRequest("GET", d.URL+"/api/document/admin/big?type=Item", nil)
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// Once its statement was cancelled by statement_timeout, or has run
	// past it (Postgres, blocked sending rows, fails it when the client
	// reads on), the client reads.
	eventually.True(t, dt.StreamWait, "the listing holds a connection", func() bool { return runningListings(t, pg) == 1 })
	eventually.True(t, dt.StreamWait, "the listing's statement ends or runs past statement_timeout", func() bool {
		var running, past int
		err := pg.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE now() - query_start > interval '1500 milliseconds')
			FROM pg_stat_activity WHERE query LIKE '%"Item"%' AND state <> 'idle' AND pid <> pg_backend_pid()`).Scan(&running, &past)
		return err == nil && (running == 0 || past == 1)
	})
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("the listing cut short read as a whole answer of %d documents", strings.Count(string(b), "\n"))
	}
}
