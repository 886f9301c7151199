package daemon_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

const versionsSDL = "type Address @subdocument { street: String city: String }\n" +
	"type Person { name: String! age: Int nick: String tags: [String!] home: Address }"

// versionMember matches the "@version" member of a document as REST
// reads answer it.
var versionMember = regexp.MustCompile(`,"@version":"[0-9a-z]+"`)

// withoutVersion returns doc, a document's JSON as REST reads answer it,
// without its "@version": as change images hold it.
func withoutVersion(doc string) string { return versionMember.ReplaceAllString(doc, "") }

// writeAnswer is a document write's answer.
type writeAnswer struct {
	IDs      []string `json:"ids"`
	Commit   string   `json:"commit"`
	Position string   `json:"position"`
	Version  string   `json:"version"`
}

func answerOf(t *testing.T, r dt.Response) writeAnswer {
	t.Helper()
	var a writeAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil || a.Commit == "" || a.Position == "" || a.Version == "" {
		t.Fatalf("write answered %s (%v)", r.Body, err)
	}
	if got := r.Header.Get("Sluice-Position"); got != a.Position {
		t.Fatalf("Sluice-Position %q, body position %q", got, a.Position)
	}
	return a
}

// docOf reads document id of admin/db with its ETag, checking that its
// "@version" is the ETag's.
func docOf(t *testing.T, d *dt.Daemon, db, id string) (map[string]any, string) {
	t.Helper()
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?id="+id, nil)
	var doc map[string]any
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	tag := r.Header.Get("ETag")
	if v, _ := doc["@version"].(string); tag == "" || tag != `"`+v+`"` {
		t.Fatalf("GET %s: ETag %q, @version %v", id, tag, doc["@version"])
	}
	return doc, tag
}

// logLength returns how many commits admin/db's log holds.
func logLength(t *testing.T, d *dt.Daemon, db string) int {
	t.Helper()
	var log []json.RawMessage
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/"+db+"?count=1000", nil).Body, &log); err != nil {
		t.Fatal(err)
	}
	return len(log)
}

// staleAnswer checks a 412 answer: its body names the documents with
// their current versions (want: id to version, "" for none), and its ETag
// is the current version of the one document the request named, absent
// for a request of several (see staleAnswerOf).
func staleAnswer(t *testing.T, r dt.Response, want map[string]string) {
	t.Helper()
	staleAnswerOf(t, r, want, len(want) == 1)
}

