package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// sameAnswer checks that retry answers exactly what first did, and says
// it was replayed.
func sameAnswer(t *testing.T, first, retry dt.Response) {
	t.Helper()
	if retry.Status != first.Status || !bytes.Equal(retry.Body, first.Body) {
		t.Fatalf("the retry answered %d %s, the first %d %s", retry.Status, retry.Body, first.Status, first.Body)
	}
	for _, h := range []string{"Sluice-Position", "ETag"} {
		if retry.Header.Get(h) != first.Header.Get(h) {
			t.Fatalf("the retry's %s %q, the first's %q", h, retry.Header.Get(h), first.Header.Get(h))
		}
	}
	if first.Header.Get("Idempotent-Replayed") != "" || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("Idempotent-Replayed: first %q, retry %q", first.Header.Get("Idempotent-Replayed"), retry.Header.Get("Idempotent-Replayed"))
	}
}

// TestIdempotentWrites: a write with an Idempotency-Key, retried on
// another replica, answers the first answer again (an insert without ids
// too, with the ids made the first time) and makes no second commit; the
// same key with another request is a 422; another user's key of the same
// name is their own; a GraphQL mutation too.
func TestIdempotentWrites(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "idem", versionsSDL)
	body := `[{"@type":"Person","name":"Ann"},{"@type":"Person","name":"Bob"}]`
	first := a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/idem", body, "Idempotency-Key", "k1")
	retry := b.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/idem", body, "Idempotency-Key", `"k1"`) // the draft's quoted form
	sameAnswer(t, first, retry)
	if n := logLength(t, a, "idem"); n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
	if list := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/idem?type=Person", nil); strings.Count(string(list.Body), "\n") != 2 {
		t.Fatalf("documents after the retry: %s", list.Body)
	}

	// The same key with another request: 422, on any replica, for
	// another body, method, query, media type or precondition; the
	// answer names each (a review found the media type left out).
	for _, r := range []dt.Response{
		b.Do(t, dt.Admin(), "POST", "/api/document/admin/idem", `[{"@type":"Person","name":"Cid"}]`, "Idempotency-Key", "k1"),
		a.Do(t, dt.Admin(), "POST", "/api/document/admin/idem?author=x", body, "Idempotency-Key", "k1"),
		a.Do(t, dt.Admin(), "PUT", "/api/document/admin/idem?create=true", body, "Idempotency-Key", "k1"),
		a.Do(t, dt.Admin(), "POST", "/api/document/admin/idem", body, "Idempotency-Key", "k1", "Content-Type", "application/x-ndjson"),
	} {
		if typ, msg := errBody(t, r); r.Status != 422 || typ != "api:Unprocessable" || !strings.Contains(msg, "another request") || !strings.Contains(msg, "media type (Content-Type)") {
			t.Fatalf("key reused for another request: %d %s %s", r.Status, typ, msg)
		}
	}

	// A replace, a patch and a delete retried answer as they first did
	// (the delete is not a 404 the second time).
	ann := answerOf(t, first).IDs[0]
	for _, w := range []struct{ method, path, body, key string }{
		{"PUT", "/api/document/admin/idem", `{"@type":"Person","@id":"` + ann + `","name":"Ann II"}`, "k2"},
		{"PATCH", "/api/document/admin/idem?id=" + ann, `{"age":7}`, "k3"},
		{"DELETE", "/api/document/admin/idem?id=" + ann, "", "k4"},
	} {
		one := a.MustDo(t, 200, dt.Admin(), w.method, w.path, w.body, "Idempotency-Key", w.key, "Content-Type", "application/merge-patch+json")
		two := b.MustDo(t, 200, dt.Admin(), w.method, w.path, w.body, "Idempotency-Key", w.key, "Content-Type", "application/merge-patch+json")
		sameAnswer(t, one, two)
	}
	if n := logLength(t, a, "idem"); n != 4 {
		t.Fatalf("%d commits, want 4", n)
	}

	// Keys are per user: another user's k1 is a key of their own.
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"writer","organization":"admin","password":"writer-password"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/idem", `{"user":"writer","role":"write"}`)
	writer := dt.Basic("writer", "writer-password")
	other := a.MustDo(t, 200, writer, "POST", "/api/document/admin/idem", `[{"@type":"Person","name":"Cid"}]`, "Idempotency-Key", "k1")
	if bytes.Equal(other.Body, first.Body) || other.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another user's key answered the admin's answer: %s", other.Body)
	}

	// A GraphQL mutation.
	gql := `{"query":"mutation($n: String!) { Person_insert(documents: [{name: $n}]) }","variables":{"n":"Dee"}}`
	g1 := a.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/idem", gql, "Content-Type", "application/json", "Idempotency-Key", "g1")
	g2 := b.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/idem", gql, "Content-Type", "application/json", "Idempotency-Key", "g1")
	if !bytes.Equal(g1.Body, g2.Body) || !strings.Contains(string(g1.Body), `"extensions":{"position":"`) {
		t.Fatalf("GraphQL retry answered %s, the first %s", g2.Body, g1.Body)
	}
	g3 := b.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/idem", strings.Replace(gql, "Dee", "Eve", 1), "Content-Type", "application/json", "Idempotency-Key", "g1")
	if !strings.Contains(string(g3.Body), `"code":"UNPROCESSABLE"`) {
		t.Fatalf("GraphQL key reused with other variables: %s", g3.Body)
	}
	if n := logLength(t, a, "idem"); n != 6 {
		t.Fatalf("%d commits, want 6", n)
	}

	// A write that cannot honour a key refuses it, rather than ignore it.
	if r := a.Do(t, dt.Admin(), "POST", "/api/tokens", `{"name":"t"}`, "Idempotency-Key", "t1"); r.Status != 400 || !strings.Contains(string(r.Body), "Idempotency-Key is honoured by document writes") {
		t.Fatalf("a token with a key: %d %s", r.Status, r.Body)
	}

	// A malformed key is refused.
	for _, key := range []string{strings.Repeat("k", 256), "clé", `""`} {
		if r := a.Do(t, dt.Admin(), "POST", "/api/document/admin/idem", body, "Idempotency-Key", key); r.Status != 400 {
			t.Fatalf("key %q: %d %s", key, r.Status, r.Body)
		}
	}
}

