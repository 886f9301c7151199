package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// gqlAny posts a GraphQL request and returns the status and the decoded
// answer, whatever the status, for tests of refused requests.
func gqlAny(t *testing.T, d *daemontest.Daemon, path, query string, vars map[string]any, header ...string) (int, gqlResult) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	r := d.Do(t, daemontest.Admin(), http.MethodPost, path, body, append([]string{"Content-Type", "application/json"}, header...)...)
	var res gqlResult
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatalf("status %d: decode %.300s: %v", r.Status, r.Body, err)
	}
	res.raw = string(r.Body)
	return r.Status, res
}

// refused checks that res is one BAD_USER_INPUT error whose message holds
// every one of want.
func refused(t *testing.T, name string, status int, res gqlResult, want ...string) {
	t.Helper()
	if status >= 500 || len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "BAD_USER_INPUT" {
		t.Fatalf("%s: status %d, got %.500s; want one BAD_USER_INPUT error", name, status, res.raw)
	}
	for _, w := range want {
		if !strings.Contains(res.Errors[0].Message, w) {
			t.Fatalf("%s: message %q does not say %q", name, res.Errors[0].Message, w)
		}
	}
}

// streamRefused opens query as an SSE stream and checks that the stream is
// one next event carrying one BAD_USER_INPUT error whose message holds every
// one of want, then complete.
func streamRefused(t *testing.T, d *daemontest.Daemon, path, name, query string, vars map[string]any, want ...string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	r := d.Do(t, daemontest.Admin(), http.MethodPost, path, body, "Content-Type", "application/json", "Accept", "text/event-stream")
	data, ok := strings.CutPrefix(string(r.Body), "event: next\ndata: ")
	if r.Status != http.StatusOK || !ok || !strings.HasSuffix(data, "\n\nevent: complete\ndata:\n\n") {
		t.Fatalf("%s: status %d, stream %.500q; want one next event then complete", name, r.Status, r.Body)
	}
	var res gqlResult
	if err := json.Unmarshal([]byte(strings.TrimSuffix(data, "\n\nevent: complete\ndata:\n\n")), &res); err != nil {
		t.Fatalf("%s: decode %.300s: %v", name, data, err)
	}
	res.raw = data
	refused(t, name, r.Status, res, want...)
}

// manyTerms returns n copies of term, as a filter list.
func manyTerms(n int, term map[string]any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = term
	}
	return out
}