// staleAnswerOf is staleAnswer for a request of one document (one) or of
// several.
func staleAnswerOf(t *testing.T, r dt.Response, want map[string]string, one bool) {
	t.Helper()
	if r.Status != 412 {
		t.Fatalf("status %d, want 412: %s", r.Status, r.Body)
	}
	var body struct {
		Error struct {
			Type string `json:"@type"`
		} `json:"api:error"`
		Message string `json:"api:message"`
		Docs    []struct {
			ID      string  `json:"@id"`
			Version *string `json:"@version"`
		} `json:"api:documents"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Error.Type != "api:PreconditionFailed" || len(body.Docs) != len(want) {
		t.Fatalf("412 body %s", r.Body)
	}
	for _, doc := range body.Docs {
		v, ok := want[doc.ID]
		got := ""
		if doc.Version != nil {
			got = *doc.Version
		}
		if !ok || got != v || !strings.Contains(body.Message, doc.ID) {
			t.Fatalf("412 names %s at version %q, want %v: %s", doc.ID, got, want, r.Body)
		}
	}
	if !one {
		if tag := r.Header.Get("ETag"); tag != "" {
			t.Fatalf("412 of a request of several documents has ETag %q", tag)
		}
		return
	}
	for _, v := range want {
		if tag := r.Header.Get("ETag"); v != "" && tag != `"`+v+`"` || v == "" && tag != "" {
			t.Fatalf("412 ETag %q, want the current version %q", tag, v)
		}
	}
}

// TestConditionalWritesREST: a document's version is its ETag and
// "@version", new with every write; PUT, PATCH and DELETE with If-Match
// write only that version, and a stale one is a 412 naming the document
// with its current version and ETag, writing nothing (the document and
// the log are unchanged); If-None-Match: * creates only; a bulk body's
// "@version"s are each document's precondition, all checked before
// anything is written; a conditional GET answers 304, of a document or a
// listing.
func TestConditionalWritesREST(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "cw", versionsSDL)
	ins := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/cw", `[{"@type":"Person","@id":"ann","name":"Ann","age":30},{"@type":"Person","@id":"bob","name":"Bob"}]`))
	ann, v1 := docOf(t, d, "cw", "Person/ann")
	if v1 != `"`+ins.Version+`"` {
		t.Fatalf("the document's version %s, the insert's %s", v1, ins.Version)
	}
	if r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/cw?id=Person/ann", nil, "If-None-Match", v1); r.Status != 304 || len(r.Body) != 0 || r.Header.Get("ETag") != v1 {
		t.Fatalf("conditional GET: %d %q %s", r.Status, r.Header.Get("ETag"), r.Body)
	}
	// If-Match on a GET: its version, or *, reads; another tag, or a
	// weak one, is a 412 (RFC 9110: compared strongly, before
	// If-None-Match).
	for _, tag := range []string{v1, "*", `"x", ` + v1} {
		d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/cw?id=Person/ann", nil, "If-Match", tag)
	}
	for _, tag := range []string{`"x"`, "W/" + v1} {
		if r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/cw?id=Person/ann", nil, "If-Match", tag, "If-None-Match", v1); r.Status != 412 || !strings.Contains(string(r.Body), "at version "+strings.Trim(v1, `"`)) {
			t.Fatalf("GET with If-Match: %s: %d %s", tag, r.Status, r.Body)
		}
	}
	// A listing has no entity tag (RFC 9110, 13.1.1 and 13.1.2): If-Match
	// holds with * alone, and If-None-Match: * never, the listing being
	// there (found by review: both were ignored).
	listing := "/api/document/admin/cw?type=Person"
	if r := d.Do(t, dt.Admin(), "GET", listing, nil, "If-Match", `"nope"`); r.Status != 412 || !strings.Contains(string(r.Body), "a listing has no entity tag") {
		t.Fatalf("a listing with If-Match: \"nope\": %d %s", r.Status, r.Body)
	}
	if r := d.Do(t, dt.Admin(), "GET", listing, nil, "If-None-Match", "*"); r.Status != 304 || len(r.Body) != 0 {
		t.Fatalf("a listing with If-None-Match: *: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", listing, nil, "If-Match", "*")
	d.MustDo(t, 200, dt.Admin(), "GET", listing, nil, "If-None-Match", `"nope"`)
	// A document read as of a position has no entity tag either (its
	// version then is none to write against), so it is judged as a
	// listing is (found by review: both headers were ignored), even
	// with the tag of the version it had then.
	past := "/api/document/admin/cw?id=Person/ann&as_of=" + ins.Position
	if r := d.Do(t, dt.Admin(), "GET", past, nil, "If-Match", v1); r.Status != 412 || !strings.Contains(string(r.Body), "a document read as of a position has no entity tag") {
		t.Fatalf("a past read with If-Match: %s: %d %s", v1, r.Status, r.Body)
	}
	if r := d.Do(t, dt.Admin(), "GET", past, nil, "If-None-Match", "*"); r.Status != 304 || len(r.Body) != 0 {
		t.Fatalf("a past read with If-None-Match: *: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", past, nil, "If-Match", "*")
	d.MustDo(t, 200, dt.Admin(), "GET", past, nil, "If-None-Match", v1)
	// HEAD answers as GET does, without the body; a 405 says what is
	// allowed.
	if r := d.Do(t, dt.Admin(), "HEAD", "/api/document/admin/cw?id=Person/ann", nil); r.Status != 200 || r.Header.Get("ETag") != v1 || len(r.Body) != 0 {
		t.Fatalf("HEAD: %d %q %q", r.Status, r.Header.Get("ETag"), r.Body)
	}
	if r := d.Do(t, dt.Admin(), "POST", "/api/schema/admin/cw", "type X { y: Int }"); r.Status != 405 || r.Header.Get("Allow") != "GET, HEAD, PUT, OPTIONS" {
		t.Fatalf("POST /api/schema: %d, Allow %q", r.Status, r.Header.Get("Allow"))
	}
	list := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/cw?type=Person&as_list=true", nil)
	if !strings.Contains(string(list.Body), `"@id":"Person/ann","@type":"Person","@version":"`+ins.Version+`"`) {
		t.Fatalf("listing: %s", list.Body)
	}

	// A conditional replace of the version read succeeds and makes a new
	// version, its ETag.
	ann["age"] = 31
	body, _ := json.Marshal(ann)
	put := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/cw", body, "If-Match", v1)
	_, v2 := docOf(t, d, "cw", "Person/ann")
	if v2 == v1 || put.Header.Get("ETag") != v2 {
		t.Fatalf("after the replace: version %s (was %s), answer's ETag %q", v2, v1, put.Header.Get("ETag"))
	}
	before, commits := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/cw?id=Person/ann", nil).Body, logLength(t, d, "cw")
	cur := strings.Trim(v2, `"`)

	// Stale: each way of writing, each refused with 412, nothing written.
	for _, tc := range []struct {
		method, path, body string
		header             []string
	}{
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"Stale"}`, []string{"If-Match", v1}},
		{"PUT", "/api/document/admin/cw", string(body), nil}, // its own "@version" is v1's
		{"PATCH", "/api/document/admin/cw?id=Person/ann", `{"name":"Stale"}`, []string{"If-Match", v1, "Content-Type", "application/merge-patch+json"}},
		{"PATCH", "/api/document/admin/cw?id=Person/ann", `{"name":"Stale","@version":"` + ins.Version + `"}`, []string{"Content-Type", "application/merge-patch+json"}},
		{"DELETE", "/api/document/admin/cw?id=Person/ann", "", []string{"If-Match", v1}},
		{"DELETE", "/api/document/admin/cw", `[{"@id":"Person/ann","@version":"` + ins.Version + `"}]`, nil},
		{"PUT", "/api/document/admin/cw?create=true", `{"@type":"Person","@id":"ann","name":"New"}`, []string{"If-None-Match", "*"}},
		// A quoted "*" is an entity tag, which no version is: only the
		// unquoted * is the wildcard (RFC 9110).
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"Star"}`, []string{"If-Match", `"*"`}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","@version":"*","name":"Star"}`, nil},
		{"PATCH", "/api/document/admin/cw?id=Person/ann", `{"name":"Star"}`, []string{"If-Match", `"*"`, "Content-Type", "application/merge-patch+json"}},
		{"PATCH", "/api/document/admin/cw?id=Person/ann", `{"name":"Star","@version":"*"}`, []string{"Content-Type", "application/merge-patch+json"}},
		{"DELETE", "/api/document/admin/cw?id=Person/ann", "", []string{"If-Match", `"*"`}},
		{"DELETE", "/api/document/admin/cw", `[{"@id":"Person/ann","@version":"*"}]`, nil},
	} {
		r := d.Do(t, dt.Admin(), tc.method, tc.path, tc.body, tc.header...)
		staleAnswer(t, r, map[string]string{"Person/ann": cur})
	}
	if got := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/cw?id=Person/ann", nil).Body; string(got) != string(before) {
		t.Fatalf("a refused write changed the document:\n%s\nwas\n%s", got, before)
	}
	if n := logLength(t, d, "cw"); n != commits {
		t.Fatalf("refused writes made commits: %d, was %d", n, commits)
	}

	// A bulk replace: every stale document is named, and the fresh one is
	// not written either.
	_, bob := docOf(t, d, "cw", "Person/bob")
	r := d.Do(t, dt.Admin(), "PUT", "/api/document/admin/cw?create=true", `[
		{"@type":"Person","@id":"bob","@version":`+bob+`,"name":"Bob II"},
		{"@type":"Person","@id":"ann","@version":`+v1+`,"name":"Ann II"},
		{"@type":"Person","@id":"cid","@version":"zz","name":"Cid"}]`)
	staleAnswer(t, r, map[string]string{"Person/ann": cur, "Person/cid": ""})
	if doc, tag := docOf(t, d, "cw", "Person/bob"); doc["name"] != "Bob" || tag != bob {
		t.Fatalf("the fresh document of a refused bulk write was written: %v", doc)
	}
	// One stale document of several: named, but its version is not the
	// ETag of the request's target, a list.
	for _, tc := range []struct{ method, body string }{
		{"PUT", `[{"@type":"Person","@id":"bob","@version":` + bob + `,"name":"Bob II"},{"@type":"Person","@id":"ann","@version":` + v1 + `,"name":"Ann II"}]`},
		{"DELETE", `["Person/bob",{"@id":"Person/ann","@version":` + v1 + `}]`},
	} {
		staleAnswerOf(t, d.Do(t, dt.Admin(), tc.method, "/api/document/admin/cw", tc.body), map[string]string{"Person/ann": cur}, false)
	}
	if n := logLength(t, d, "cw"); n != commits {
		t.Fatalf("refused writes made commits: %d, was %d", n, commits)
	}

	// Fresh versions pass; If-Match: * needs the document to exist;
	// If-None-Match: * creates.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/cw", `[{"@type":"Person","@id":"bob","@version":`+bob+`,"name":"Bob II"},{"@type":"Person","@id":"ann","@version":`+v2+`,"name":"Ann II"}]`)
	d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/cw?id=Person/ann", `{"age":40}`, "If-Match", "*", "Content-Type", "application/merge-patch+json")
	staleAnswer(t, d.Do(t, dt.Admin(), "PUT", "/api/document/admin/cw?create=true", `{"@type":"Person","@id":"dan","name":"Dan"}`, "If-Match", "*"), map[string]string{"Person/dan": ""})
	created := answerOf(t, d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/cw?create=true", `{"@type":"Person","@id":"dan","name":"Dan"}`, "If-None-Match", "*"))
	_, dan := docOf(t, d, "cw", "Person/dan")
	if dan != `"`+created.Version+`"` {
		t.Fatalf("created at %s, answered %s", dan, created.Version)
	}
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/cw", `[{"@id":"Person/dan","@version":`+dan+`},"Person/bob"]`)
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/cw?id=Person/dan", nil)

	// Misuse is a 400 naming what is wrong.
	for _, tc := range []struct {
		method, path, body, want string
		header                   []string
	}{
		{"POST", "/api/document/admin/cw", `{"@type":"Person","@id":"eve","@version":"3f","name":"Eve"}`, "an insert takes no precondition", nil},
		{"POST", "/api/document/admin/cw", `{"@type":"Person","@id":"eve","name":"Eve"}`, "an insert takes no precondition", []string{"If-Match", `"3f"`}},
		{"PUT", "/api/document/admin/cw", `[{"@type":"Person","@id":"ann","name":"A"},{"@type":"Person","@id":"eve","name":"E"}]`, "If-Match and If-None-Match apply to a request of one document", []string{"If-Match", v2}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, "give one entity tag", []string{"If-Match", `"a", "b"`}},
		// The value as sent: it was shown quoted, If-Match: "3f", the
		// very form it asks for.
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, `If-Match: 3f is not an entity tag: an entity tag is in quotes, "3f" (send the ETag as Sluice answered it, quotes included)`, []string{"If-Match", `3f`}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, `If-Match: "3f is not an entity tag: give a version in quotes`, []string{"If-Match", `"3f`}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, `If-Match: W/3f is not an entity tag: give a version in quotes`, []string{"If-Match", `W/3f`}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, `If-Match is empty`, []string{"If-Match", ``}},
		// If-None-Match takes only *: an unquoted version was told it
		// is no entity tag, and refused again once quoted.
		{"PUT", "/api/document/admin/cw?create=true", `{"@type":"Person","@id":"ann","name":"A"}`, "If-None-Match on a write takes only *", []string{"If-None-Match", `3f`}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, "add create=true", []string{"If-None-Match", "*"}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"A"}`, "If-None-Match on a write takes only *", []string{"If-None-Match", v2}},
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","@version":3,"name":"A"}`, `"@version" must be a version string`, nil},
		{"DELETE", "/api/document/admin/cw", `[{"@id":"Person/ann","@verison":"x"}]`, `element 0 (counting from 0): unknown member "@verison"; an element is a document id or {"@id": id, "@version": version}`, nil},
		{"DELETE", "/api/document/admin/cw", `["Person/bob",{"@id":"Person/ann","@version":""}]`, `element 1 (counting from 0): "@version" must be a version string`, nil},
		// A weak tag never matches a write: named, not a 412 that a
		// client would retry for good.
		{"PUT", "/api/document/admin/cw", `{"@type":"Person","@id":"ann","name":"Weak"}`, `If-Match: W/` + v2 + ` is a weak entity tag (W/), which never matches a write`, []string{"If-Match", `W/` + v2}},
		{"PATCH", "/api/document/admin/cw?id=Person/ann", `{"name":"Weak"}`, `is a weak entity tag (W/)`, []string{"If-Match", `W/` + v2, "Content-Type", "application/merge-patch+json"}},
	} {
		r := d.Do(t, dt.Admin(), tc.method, tc.path, tc.body, tc.header...)
		if _, msg := errBody(t, r); r.Status != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s %s %v: %d %s, want 400 saying %q", tc.method, tc.path, tc.body, tc.header, r.Status, msg, tc.want)
		}
	}
}