// TestIdempotencyKeyInFlight: while the first request with a key runs (a
// long NDJSON upload, its transaction open), a retry with the key is a 409
// on another replica; once the first has answered, the retry answers the
// same. (Replica a reads bodies as they arrive, as it does past
// write_spool_bytes, so that the upload's transaction is open while the
// test holds its body back.)
func TestIdempotencyKeyInFlight(t *testing.T) {
	t.Parallel()
	a := dt.Start(t, func(c *config.Config) { c.WriteSpoolBytes = 0 })
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "flight", versionsSDL)
	var lines []string
	for i := range 150 {
		lines = append(lines, fmt.Sprintf(`{"@type":"Person","@id":"p%03d","name":"P%d"}`, i, i))
	}
	head, tail := strings.Join(lines[:120], "\n")+"\n", strings.Join(lines[120:], "\n")+"\n"

	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", a.URL+"/api/document/admin/flight", pr)
	if err != nil {
		t.Fatal(err)
	}
	dt.Admin()(req)
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Idempotency-Key", "upload-1")
	answered := make(chan dt.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			answered <- dt.Response{}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- dt.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
	}()
	if _, err := io.WriteString(pw, head); err != nil {
		t.Fatal(err)
	}
	// The first request holds its key's lock once its transaction began.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	eventually.True(t, 30*time.Second, "the first request holds its key", func() bool {
		// A claim row's xmax is set by the lock of the first request
		// (the row is new), and read here without taking it.
		var locked bool
		err := conn.QueryRow(ctx, "SELECT xmax <> '0' FROM sluice.idempotency_claims WHERE key = 'upload-1'").Scan(&locked)
		return err == nil && locked
	})
	whole := head + tail
	r := b.Do(t, dt.Admin(), "POST", "/api/document/admin/flight", whole, "Content-Type", "application/x-ndjson", "Idempotency-Key", "upload-1")
	if typ, msg := errBody(t, r); r.Status != 409 || typ != "api:Conflict" || !strings.Contains(msg, "still running") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("retry while the first runs: %d %s %s", r.Status, typ, msg)
	}
	if _, err := io.WriteString(pw, tail); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	first := <-answered
	if first.Status != 200 {
		t.Fatalf("the first request: %d %s", first.Status, first.Body)
	}
	sameAnswer(t, first, b.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/flight", whole, "Content-Type", "application/x-ndjson", "Idempotency-Key", "upload-1"))
	if n := logLength(t, a, "flight"); n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
}