// TestFilterLimitsApplyAfterVariables sends hostile filters as variables,
// which a limit on the query text does not see, on every path that parses
// a filter: queries, _ChangeSet queries, subscriptions and _ChangeSet
// subscriptions. Each is refused with BAD_USER_INPUT naming the limit and
// where in the filter it was crossed, before any SQL runs.
func TestFilterLimitsApplyAfterVariables(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	insertDocs(t, d, "people", `[{"@type":"Person","@id":"alice","name":"Alice","age":31}]`)
	path := "/api/graphql/admin/people"

	or30k := map[string]any{"_or": manyTerms(30000, map[string]any{"name": map[string]any{"eq": "x"}})}
	and100k := map[string]any{"_and": manyTerms(100000, map[string]any{"age": map[string]any{"eq": 1}})}
	manyIDs := make([]any, 1001)
	for i := range manyIDs {
		manyIDs[i] = fmt.Sprintf("Person/%d", i)
	}
	deep := map[string]any{"name": map[string]any{"eq": "x"}}
	for range 40 {
		deep = map[string]any{"_not": deep}
	}
	longRegex := map[string]any{"name": map[string]any{"regex": strings.Repeat("a", 1001)}}
	or334 := map[string]any{"_or": manyTerms(334, map[string]any{"name": map[string]any{"eq": "x"}})}
	// The paths a filter reaches the parser by. The huge filters, slow to
	// send and for gqlgen to validate, take the two the tester used; small
	// ones over each limit take all four.
	const (
		query = 1 << iota
		changeSetQuery
		subscription
		changeSetSubscription
		all = query | changeSetQuery | subscription | changeSetSubscription
	)
	// 100,000 terms of three values each are refused before they are
	// decoded, by the limit on a request's values (TestParamsValueLimit).
	if status, res := gqlAny(t, d, path, `query($f: Person_Filter) { Person(filter: $f) { _id } }`, map[string]any{"f": and100k}); status != 400 || !strings.Contains(fmt.Sprint(res), "it holds more than 100000 JSON values") {
		t.Errorf("100k _and: %d %v, want 400 naming the limit on values", status, res)
	}
	for _, c := range []struct {
		name   string
		filter map[string]any
		paths  int
		want   []string
	}{
		{"30k _or", or30k, query, []string{"filter._or[333]", "more than 1000 terms"}},
		{"1003 terms", or334, all, []string{"filter._or[333]", "more than 1000 terms"}},
		{"1001 ids", map[string]any{"_ids": manyIDs}, all, []string{"filter._ids", "more than 1000 ids"}},
		{"40 levels", deep, all, []string{"filter._not._not.", "more than 32 levels"}},
		{"long regex", longRegex, all, []string{"filter.name.regex", "longer than 1000 bytes"}},
	} {
		vars := map[string]any{"f": c.filter}
		if c.paths&query != 0 {
			status, res := gqlAny(t, d, path, `query($f: Person_Filter) { Person(filter: $f) { _id } }`, vars)
			refused(t, c.name+": query", status, res, c.want...)
		}
		if c.paths&changeSetQuery != 0 {
			status, res := gqlAny(t, d, path, `query($f: Person_Filter) { _ChangeSet { Person_added(filter: $f) { _id } } }`, vars)
			refused(t, c.name+": _ChangeSet query", status, res, c.want...)
		}
		if c.paths&subscription != 0 {
			streamRefused(t, d, path, c.name+": subscription", `subscription($f: Person_Filter) { Person_added(filter: $f) { _id } }`, vars, c.want...)
		}
		if c.paths&changeSetSubscription != 0 {
			streamRefused(t, d, path, c.name+": _ChangeSet subscription", `subscription($f: Person_Filter) { _ChangeSet { Person_updated(filter: $f) { _id } } }`, vars, c.want...)
		}
	}

	// Over a subscription, 30,000 terms (600 KB of variables) are refused
	// first as more variables than a stream keeps
	// (TestStreamVariablesAreBounded), before they are parsed.
	body, _ := json.Marshal(map[string]any{"query": `subscription($f: Person_Filter) { Person_added(filter: $f) { _id } }`, "variables": map[string]any{"f": or30k}})
	if r := d.Do(t, daemontest.Admin(), http.MethodPost, path, body, "Content-Type", "application/json", "Accept", "text/event-stream"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "the limit of a subscription or live query") {
		t.Errorf("30k _or: subscription: %d %.300s, want 400 naming the bound of a stream's variables", r.Status, r.Body)
	}

	// Just under the limits still works.
	or300 := map[string]any{"_or": manyTerms(300, map[string]any{"name": map[string]any{"eq": "Alice"}})}
	res := gql(t, d, path, `query($f: Person_Filter) { Person(filter: $f) { _id } }`, map[string]any{"f": or300}).mustOK(t)
	if got, want := string(res.Data), `{"Person":[{"_id":"Person/alice"}]}`; got != want {
		t.Fatalf("300 _or terms: got %s, want %s", got, want)
	}
}

// TestRegexMeansTheSameInQueriesAndSubscriptions checks that a regex filter
// selects the same documents in a query (run by Postgres) and in a
// subscription (run in Go), or is refused by both.
func TestRegexMeansTheSameInQueriesAndSubscriptions(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	path := "/api/graphql/admin/people"

	// \b is a word boundary in Go and a backspace in Postgres: refused.
	for _, re := range []string{`\bAl`, `Al\B`, `\pL`, `(?m)^Al`} {
		vars := map[string]any{"re": re}
		status, res := gqlAny(t, d, path, `query($re: String) { Person(filter: {name: {regex: $re}}) { _id } }`, vars)
		refused(t, re+": query", status, res, "filter.name.regex")
		streamRefused(t, d, path, re+": subscription", `subscription($re: String) { Person_added(filter: {name: {regex: $re}}) { name } }`, vars, "filter.name.regex")
	}

	// . matches a newline in both.
	s := d.MustOpenStream(t, daemontest.Admin(), daemontest.StreamRequest{
		Method: http.MethodPost, Path: path, Header: []string{"Accept", "text/event-stream"},
		Body: `{"query":"subscription { Person_added(filter: {name: {regex: \"^a.b$\"}}) { name } }"}`,
	})
	if f := s.Next(); f.String() != ": connected" {
		t.Fatalf("first frame %q", f)
	}
	insertDocs(t, d, "people", `[{"@type":"Person","@id":"nl","name":"a\nb"},{"@type":"Person","@id":"no","name":"ab"},{"@type":"Person","@id":"dash","name":"a-b"}]`)
	var got []string
	for range 2 {
		got = append(got, s.Event().Field("data"))
	}
	want := []string{`{"data":{"Person_added":{"name":"a\nb"}}}`, `{"data":{"Person_added":{"name":"a-b"}}}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("subscription: got %q, want %q", got, want)
	}
	res := gql(t, d, path, `{ Person(filter: {name: {regex: "^a.b$"}}) { name } }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"Person":[{"name":"a-b"},{"name":"a\nb"}]}`; got != want {
		t.Fatalf("query: got %s, want %s", got, want)
	}
}