// TestLargeWriteEndsAtTheChunkOfItsError: a PUT of more than 250
// documents is checked chunk by chunk, and an error in a chunk (a
// document that does not exist) ends the request there: the 412 names
// the stale documents of that chunk and the ones before, never of a
// later chunk, whether or not the error's chunk holds a stale document
// too (it went on, naming every later chunk's, when it did). Stale
// documents alone are looked for in every chunk. Nothing is written.
func TestLargeWriteEndsAtTheChunkOfItsError(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "big", "type T { n: Int! }")
	docs := make([]map[string]any, 600)
	for i := range docs {
		docs[i] = map[string]any{"@type": "T", "@id": fmt.Sprintf("t%d", i), "n": i}
	}
	body, _ := json.Marshal(docs)
	version := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", body)).Version
	commits := logLength(t, d, "big")
	// put replaces every document with n+1, "@version" "zz" (no version
	// of theirs) at each of stale, and T/nope (missing) at missing, -1
	// for none.
	put := func(missing int, stale ...int) dt.Response {
		t.Helper()
		docs := make([]map[string]any, 600)
		for i := range docs {
			docs[i] = map[string]any{"@type": "T", "@id": fmt.Sprintf("t%d", i), "n": i + 1}
		}
		for _, i := range stale {
			docs[i]["@version"] = "zz"
		}
		if missing >= 0 {
			docs[missing]["@id"] = "nope"
		}
		body, _ := json.Marshal(docs)
		return d.Do(t, dt.Admin(), "PUT", "/api/document/admin/big", body)
	}
	staleAnswerOf(t, put(300, 10, 500), map[string]string{"T/t10": version}, false)
	staleAnswerOf(t, put(300, 20, 310, 510), map[string]string{"T/t20": version, "T/t310": version}, false)
	staleAnswerOf(t, put(-1, 20, 310, 510), map[string]string{"T/t20": version, "T/t310": version, "T/t510": version}, false)
	if r := put(300); r.Status != 404 || !strings.Contains(string(r.Body), "document T/nope does not exist") {
		t.Fatalf("a missing document alone: %d %s", r.Status, r.Body)
	}
	if n := logLength(t, d, "big"); n != commits {
		t.Fatalf("refused writes made commits: %d, was %d", n, commits)
	}
}