// TestIdempotencyKeyRacesItself: the same keyed write sent eight times at
// once, to two replicas (several land in one group-commit batch): one
// commit, and every answer is that commit's (200, the same body) or says
// the first is still running (409).
func TestIdempotencyKeyRacesItself(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "race8", versionsSDL)
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		answers := make(chan dt.Response, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 8 {
			d := []*dt.Daemon{a, b}[i%2]
			wg.Go(func() {
				<-start
				answers <- d.Do(t, dt.Admin(), "POST", "/api/document/admin/race8", `{"@type":"Person","name":"Racer"}`, "Idempotency-Key", key)
			})
		}
		close(start)
		wg.Wait()
		close(answers)
		var body []byte
		for r := range answers {
			switch r.Status {
			case 200:
				if body != nil && !bytes.Equal(body, r.Body) {
					t.Fatalf("round %d: two answers %s and %s", round, body, r.Body)
				}
				body = r.Body
			case 409:
			default:
				t.Fatalf("round %d: %d %s", round, r.Status, r.Body)
			}
		}
		if body == nil {
			t.Fatalf("round %d: no write answered 200", round)
		}
		if n := logLength(t, a, "race8"); n != round+1 {
			t.Fatalf("round %d: %d commits, want %d", round, n, round+1)
		}
	}
}

// TestIdempotencyKeysBoundedPerUser: past idempotency_max_keys kept keys,
// a write with a new key is a 429; one with a kept key still answers, and
// one without a key is written.
func TestIdempotencyKeysBoundedPerUser(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.IdempotencyMaxKeys = 2 })
	d.CreateDatabase(t, "bound", versionsSDL)
	post := func(key, name string) dt.Response {
		return d.Do(t, dt.Admin(), "POST", "/api/document/admin/bound", `{"@type":"Person","name":"`+name+`"}`, "Idempotency-Key", key)
	}
	first := post("a", "A")
	post("b", "B")
	if r := post("c", "C"); r.Status != 429 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "idempotency_max_keys") {
		t.Fatalf("a third key: %d %s", r.Status, r.Body)
	}
	sameAnswer(t, first, post("a", "A"))
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bound", `{"@type":"Person","name":"C"}`)
}