// TestRacingConditionalWrites: two replicas, many rounds of two writes of
// one document with the same expected version, sent at once, one to each
// replica (a replace and a patch, or two deletes): exactly one wins each
// round, the other is a 412 naming the winner's version.
func TestRacingConditionalWrites(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "race", versionsSDL)
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/race", `{"@type":"Person","@id":"p","name":"P","age":0}`)
	const rounds = 30
	for i := range rounds {
		_, tag := docOf(t, a, "race", "Person/p")
		var wg sync.WaitGroup
		var ra, rb dt.Response
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			ra = a.Do(t, dt.Admin(), "PUT", "/api/document/admin/race", fmt.Sprintf(`{"@type":"Person","@id":"p","name":"A%d","age":%d}`, i, i), "If-Match", tag)
		})
		wg.Go(func() {
			<-start
			rb = b.Do(t, dt.Admin(), "PATCH", "/api/document/admin/race?id=Person/p", fmt.Sprintf(`{"name":"B%d"}`, i), "If-Match", tag, "Content-Type", "application/merge-patch+json")
		})
		close(start)
		wg.Wait()
		win, lose := ra, rb
		if ra.Status != 200 {
			win, lose = rb, ra
		}
		if win.Status != 200 || lose.Status != 412 {
			t.Fatalf("round %d: statuses %d and %d, want one 200 and one 412 (%s / %s)", i, ra.Status, rb.Status, ra.Body, rb.Body)
		}
		staleAnswer(t, lose, map[string]string{"Person/p": answerOf(t, win).Version})
	}
	if n := logLength(t, a, "race"); n != rounds+1 {
		t.Fatalf("%d commits, want %d", n, rounds+1)
	}
	// Deletes race the same way.
	_, tag := docOf(t, a, "race", "Person/p")
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for _, d := range []*dt.Daemon{a, b} {
		wg.Go(func() {
			codes <- d.Do(t, dt.Admin(), "DELETE", "/api/document/admin/race?id=Person/p", nil, "If-Match", tag).Status
		})
	}
	wg.Wait()
	if c1, c2 := <-codes, <-codes; c1+c2 != 200+412 {
		t.Fatalf("racing deletes: %d and %d", c1, c2)
	}
}