// TestVersionsInGraphQL: _version is the version REST reads answer, in
// queries, subscription events, _ChangeSet and live queries, where it is
// the version the change made; <Class>_update patches documents (null
// removes a field); a _version given for a document an earlier field of
// the request writes is refused (_update, _deleteDocuments); a stale
// _version in _replace, _update or the generic _replaceDocuments fails the request, naming every stale document with
// its current version in extensions.documents, and writes nothing.
func TestVersionsInGraphQL(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "gv", versionsSDL)
	gql := func(query string, vars any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		var out map[string]any
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/gv", body, "Content-Type", "application/json").Body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	ins := gql(`mutation { Person_insert(documents: [{_id: "ann", name: "Ann", age: 30, nick: "A", home: {street: "Main", city: "Oslo"}}, {_id: "bob", name: "Bob"}]) }`, nil)
	v0, _ := ins["extensions"].(map[string]any)["version"].(string)
	_, tag := docOf(t, d, "gv", "Person/ann")
	if v0 == "" || tag != `"`+v0+`"` {
		t.Fatalf("the insert's version %q, the document's %s: %v", v0, tag, ins)
	}
	version := func(id string) string {
		_, tag := docOf(t, d, "gv", id)
		return strings.Trim(tag, `"`)
	}
	q := gql(`{ Person(id: "Person/ann") { _version } }`, nil)
	if got := fmt.Sprint(q["data"]); got != "map[Person:[map[_version:"+v0+"]]]" {
		t.Fatalf("query: %v", q)
	}
	// A version expected by a later field of a document an earlier field
	// writes is refused on that field, before anything is written.
	twice := gql(`mutation { first: Person_update(documents: [{_id: "bob", name: "B1"}]) second: Person_update(documents: [{_id: "bob", _version: "`+v0+`", name: "B2"}]) }`, nil)
	if errs, _ := twice["errors"].([]any); len(errs) != 1 || fmt.Sprint(errs[0].(map[string]any)["path"]) != "[second]" ||
		!strings.Contains(fmt.Sprint(errs[0]), "an earlier write of this request writes it") || version("Person/bob") != v0 {
		t.Fatalf("a version expected after an earlier write: %v (bob at %s)", twice, version("Person/bob"))
	}
	// So is the _version of a conditional _deleteDocuments(documents:)
	// (found by review: it was not checked there, and the delete failed
	// as PRECONDITION_FAILED on the first field, naming the version the
	// rolled-back update made, however often the client read and
	// retried).
	del := gql(`mutation { Person_update(documents: [{_id: "bob", name: "B1"}]) _deleteDocuments(documents: [{_id: "Person/bob", _version: "`+v0+`"}]) }`, nil)
	if errs, _ := del["errors"].([]any); len(errs) != 1 || fmt.Sprint(errs[0].(map[string]any)["path"]) != "[_deleteDocuments]" ||
		!strings.Contains(fmt.Sprint(errs[0]), "BAD_USER_INPUT") || !strings.Contains(fmt.Sprint(errs[0]), "an earlier write of this request writes it") || version("Person/bob") != v0 {
		t.Fatalf("a delete's version expected after an earlier write: %v (bob at %s)", del, version("Person/bob"))
	}
	// A stale document is shown on the field that expected its version.
	stale := gql(`mutation { first: Person_update(documents: [{_id: "ann", nick: "A"}]) second: Person_update(documents: [{_id: "bob", _version: "x", name: "B2"}]) }`, nil)
	if errs, _ := stale["errors"].([]any); len(errs) != 1 || fmt.Sprint(errs[0].(map[string]any)["path"]) != "[second]" ||
		!strings.Contains(fmt.Sprint(errs[0]), "PRECONDITION_FAILED") {
		t.Fatalf("a stale document of the second field: %v", stale)
	}

	sub := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/gv", Header: []string{"Accept", "text/event-stream"},
		Body: `{"query":"subscription { Person_updated { _id _version name nick home { city street } } }"}`})
	set := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/gv", Header: []string{"Accept", "text/event-stream"},
		Body: `{"query":"subscription { _ChangeSet { Person_updated { _id _version } } }"}`})
	live := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/gv", Header: []string{"Accept", "text/event-stream"},
		Body: `{"query":"query @live { Person(id: \"Person/ann\") { _version } }"}`})
	for _, st := range []*dt.Stream{sub, set, live} {
		st.Next() // : connected
	}
	if f := live.Event(); !strings.Contains(f.Field("data"), `"_version":"`+v0+`"`) {
		t.Fatalf("live query's first result: %s", f)
	}

	// A partial write: age kept, nick removed, the city merged in.
	up := gql(`mutation($v: String) { Person_update(documents: [{_id: "ann", _version: $v, nick: null, name: "Ann II", home: {city: "Bergen"}}]) }`, map[string]any{"v": v0})
	v1, _ := up["extensions"].(map[string]any)["version"].(string)
	if fmt.Sprint(up["data"]) != "map[Person_update:[Person/ann]]" || v1 == "" || v1 == v0 || version("Person/ann") != v1 {
		t.Fatalf("update: %v", up)
	}
	doc, _ := docOf(t, d, "gv", "Person/ann")
	if doc["name"] != "Ann II" || doc["age"] != 30.0 || doc["nick"] != nil || fmt.Sprint(doc["home"]) != "map[@type:Address city:Bergen street:Main]" {
		t.Fatalf("after the update: %v", doc)
	}
	want := `{"data":{"Person_updated":{"_id":"Person/ann","_version":"` + v1 + `","name":"Ann II","nick":null,"home":{"city":"Bergen","street":"Main"}}}}`
	if f := sub.Event(); f.Field("data") != want {
		t.Fatalf("subscription event %s, want %s", f.Field("data"), want)
	}
	if f := set.Event(); f.Field("data") != `{"data":{"_ChangeSet":{"Person_updated":[{"_id":"Person/ann","_version":"`+v1+`"}]}}}` {
		t.Fatalf("change set event %s", f)
	}
	if f := live.Event(); !strings.Contains(f.Field("data"), `"_version":"`+v1+`"`) {
		t.Fatalf("live query's result after the update: %s", f)
	}
	// Read as of the insert: Bob, unchanged since, has his version; Ann's
	// version then is not in the log (Sluice's images do not record it),
	// and a REST read of the past carries none, so that written back it
	// overwrites.
	insertPos, _ := ins["extensions"].(map[string]any)["position"].(string)
	past := gql(`query($p: String) { Person(asOf: $p) { _id _version } }`, map[string]any{"p": insertPos})
	if got := fmt.Sprint(past["data"]); got != "map[Person:[map[_id:Person/ann _version:] map[_id:Person/bob _version:"+version("Person/bob")+"]]]" {
		t.Fatalf("versions as of the insert: %v", past)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/gv?id=Person/bob&as_of="+insertPos, nil); strings.Contains(string(r.Body), "@version") || r.Header.Get("ETag") != "" {
		t.Fatalf("a REST read of the past: ETag %q, %s", r.Header.Get("ETag"), r.Body)
	}
	cs := gql(`{ _ChangeSet { Person_updated { _version } } }`, nil)
	if fmt.Sprint(cs["data"]) != "map[_ChangeSet:map[Person_updated:[map[_version:"+v1+"]]]]" {
		t.Fatalf("_ChangeSet query: %v", cs)
	}

	// Stale versions: every stale document named, nothing written.
	bob := version("Person/bob")
	commits := logLength(t, d, "gv")
	for _, m := range []struct {
		query string
		vars  any
		stale map[string]string
	}{
		{`mutation { Person_update(documents: [{_id: "ann", _version: "` + v0 + `", age: 1}, {_id: "bob", _version: "` + bob + `", age: 2}]) }`, nil, map[string]string{"Person/ann": v1}},
		{`mutation { Person_replace(documents: [{_id: "ann", _version: "` + v0 + `", name: "X"}], create: true) a: Person_update(documents: [{_id: "bob", _version: "zz", age: 2}]) }`, nil, map[string]string{"Person/ann": v1, "Person/bob": bob}},
		{`mutation($j: JSON!) { _replaceDocuments(json: $j, create: true) }`, map[string]any{"j": []any{map[string]any{"@type": "Person", "@id": "Person/cid", "@version": "zz", "name": "Cid"}}}, map[string]string{"Person/cid": ""}},
		// "*" is a version string no document has, not a wildcard.
		{`mutation { Person_update(documents: [{_id: "bob", _version: "*", age: 2}]) }`, nil, map[string]string{"Person/bob": bob}},
		{`mutation { Person_replace(documents: [{_id: "bob", _version: "*", name: "X"}]) }`, nil, map[string]string{"Person/bob": bob}},
		{`mutation($j: JSON!) { _replaceDocuments(json: $j) }`, map[string]any{"j": map[string]any{"@type": "Person", "@id": "Person/bob", "@version": "*", "name": "X"}}, map[string]string{"Person/bob": bob}},
	} {
		res := gql(m.query, m.vars)
		errs, _ := res["errors"].([]any)
		if res["data"] != nil || len(errs) != 1 {
			t.Fatalf("%s: %v", m.query, res)
		}
		e := errs[0].(map[string]any)
		ext := e["extensions"].(map[string]any)
		docs, _ := ext["documents"].([]any)
		if ext["code"] != "PRECONDITION_FAILED" || len(docs) != len(m.stale) {
			t.Fatalf("%s: error %v", m.query, e)
		}
		for _, x := range docs {
			doc := x.(map[string]any)
			id, _ := doc["_id"].(string)
			v, _ := doc["_version"].(string)
			if want, ok := m.stale[id]; !ok || v != want || !strings.Contains(e["message"].(string), id) {
				t.Fatalf("%s: error names %v, want %v: %v", m.query, doc, m.stale, e)
			}
		}
	}
	if n := logLength(t, d, "gv"); n != commits || version("Person/bob") != bob {
		t.Fatalf("stale mutations wrote: %d commits (was %d)", n, commits)
	}
	for _, m := range []struct{ query, want string }{
		{`mutation { Person_insert(documents: [{_id: "dan", _version: "1", name: "Dan"}]) }`, "an insert takes no precondition"},
		// Said in GraphQL's words: it named REST's If-Match and PUT.
		{`mutation { _insertDocuments(json: "{\"@type\":\"Person\",\"@id\":\"dan\",\"@version\":\"1\",\"name\":\"Dan\"}") }`,
			`document 0 (dan): an insert takes no precondition ("@version"): it fails anyway when the document exists; to write only a document's given version, replace it (_replaceDocuments)`},
		{`mutation { Person_update(documents: [{_id: "ann", name: null}]) }`, `field "name": required field is missing`},
		{`mutation { Person_update(documents: [{_id: "nobody", age: 1}]) }`, "document Person/nobody does not exist"},
		{`mutation { Person_update(documents: [{_id: "Dog/rex", age: 1}]) }`, "Person_update patches Person documents, not Dog/rex"},
	} {
		res := gql(m.query, nil)
		if errs, _ := res["errors"].([]any); len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), m.want) {
			t.Fatalf("%s: %v, want an error saying %q", m.query, res, m.want)
		}
	}
}