// TestMergePatch: PATCH with a JSON Merge Patch keeps what it leaves out,
// replaces what it gives (a list whole, a subdocument merged), removes
// what it sets to null; the change streams as an update with the whole
// document before and after. A patch that would make the document invalid
// is a 400 naming the field, a missing document a 404, another media type
// a 415, and nothing is written.
func TestMergePatch(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "mp", versionsSDL)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/mp", `{"@type":"Person","@id":"ann","name":"Ann","age":30,"nick":"A","tags":["x","y"],"home":{"street":"Main","city":"Oslo"}}`)
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/mp/Person"})
	st.Next() // : connected
	patch := func(id, body string) dt.Response {
		return d.Do(t, dt.Admin(), "PATCH", "/api/document/admin/mp?id="+id, body, "Content-Type", "application/merge-patch+json")
	}
	r := patch("Person/ann", `{"age":31,"nick":null,"tags":["z"],"home":{"city":"Bergen","street":null}}`)
	if r.Status != 200 {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	res := answerOf(t, r)
	want := `{"@id":"Person/ann","@type":"Person","@version":"` + res.Version + `","name":"Ann","age":31,"tags":["z"],"home":{"@type":"Address","city":"Bergen"}}` + "\n"
	if got := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/mp?id=Person/ann", nil).Body; string(got) != want {
		t.Fatalf("patched:\n got %s\nwant %s", got, want)
	}
	e := nextEvent(t, st)
	if e.Kind != "entity.update" || string(e.Data) != strings.TrimSuffix(strings.Replace(want, `"@version":"`+res.Version+`",`, "", 1), "\n") {
		t.Fatalf("the patch's event: %s %s", e.Kind, e.Data)
	}
	changes := allChanges(t, d, "mp")
	last := changes[len(changes)-1].Changes[0]
	if last.Op != "updated" || !strings.Contains(string(last.Before), `"nick":"A"`) || !strings.Contains(string(last.Before), `"street":"Main"`) ||
		!strings.Contains(string(last.After), `"city":"Bergen"`) || !strings.Contains(string(last.After), `"name":"Ann"`) {
		t.Fatalf("the patch's change: %+v", last)
	}
	// A patch may carry the document's own @id and @type (a document as
	// read, changed), not others.
	if r := patch("Person/ann", `{"@id":"Person/ann","@type":"Person","age":32}`); r.Status != 200 {
		t.Fatalf("patch with its own @id and @type: %d %s", r.Status, r.Body)
	}
	commits := logLength(t, d, "mp")
	for _, tc := range []struct {
		id, body, ctype string
		status          int
		want            string
	}{
		{"Person/ann", `{"name":null}`, "", 400, `document Person/ann: the patch would make it invalid: Person: field "name": required field is missing`},
		{"Person/ann", `{"age":"old"}`, "", 400, `field "age": expected Int (a whole number), got string "old"`},
		{"Person/ann", `{"agee":3}`, "", 400, `unknown field "agee"`},
		{"Person/ann", `{"home":{"zip":"1"}}`, "", 400, `unknown field "home.zip"`},
		// Removing a field the class does not have (a typo) is refused
		// as setting it is, at any depth: found by review, it was a
		// commit, a new version and an event that removed nothing.
		{"Person/ann", `{"agee":null}`, "", 400, `document Person/ann: the patch is invalid: Person: unknown field "agee": Person has no such field`},
		{"Person/ann", `{"home":{"ctiy":null}}`, "", 400, `unknown field "home.ctiy": Address has no such field`},
		{"Person/ann", `{"@nick":null}`, "", 400, `unknown key "@nick"`},
		{"Person/ann", `{"home":{"@id":null}}`, "", 400, `field "home": a subdocument has no "@id"`},
		{"Person/ann", `{"@type":"Dog"}`, "", 400, `changes its "@type"`},
		{"Person/ann", `{"@id":"Person/bob"}`, "", 400, `changes its "@id"`},
		{"Person/ann", `[{"op":"remove","path":"/age"}]`, "", 400, "a merge patch is a JSON object"},
		{"Person/ann", `{"age":1}`, "application/json-patch+json", 415, "application/merge-patch+json"},
		{"Person/nobody", `{"age":1}`, "", 404, "document Person/nobody does not exist"},
		{"", `{"age":1}`, "", 400, "give ?id="},
	} {
		ctype := tc.ctype
		if ctype == "" {
			ctype = "application/merge-patch+json"
		}
		r := d.Do(t, dt.Admin(), "PATCH", "/api/document/admin/mp?id="+tc.id, tc.body, "Content-Type", ctype)
		if _, msg := errBody(t, r); r.Status != tc.status || !strings.Contains(msg, tc.want) {
			t.Errorf("PATCH %s %s: %d %s, want %d saying %q", tc.id, tc.body, r.Status, msg, tc.status, tc.want)
		}
	}
	if n := logLength(t, d, "mp"); n != commits {
		t.Fatalf("refused patches made commits: %d, was %d", n, commits)
	}
}