// TestVersionsOfSQLWrites: a write made in SQL by another role gives the
// document a new version too, which its event carries; a conditional
// write of the version read before the SQL write is refused.
func TestVersionsOfSQLWrites(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "sqlv", "type Note { text: String n: Int }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/sqlv", `{"@type":"Note","@id":"a","text":"x","n":1}`)
	_, before := docOf(t, d, "sqlv", "Note/a")
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/sqlv/Note"})
	st.Next() // : connected
	w := newSQLWriter(t, d, "sqlv")
	sqlExec(t, w.url, "UPDATE "+w.table("Note")+" SET n = n + 1 WHERE _id = 'Note/a'")
	e := nextEvent(t, st)
	doc, after := docOf(t, d, "sqlv", "Note/a")
	if after == before || doc["n"] != 2.0 {
		t.Fatalf("after the SQL update: version %s (was %s), %v", after, before, doc)
	}
	if `"`+e.Version+`"` != after {
		t.Fatalf("the SQL write's event carries version %q, the document has %s", e.Version, after)
	}
	staleAnswer(t, d.Do(t, dt.Admin(), "PUT", "/api/document/admin/sqlv", `{"@type":"Note","@id":"a","text":"lost update"}`, "If-Match", before),
		map[string]string{"Note/a": strings.Trim(after, `"`)})
	sqlExec(t, w.url, "INSERT INTO "+w.table("Note")+" (_id, text) VALUES ('Note/b', 'new')")
	nextEvent(t, st)
	if _, v := docOf(t, d, "sqlv", "Note/b"); v == after || v == before {
		t.Fatalf("a document inserted in SQL has version %s", v)
	}
}

// TestWritePositionsResume: a write answers the position a read right
// after it answers; a stream resumed from it receives exactly the later
// commits, REST and GraphQL, from a REST write or a GraphQL mutation.
func TestWritePositionsResume(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wpos", "type Note { text: String }")
	first := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/wpos", `{"@type":"Note","@id":"a","text":"1"}`))
	// The write's position carries its commit's tag, as a read's does.
	if read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/wpos?type=Note", nil); dt.Untag(first.Position) == first.Position || read.Header.Get("Sluice-Position") != first.Position {
		t.Fatalf("the write's position %s, a read's right after %s", first.Position, read.Header.Get("Sluice-Position"))
	}
	var mut struct {
		Extensions struct {
			Position string `json:"position"`
		} `json:"extensions"`
	}
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/wpos", `{"query":"mutation { Note_insert(documents: [{_id: \"b\", text: \"2\"}]) }"}`, "Content-Type", "application/json")
	if err := json.Unmarshal(r.Body, &mut); err != nil || mut.Extensions.Position == "" {
		t.Fatalf("mutation: %s", r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/wpos", `{"@type":"Note","@id":"c","text":"3"}`)

	rest := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/wpos/Note", Header: []string{"Last-Event-ID", first.Position}})
	rest.Next() // : connected
	for _, id := range []string{"Note/b", "Note/c"} {
		if e := nextEvent(t, rest); e.Subject != id {
			t.Fatalf("resumed from the first write's position: %s, want %s", e.Subject, id)
		}
	}
	gsub := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/wpos",
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", mut.Extensions.Position},
		Body:   `{"query":"subscription { Note_added { _id } }"}`})
	gsub.Next() // : connected
	if f := gsub.Event(); f.Field("data") != `{"data":{"Note_added":{"_id":"Note/c"}}}` {
		t.Fatalf("resumed from the mutation's position: %s", f)
	}
}

// TestDeletingAUserDoesNotWaitForItsKeyedWrite: a user's keyed upload
// whose transaction is open (its body read as it arrives, as past
// write_spool_bytes) does not hold the user's deletion, which answers at
// once; the upload then commits, as a write without a key would.
func TestDeletingAUserDoesNotWaitForItsKeyedWrite(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WriteSpoolBytes = 0 })
	d.CreateDatabase(t, "ks", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"mallory","organization":"admin","password":"mallory-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/ks", `{"user":"mallory","role":"write"}`)
	var head strings.Builder
	for i := range 150 {
		fmt.Fprintf(&head, `{"@type":"Note","@id":"n%d","text":"x"}`+"\n", i)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", d.URL+"/api/document/admin/ks", pr)
	dt.Basic("mallory", "mallory-password")(req)
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Idempotency-Key", "k1")
	answered := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	go func() { _, _ = io.WriteString(pw, head.String()) }()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	eventually.True(t, 30*time.Second, "the upload holds its key", func() bool {
		var locked bool
		err := conn.QueryRow(ctx, "SELECT xmax <> '0' FROM sluice.idempotency_claims WHERE key = 'k1'").Scan(&locked)
		return err == nil && locked
	})
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dreq, _ := http.NewRequestWithContext(dctx, "DELETE", d.URL+"/api/users/mallory", nil)
	dt.Admin()(dreq)
	resp, err := http.DefaultClient.Do(dreq)
	if err != nil {
		t.Fatalf("deleting the user while its keyed upload runs: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("deleting the user while its keyed upload runs: %d", resp.StatusCode)
	}
	pw.Close()
	if status := <-answered; status != 200 {
		t.Fatalf("the upload: %d", status)
	}
	if n := countNotes(t, d, "ks"); n != 150 {
		t.Fatalf("%d notes, want 150", n)
	}
}

// TestReplayNeedsTheWriteRole: a retry with a recorded Idempotency-Key of
// a user who lost the write role since is refused, over REST (403) and
// GraphQL (FORBIDDEN, the mutation run as any of theirs, not replayed),
// and nothing is written; with the role back, the same retries answer
// their first answers.
func TestReplayNeedsTheWriteRole(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "demoted", versionsSDL)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wes","organization":"admin","password":"wes-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/demoted", `{"user":"wes","role":"write"}`)
	wes := dt.Basic("wes", "wes-password")
	body := `{"@type":"Person","name":"Ann"}`
	gql := `{"query":"mutation { Person_insert(documents: [{name: \"Bob\"}]) }"}`
	rest := func(status int) dt.Response {
		return d.MustDo(t, status, wes, "POST", "/api/document/admin/demoted", body, "Idempotency-Key", "r1")
	}
	graph := func() dt.Response {
		return d.MustDo(t, 200, wes, "POST", "/api/graphql/admin/demoted", gql, "Content-Type", "application/json", "Idempotency-Key", "g1")
	}
	firstREST, firstGQL := rest(200), graph()
	commits := logLength(t, d, "demoted")

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/demoted", `{"user":"wes","role":"read"}`)
	if typ, msg := errBody(t, rest(403)); typ != "api:Forbidden" || !strings.Contains(msg, "needs the write role") {
		t.Fatalf("a REST retry of a reader: %s %s", typ, msg)
	}
	g := graph()
	var answer struct {
		Data   json.RawMessage
		Errors []struct{ Extensions struct{ Code string } }
	}
	if err := json.Unmarshal(g.Body, &answer); err != nil || g.Header.Get("Idempotent-Replayed") != "" ||
		len(answer.Errors) != 1 || answer.Errors[0].Extensions.Code != "FORBIDDEN" {
		t.Fatalf("a GraphQL retry of a reader: replayed %q, %s", g.Header.Get("Idempotent-Replayed"), g.Body)
	}
	if n := logLength(t, d, "demoted"); n != commits {
		t.Fatalf("%d commits, want %d", n, commits)
	}

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/demoted", `{"user":"wes","role":"write"}`)
	sameAnswer(t, firstREST, rest(200))
	if g := graph(); !bytes.Equal(g.Body, firstGQL.Body) || g.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the GraphQL retry with the role back: replayed %q, %s, the first %s", g.Header.Get("Idempotent-Replayed"), g.Body, firstGQL.Body)
	}
}

// TestIdempotencyKeyAcrossGraphQLTransports: a mutation retried with its
// key over another HTTP transport (plain JSON, SSE, NDJSON) is the same
// request, answered with the first answer and no second commit. The
// streams hashed the operation as parsed (its variables' defaults added,
// none as {} rather than null), so the retry was refused as another
// request's (UNPROCESSABLE). A key on a graphql-ws upgrade, whose
// operations could not honour it, is refused.
func TestIdempotencyKeyAcrossGraphQLTransports(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "across", versionsSDL)
	const path = "/api/graphql/admin/across"
	plain := []string{"Content-Type", "application/json"}
	sse := []string{"Content-Type", "application/json", "Accept", "text/event-stream"}
	ndjson := []string{"Content-Type", "application/json", "Accept", "application/x-ndjson"}
	with := func(h []string, key string) []string { return append(slices.Clone(h), "Idempotency-Key", key) }
	for i, c := range []struct {
		name          string
		first, second []string
		query         string
	}{
		{"plain then SSE, no variables", plain, sse, `{"query":"mutation { Person_insert(documents: [{name: \"Fay\"}]) }"}`},
		{"SSE then plain, a default", sse, plain, `{"query":"mutation($n: String = \"Gus\") { Person_insert(documents: [{name: $n}]) }"}`},
		{"NDJSON then SSE, a variable", ndjson, sse, `{"query":"mutation($n: String!) { Person_insert(documents: [{name: $n}]) }","variables":{"n":"Hal"}}`},
	} {
		key := fmt.Sprintf("across-%d", i)
		before := logLength(t, d, "across")
		one := d.MustDo(t, 200, dt.Admin(), "POST", path, c.query, with(c.first, key)...)
		two := d.MustDo(t, 200, dt.Admin(), "POST", path, c.query, with(c.second, key)...)
		id := regexp.MustCompile(`Person/[^"]+`).Find(one.Body)
		if id == nil || !bytes.Contains(two.Body, id) || bytes.Contains(two.Body, []byte("errors")) {
			t.Errorf("%s: the retry answered %s, the first %s", c.name, two.Body, one.Body)
		}
		if n := logLength(t, d, "across"); n != before+1 {
			t.Errorf("%s: %d commits, want 1", c.name, n-before)
		}
	}
	up := d.Do(t, dt.Admin(), "GET", path, nil, "Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
		"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-transport-ws", "Idempotency-Key", "ws-1")
	// In GraphQL's shape, as every refusal of a GraphQL URL's upgrade.
	if code, msg := gqlRefusal(t, up, "application/json"); up.Status != 400 || code != "BAD_REQUEST" || !strings.Contains(msg, "a graphql-ws socket carries many operations") {
		t.Errorf("a graphql-ws upgrade with a key: %d %s", up.Status, up.Body)
	}
}

// TestStreamRetryAnswersAfterASchemaChange: a keyed mutation retried over
// an event stream (SSE, NDJSON, multipart, as the graphql-sse client
// sends it) after a schema change that would refuse it now answers its
// first answer, as a plain retry does: the key is looked up before the
// operation is validated. The streams validated it first, and answered
// GRAPHQL_VALIDATION_FAILED for a write that was made, which a client
// takes for a write that failed, and makes again.
func TestStreamRetryAnswersAfterASchemaChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "dropped", versionsSDL)
	const path = "/api/graphql/admin/dropped"
	gql := `{"query":"mutation { Person_insert(documents: [{name: \"Ivy\", nick: \"iv\"}]) }"}`
	first := d.MustDo(t, 200, dt.Admin(), "POST", path, gql, "Content-Type", "application/json", "Idempotency-Key", "drop-1")
	id := regexp.MustCompile(`Person/[^"]+`).Find(first.Body)
	if id == nil {
		t.Fatalf("the first request: %s", first.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/dropped?force=true",
		"type Address @subdocument { street: String city: String }\ntype Person { name: String! age: Int tags: [String!] home: Address }")
	commits := logLength(t, d, "dropped")
	for _, accept := range []string{"application/json", "text/event-stream", "application/x-ndjson", "multipart/mixed;boundary=graphql;subscriptionSpec=1.0"} {
		r := d.MustDo(t, 200, dt.Admin(), "POST", path, gql, "Content-Type", "application/json", "Accept", accept, "Idempotency-Key", "drop-1")
		if !bytes.Contains(r.Body, id) || bytes.Contains(r.Body, []byte(`"errors"`)) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("a retry (Accept: %s) after the schema change: replayed %q, %s; the first answered %s", accept, r.Header.Get("Idempotent-Replayed"), r.Body, first.Body)
		}
	}
	if n := logLength(t, d, "dropped"); n != commits {
		t.Fatalf("%d commits after the retries, want %d", n, commits)
	}
}