// TestETagNamesOneView: a document read by a role that hides fields of
// the schema has an ETag of its own view (the version, the role and the
// schema version), so If-None-Match with the tag another role got, or
// the same role under other protections, reads the body afresh instead
// of a 304 that would keep showing hidden fields; the answer is private
// to the credential (Cache-Control, Vary). A write's If-Match takes the
// tag of any view of the current version, as the edit flow reads it.
func TestETagNamesOneView(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "views", `type Person { name: String! ssn: String @private nick: String @protected(role: "write") }`)
	const docs = "/api/document/admin/views"
	const alice = docs + "?id=Person/alice"
	v := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"alice","name":"Alice","ssn":"S-123","nick":"Al"}`)).Version
	for _, u := range []string{`{"name":"rita","organization":"admin","password":"rita-password"}`, `{"name":"wren","organization":"admin","password":"wren-password"}`} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", u)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/views", `{"user":"rita","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/views", `{"user":"wren","role":"write"}`)
	rita, wren := dt.Basic("rita", "rita-password"), dt.Basic("wren", "wren-password")

	// read reads alice as who, checking the answer's headers, and
	// returns its ETag.
	read := func(who dt.Auth, status int, header ...string) (dt.Response, string) {
		t.Helper()
		r := d.MustDo(t, status, who, "GET", alice, nil, header...)
		if cc, vary := r.Header.Get("Cache-Control"), strings.Join(r.Header.Values("Vary"), ", "); cc != "private, no-cache" || !strings.Contains(vary, "Authorization") || !strings.Contains(vary, "Origin") {
			t.Fatalf("GET %s answered %d with Cache-Control %q, Vary %q", alice, status, cc, vary)
		}
		return r, r.Header.Get("ETag")
	}
	view := regexp.MustCompile(`^"` + v + `-(read|write)-([1-9][0-9]*)"$`)
	body, whole := read(dt.Admin(), 200)
	if whole != `"`+v+`"` || !strings.Contains(string(body.Body), "S-123") {
		t.Fatalf("the admin's read: ETag %s, %s", whole, body.Body)
	}
	body, wrens := read(wren, 200)
	if m := view.FindStringSubmatch(wrens); m == nil || m[1] != "write" || strings.Contains(string(body.Body), "S-123") || !strings.Contains(string(body.Body), `"nick":"Al"`) {
		t.Fatalf("the writer's read: ETag %s, %s", wrens, body.Body)
	}
	body, ritas := read(rita, 200)
	m := view.FindStringSubmatch(ritas)
	if m == nil || m[1] != "read" || strings.Contains(string(body.Body), "S-123") || strings.Contains(string(body.Body), "nick") {
		t.Fatalf("the reader's read: ETag %s, %s", ritas, body.Body)
	}
	if m2 := view.FindStringSubmatch(wrens); m2[2] != m[2] {
		t.Fatalf("the views of one schema name schema versions %s and %s", m2[2], m[2])
	}

	// Each view revalidates only itself: another view's tag reads it
	// afresh, without what the reader's role hides.
	for _, tc := range []struct {
		who  dt.Auth
		tag  string
		want string
	}{{rita, whole, ritas}, {rita, wrens, ritas}, {wren, whole, wrens}, {dt.Admin(), ritas, whole}, {dt.Admin(), "W/" + wrens, whole}} {
		if r, tag := read(tc.who, 200, "If-None-Match", tc.tag); tag != tc.want || len(r.Body) == 0 {
			t.Fatalf("If-None-Match: %s answered ETag %s, want %s", tc.tag, tag, tc.want)
		}
	}
	for _, tc := range []struct {
		who dt.Auth
		tag string
	}{{rita, ritas}, {rita, "W/" + ritas}, {wren, wrens}, {dt.Admin(), whole}} {
		if r, tag := read(tc.who, 304, "If-None-Match", tc.tag); tag != strings.TrimPrefix(tc.tag, "W/") || len(r.Body) != 0 {
			t.Fatalf("If-None-Match: %s answered ETag %s, %q", tc.tag, tag, r.Body)
		}
	}
	// If-Match on a read compares with the view read too.
	r, _ := read(rita, 412, "If-Match", whole)
	if _, msg := errBody(t, r); !strings.Contains(msg, "(ETag "+ritas+")") {
		t.Fatalf("If-Match of another view on a read: %s", msg)
	}
	read(rita, 200, "If-Match", ritas)

	// A role narrowed since a read: its tag no longer revalidates.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/views", `{"user":"rita","role":"admin"}`)
	if _, tag := read(rita, 200); tag != whole {
		t.Fatalf("rita as admin: ETag %s", tag)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/views", `{"user":"rita","role":"read"}`)
	if r, tag := read(rita, 200, "If-None-Match", whole); tag != ritas || strings.Contains(string(r.Body), "S-123") {
		t.Fatalf("rita narrowed to read, revalidating the admin's read: ETag %s, %s", tag, r.Body)
	}

	// Protections changed by the schema: the version is the same, the
	// view is not.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/views", `type Person { name: String! @protected(role: "write") ssn: String @private nick: String @protected(role: "write") }`)
	body, after := read(rita, 200, "If-None-Match", ritas)
	if m2 := view.FindStringSubmatch(after); m2 == nil || m2[1] != "read" || after == ritas || strings.Contains(string(body.Body), "Alice") {
		t.Fatalf("rita's read after the schema made name protected: ETag %s (was %s), %s", after, ritas, body.Body)
	}
	if _, tag := read(dt.Admin(), 200); tag != whole {
		t.Fatalf("the admin's ETag after the schema change: %s, was %s", tag, whole)
	}

	// Writes take the tag of any view of the current version: the
	// writer's own (the edit flow), the admin's; an old one is stale.
	_, wrens = read(wren, 200)
	w1 := answerOf(t, d.MustDo(t, 200, wren, "PATCH", alice, `{"nick":"A"}`, "If-Match", wrens, "Content-Type", "application/merge-patch+json")).Version
	d.MustDo(t, 200, wren, "PUT", docs, `{"@type":"Person","@id":"alice","name":"Alice","nick":"B"}`, "If-Match", `"`+w1+`"`)
	staleAnswer(t, d.Do(t, wren, "PATCH", alice, `{"nick":"C"}`, "If-Match", wrens, "Content-Type", "application/merge-patch+json"), map[string]string{"Person/alice": strings.Trim(d.MustDo(t, 200, dt.Admin(), "GET", alice, nil).Header.Get("ETag"), `"`)})
	// A tag that is not a version and a view matches nothing.
	cur := strings.Trim(d.MustDo(t, 200, dt.Admin(), "GET", alice, nil).Header.Get("ETag"), `"`)
	for _, tag := range []string{`"` + cur + `-read"`, `"` + cur + `-admin-0"`, `"-read-1"`} {
		staleAnswer(t, d.Do(t, wren, "PATCH", alice, `{"nick":"D"}`, "If-Match", tag, "Content-Type", "application/merge-patch+json"), map[string]string{"Person/alice": cur})
	}
}