// TestRetryOfARunningKeyAfterASchemaChange: a keyed mutation retried while
// its first request still runs, after a schema change that would refuse
// it now, is a 409 saying the first is still running, as a REST retry of
// a running key is: the key's look-up before the operation is validated
// answers the running state too. It found no recorded answer, and the
// retry answered the validation error, which a client takes for a write
// that failed, though the first may still commit. The first request is
// what Postgres shows of one that runs: its key's claim, locked by its
// transaction (see TestIdempotencyKeyInFlight).
func TestRetryOfARunningKeyAfterASchemaChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "runningdrop", versionsSDL)
	const path = "/api/graphql/admin/runningdrop"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO sluice.idempotency_claims (user_id, key) SELECT id, 'drop-running' FROM sluice.users WHERE name = 'admin'"); err != nil {
		t.Fatal(err)
	}
	first, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx) //nolint:errcheck // after the test
	if _, err := first.Exec(ctx, "SELECT 1 FROM sluice.idempotency_claims WHERE key = 'drop-running' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/runningdrop?force=true",
		"type Address @subdocument { street: String city: String }\ntype Person { name: String! age: Int tags: [String!] home: Address }")
	gql := `{"query":"mutation { Person_insert(documents: [{name: \"Ivy\", nick: \"iv\"}]) }"}`
	for _, accept := range []string{"application/json", "text/event-stream"} {
		r := d.Do(t, dt.Admin(), "POST", path, gql, "Content-Type", "application/json", "Accept", accept, "Idempotency-Key", "drop-running")
		if code, msg := gqlRefusal(t, r, "application/json"); r.Status != 409 || code != "CONFLICT" || !strings.Contains(msg, "still running") || r.Header.Get("Retry-After") == "" {
			t.Errorf("a retry (Accept: %s) while the first runs, after the schema change: %d %s (Retry-After %q)", accept, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
}