// TestETagAfterForcedChanges: a schema change that drops stored values
// of a class's documents (a field, a field of a subdocument type they
// hold, references that no longer fit) leaves their versions alone, so
// the tag of a whole document then names the last such change
// ("<version>-admin-<schema version>"): the tag read before it no longer
// revalidates, the new one does, and a write takes either. A change that
// only adds, or drops values of another class only, leaves the tag alone.
func TestETagAfterForcedChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const (
		animal  = "interface Animal { name: String }\ntype Dog implements Animal { breed: String }\n"
		address = "type Address @subdocument { street: String zip: Int }\n"
		pet     = "type Pet { name: String legs: Int }\n"
	)
	person := func(fields string) string {
		return "type Person { name: String! home: Address pet: Animal " + fields + " }\n"
	}
	d.CreateDatabase(t, "tags", animal+address+pet+person("age: Int"))
	const docs = "/api/document/admin/tags"
	const alice = docs + "?id=Person/alice"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"Dog","@id":"rex","name":"Rex"},{"@type":"Pet","@id":"tom","name":"Tom","legs":4}]`)
	v := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"alice","name":"Alice","age":30,"home":{"street":"Elm","zip":7},"pet":"Dog/rex"}`)).Version
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/tags", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")

	// change puts sdl as the schema (forced) and returns its version.
	change := func(sdl string) int {
		t.Helper()
		var a struct {
			SchemaVersion int `json:"schema_version"`
		}
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/tags?force=true", sdl).Body, &a); err != nil || a.SchemaVersion == 0 {
			t.Fatalf("schema change: %v", err)
		}
		return a.SchemaVersion
	}
	// revalidate reads id with If-None-Match: tag as who, wants status
	// and the ETag want, and returns the body.
	revalidate := func(who dt.Auth, id, tag string, status int, want string) string {
		t.Helper()
		r := d.MustDo(t, status, who, "GET", docs+"?id="+id, nil, "If-None-Match", tag)
		if got := r.Header.Get("ETag"); got != want {
			t.Fatalf("GET %s with If-None-Match: %s answered %d with ETag %s, want %s", id, tag, status, got, want)
		}
		return string(r.Body)
	}
	tag := func(version string, schemaVersion int) string {
		return fmt.Sprintf(`"%s-admin-%d"`, version, schemaVersion)
	}
	bare := `"` + v + `"`
	revalidate(dt.Admin(), "Person/alice", bare, 304, bare)
	_, tom := docOf(t, d, "tags", "Pet/tom")

	// Alice's age dropped: the bare version no longer revalidates, for
	// the admin nor for a reader whose role reads every field.
	n := change(animal + address + pet + person(""))
	after := tag(v, n)
	for _, who := range []dt.Auth{dt.Admin(), rita} {
		if body := revalidate(who, "Person/alice", bare, 200, after); strings.Contains(body, `"age"`) || !strings.Contains(body, `"@version":"`+v+`"`) {
			t.Fatalf("after age was dropped: %s", body)
		}
		revalidate(who, "Person/alice", after, 304, after)
	}
	revalidate(dt.Admin(), "Pet/tom", tom, 304, tom) // another class

	// A write takes the new tag, or the bare version; what it writes
	// reads under the same view (one more download, no wrong 304).
	v2 := answerOf(t, d.MustDo(t, 200, dt.Admin(), "PATCH", alice, `{"name":"Ali"}`, "If-Match", after, "Content-Type", "application/merge-patch+json")).Version
	v3 := answerOf(t, d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"Person","@id":"alice","name":"Alice","home":{"street":"Elm","zip":7},"pet":"Dog/rex"}`, "If-Match", `"`+v2+`"`)).Version
	staleAnswer(t, d.Do(t, dt.Admin(), "PATCH", alice, `{"name":"Stale"}`, "If-Match", after, "Content-Type", "application/merge-patch+json"), map[string]string{"Person/alice": v3})
	cur := tag(v3, n)
	revalidate(dt.Admin(), "Person/alice", `"`+v3+`"`, 200, cur)

	// Changes that only add (a field, a class, an enum) leave it, as
	// does one dropping values of Pet alone.
	revalidate(dt.Admin(), "Person/alice", cur, 304, cur)
	change(animal + address + pet + person("email: String") + "enum Color { RED }\ntype Car { color: Color }\n")
	revalidate(dt.Admin(), "Person/alice", cur, 304, cur)
	petless := "type Pet { name: String }\n"
	m := change(animal + address + petless + person("email: String") + "enum Color { RED }\ntype Car { color: Color }\n")
	revalidate(dt.Admin(), "Person/alice", cur, 304, cur)
	revalidate(dt.Admin(), "Pet/tom", tom, 200, tag(strings.Trim(tom, `"`), m))

	// A field of the subdocument type Person holds dropped (its values
	// with it, in Alice's home): Person's tags change.
	m = change(animal + "type Address @subdocument { street: String }\n" + petless + person("email: String") + "enum Color { RED }\ntype Car { color: Color }\n")
	if body := revalidate(dt.Admin(), "Person/alice", cur, 200, tag(v3, m)); strings.Contains(body, "zip") {
		t.Fatalf("after Address.zip was dropped: %s", body)
	}
	cur = tag(v3, m)

	// Dog no longer an Animal: Alice's pet, a reference typed Animal,
	// is dropped, and her tag changes again.
	m = change("interface Animal { name: String }\ntype Dog { name: String breed: String }\ntype Address @subdocument { street: String }\n" + petless + person("email: String") + "enum Color { RED }\ntype Car { color: Color }\n")
	if body := revalidate(dt.Admin(), "Person/alice", cur, 200, tag(v3, m)); strings.Contains(body, "Dog/rex") {
		t.Fatalf("after Dog left Animal: %s", body)
	}
}
