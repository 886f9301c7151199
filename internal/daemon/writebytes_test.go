package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestWriteBytesPerUser: the documents one user's writes hold are bounded
// by write_bytes_per_user. While a write whose body stalled after its
// first document of 600 KB holds it, another write of the user's with a
// document of 600 KB waits for it and then is answered 429 with
// Retry-After, naming the setting, having written nothing; once the
// first write's body ends, both are written. The user is an ordinary
// one: the super user is not held to the share. (The engine's tests cover
// write_bytes, the super user and writes larger than the budget.)
func TestWriteBytesPerUser(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String }")
	text := strings.Repeat("x", 600<<10)
	note := func(id string) string { return fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, text) }

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	// The write has read its first document once the pipe's write
	// returns; until it has charged it, another write fits beside it, so
	// writes are sent until one is refused (each written is counted).
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	written := 0
	for ; ; written++ {
		if written == 20 {
			t.Fatal("no write was refused beside the stalled one")
		}
		r := d.Do(t, rita, "POST", "/api/document/admin/wb", note(fmt.Sprintf("b%d", written)))
		if r.Status == 200 {
			continue
		}
		if r.Status != 429 || !strings.Contains(string(r.Body), "write_bytes_per_user") || r.Header.Get("Retry-After") == "" {
			t.Fatalf("a write past the budget: %d %s (Retry-After %q), want a 429 naming write_bytes_per_user", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		break
	}
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	d.MustDo(t, 200, rita, "POST", "/api/document/admin/wb", note("c"))
	if got, want := countNotes(t, d, "wb"), written+3; got != want {
		t.Fatalf("%d notes, want %d", got, want)
	}
}

// TestWriteBudgetMetrics: sluice_write_bytes is what the documents of
// writes in progress hold of write_bytes, and sluice_write_bytes_waiting
// the writes waiting for it: a write whose body stalled after a document
// of 600 KB holds it, a second write of its user's waits for the user's
// share of 1 MB, and once the first body ends both are written and the
// budget holds nothing.
func TestWriteBudgetMetrics(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String }")
	text := strings.Repeat("x", 600<<10)
	note := func(id string) string { return fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, text) }
	metric := metricOf(t, d)

	answers := make(chan int, 2)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answers)
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	go func() { answers <- d.Do(t, rita, "POST", "/api/document/admin/wb", note("b")).Status }()
	eventually.True(t, 5*time.Second, "sluice_write_bytes_waiting counts the second write", func() bool {
		return metric("sluice_write_bytes_waiting") == 1
	})
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	for range 2 {
		if status := <-answers; status != 200 {
			t.Fatalf("a write: %d", status)
		}
	}
	if held, waiting := metric("sluice_write_bytes"), metric("sluice_write_bytes_waiting"); held != 0 || waiting != 0 {
		t.Fatalf("once the writes were answered: sluice_write_bytes %v, sluice_write_bytes_waiting %v, want 0 and 0", held, waiting)
	}
}

// TestGraphQLMutationsAreChargedToTheWriteBudget: the documents of a
// GraphQL mutation, generic or typed, and the patches of a typed update
// are charged to write_bytes_per_user as a REST write's documents are
// (they arrive decoded, with the request's variables, and were charged
// nothing: a user's concurrent mutations held what their data made
// them). While a REST write whose body stalled holds 600 KB of rita's
// 1 MiB share, an _insertDocuments of 2 × 250 KB and a Note_update
// setting 500 KB of text each wait for it (sluice_write_bytes_waiting
// counts them) and answer nothing; once the stalled body ends, all
// three are written.
func TestGraphQLMutationsAreChargedToTheWriteBudget(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String }")
	d.MustDo(t, 200, rita, "POST", "/api/document/admin/wb", `{"@type":"Note","@id":"p","text":"short"}`)
	note := bigNote
	metric := metricOf(t, d)

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	text := strings.Repeat("g", 250<<10)
	mutations := []map[string]any{
		{"query": `mutation($d: JSON!) { _insertDocuments(json: $d) }`,
			"variables": map[string]any{"d": []any{
				map[string]any{"@type": "Note", "@id": "g0", "text": text},
				map[string]any{"@type": "Note", "@id": "g1", "text": text}}}},
		{"query": `mutation($t: String) { Note_update(documents: [{_id: "p", text: $t}]) }`,
			"variables": map[string]any{"t": strings.Repeat("u", 500<<10)}},
	}
	mutated := make(chan dt.Response, len(mutations))
	for _, m := range mutations {
		body, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			mutated <- doRequest(t, d, rita, "POST", "/api/graphql/admin/wb", bytes.NewReader(body), "application/json")
		}()
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes_waiting counts both mutations", func() bool {
		return metric("sluice_write_bytes_waiting") == 2
	})
	select {
	case r := <-mutated:
		t.Fatalf("a mutation was answered while rita's share was held: %d %.300s", r.Status, r.Body)
	default:
	}
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	for range mutations {
		r := <-mutated
		if r.Status != 200 || bytes.Contains(r.Body, []byte(`"errors"`)) {
			t.Fatalf("a mutation, once the stalled write was written: %d %.300s", r.Status, r.Body)
		}
	}
	if got := countNotes(t, d, "wb"); got != 5 {
		t.Fatalf("%d notes, want 5", got)
	}
	if held := metric("sluice_write_bytes"); held != 0 {
		t.Fatalf("once the writes were answered, sluice_write_bytes is %v, want 0", held)
	}
}

// TestPatchIsChargedToTheWriteBudget: a REST PATCH (a JSON Merge Patch,
// decoded whole, up to max_body_bytes) is charged to
// write_bytes_per_user before it is decoded, as a POST's documents are;
// it was charged nothing. While a REST write whose body stalled holds
// 600 KB of rita's 1 MiB share, a PATCH of 3 MB (charged the share)
// waits for it and is answered 429 with Retry-After, naming the setting,
// having patched nothing; a PATCH of 500 KB sent chunked (its length
// unknown, charged as it is read) waits too, and is written once the
// stalled body ends.
func TestPatchIsChargedToTheWriteBudget(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String }")
	d.MustDo(t, 200, rita, "POST", "/api/document/admin/wb", `{"@type":"Note","@id":"p","text":"short"}`)
	note := bigNote
	metric := metricOf(t, d)
	textOfP := func() string {
		var doc struct{ Text string }
		if err := json.Unmarshal(d.MustDo(t, 200, rita, "GET", "/api/document/admin/wb?id=Note/p", nil).Body, &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Text
	}

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	r := d.Do(t, rita, "PATCH", "/api/document/admin/wb?id=Note/p", fmt.Sprintf(`{"text":%q}`, strings.Repeat("y", 3<<20)),
		"Content-Type", "application/merge-patch+json")
	if r.Status != 429 || !strings.Contains(string(r.Body), "write_bytes_per_user") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a PATCH of 3 MB beside the held share: %d %.300s (Retry-After %q), want a 429 naming write_bytes_per_user", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if text := textOfP(); text != "short" {
		t.Fatalf("the refused PATCH patched Note/p: its text is %.20q…", text)
	}
	patched := make(chan dt.Response, 1)
	chunked := io.MultiReader(strings.NewReader(fmt.Sprintf(`{"text":%q}`, strings.Repeat("z", 500<<10))))
	go func() {
		patched <- doRequest(t, d, rita, "PATCH", "/api/document/admin/wb?id=Note/p", chunked, "application/merge-patch+json")
	}()
	eventually.True(t, 10*time.Second, "sluice_write_bytes_waiting counts the chunked PATCH", func() bool {
		return metric("sluice_write_bytes_waiting") == 1
	})
	select {
	case r := <-patched:
		t.Fatalf("the chunked PATCH was answered while rita's share was held: %d %.300s", r.Status, r.Body)
	default:
	}
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	if r := <-patched; r.Status != 200 {
		t.Fatalf("the chunked PATCH, once the stalled write was written: %d %.300s", r.Status, r.Body)
	}
	if text := textOfP(); text != strings.Repeat("z", 500<<10) {
		t.Fatalf("Note/p's text after the chunked PATCH: %.20q…", text)
	}
	if held := metric("sluice_write_bytes"); held != 0 {
		t.Fatalf("once the writes were answered, sluice_write_bytes is %v, want 0", held)
	}
}

// doRequest sends a request of body (of unknown length, so sent chunked,
// unless it is a *bytes.Reader or *strings.Reader) with Content-Type
// media, for a goroutine of the test: a failure is reported, and answered
// as status 0.
func doRequest(t *testing.T, d *dt.Daemon, auth dt.Auth, method, path string, body io.Reader, media string) dt.Response {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, d.URL+path, body)
	if err != nil {
		t.Error(err)
		return dt.Response{}
	}
	req.Header.Set("Content-Type", media)
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return dt.Response{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read the answer: %v", method, path, err)
	}
	return dt.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// stalledWrite starts a POST of a JSON body to path with credentials
// auth, whose body is what the test writes to the returned pipe; its
// status goes to answer once the test closes the pipe (0 if it failed).
func stalledWrite(t *testing.T, d *dt.Daemon, auth dt.Auth, path string, answer chan<- int) *io.PipeWriter {
	t.Helper()
	body, feed := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+path, body)
	req.Header.Set("Content-Type", "application/json")
	auth(req)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the stalled write: %v", err)
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	return feed
}

// TestPatchIsChargedItsStoredDocument: a patch reads its stored document,
// merges into it, validates the result and writes it whole, so it is
// charged the stored document too, not only its own few bytes (a tiny
// patch of a large document was charged the patch: a user's concurrent
// patches held what their documents made them). rita's share is 1 MiB,
// and Note/big holds 700 KB of text. While a REST write whose body
// stalled holds 600 KB of the share, a REST PATCH setting only its tag
// waits for the share and is answered 429 with Retry-After, naming the
// setting, having patched nothing; a GraphQL Note_update setting the tag
// waits too (sluice_write_bytes_waiting counts it) and is written once
// the stalled body ends; then the budget holds nothing.
func TestPatchIsChargedItsStoredDocument(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String tag: String }")
	d.MustDo(t, 200, rita, "POST", "/api/document/admin/wb",
		fmt.Sprintf(`{"@type":"Note","@id":"big","text":%q}`, strings.Repeat("b", 700<<10)))
	note := bigNote
	metric := metricOf(t, d)
	tagOfBig := func() string {
		var doc struct{ Tag string }
		if err := json.Unmarshal(d.MustDo(t, 200, rita, "GET", "/api/document/admin/wb?id=Note/big", nil).Body, &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Tag
	}

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	r := d.Do(t, rita, "PATCH", "/api/document/admin/wb?id=Note/big", `{"tag":"rest"}`, "Content-Type", "application/merge-patch+json")
	if r.Status != 429 || !strings.Contains(string(r.Body), "write_bytes_per_user") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a PATCH of Note/big (700 KB) beside the held share: %d %.300s (Retry-After %q), want a 429 naming write_bytes_per_user", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if tag := tagOfBig(); tag != "" {
		t.Fatalf("the refused PATCH patched Note/big: its tag is %q", tag)
	}
	mutated := make(chan dt.Response, 1)
	go func() {
		mutated <- doRequest(t, d, rita, "POST", "/api/graphql/admin/wb",
			strings.NewReader(`{"query":"mutation { Note_update(documents: [{_id: \"big\", tag: \"graphql\"}]) }"}`), "application/json")
	}()
	eventually.True(t, 10*time.Second, "sluice_write_bytes_waiting counts the Note_update", func() bool {
		return metric("sluice_write_bytes_waiting") == 1
	})
	select {
	case r := <-mutated:
		t.Fatalf("the Note_update was answered while rita's share was held: %d %.300s", r.Status, r.Body)
	default:
	}
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	if r := <-mutated; r.Status != 200 || bytes.Contains(r.Body, []byte(`"errors"`)) {
		t.Fatalf("the Note_update, once the stalled write was written: %d %.300s", r.Status, r.Body)
	}
	if tag := tagOfBig(); tag != "graphql" {
		t.Fatalf("Note/big's tag after the Note_update: %q", tag)
	}
	d.MustDo(t, 200, rita, "PATCH", "/api/document/admin/wb?id=Note/big", `{"tag":"rest"}`, "Content-Type", "application/merge-patch+json")
	if tag := tagOfBig(); tag != "rest" {
		t.Fatalf("Note/big's tag after a PATCH with the share free: %q", tag)
	}
	if held := metric("sluice_write_bytes"); held != 0 {
		t.Fatalf("once the writes were answered, sluice_write_bytes is %v, want 0", held)
	}
}

// TestReplaceAndDeleteAreChargedTheirStoredDocuments: a replace or a
// delete holds the stored document it replaces or deletes (its change's
// before image) until its commit is sent, so it is charged that
// document too, as a patch is (TestPatchIsChargedItsStoredDocument): a
// tiny PUT or DELETE of a large document was charged a few bytes, and a
// user's concurrent ones held what their documents made them. rita's
// share is 1 MiB; Note/a and Note/b hold 700 KB of text each. While a
// REST write whose body stalled holds 600 KB of the share, a tiny PUT of
// Note/a and a DELETE of Note/b wait for the share and are answered 429
// naming the setting, having written nothing; a GraphQL _deleteDocuments
// of Note/b waits too (sluice_write_bytes_waiting counts it) and is
// written once the stalled body ends; then the budget holds nothing.
func TestReplaceAndDeleteAreChargedTheirStoredDocuments(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String tag: String }")
	big := strings.Repeat("b", 700<<10)
	for _, id := range []string{"a", "b"} {
		d.MustDo(t, 200, rita, "POST", "/api/document/admin/wb", fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, big))
	}
	metric := metricOf(t, d)
	textOf := func(id string) string {
		r := d.Do(t, rita, "GET", "/api/document/admin/wb?id=Note/"+id, nil)
		if r.Status == 404 {
			return "(deleted)"
		}
		var doc struct{ Text string }
		if err := json.Unmarshal(r.Body, &doc); r.Status != 200 || err != nil {
			t.Fatalf("GET Note/%s: %d %.200s", id, r.Status, r.Body)
		}
		return doc.Text
	}

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	if _, err := feed.Write([]byte("[" + bigNote("held") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	refused := make(chan string, 2)
	for _, req := range []struct{ method, path, body string }{
		{"PUT", "/api/document/admin/wb", `{"@type":"Note","@id":"a","text":"small"}`},
		{"DELETE", "/api/document/admin/wb?id=Note/b", ""},
	} {
		go func() {
			r := doRequest(t, d, rita, req.method, req.path, strings.NewReader(req.body), "application/json")
			if r.Status != 429 || !strings.Contains(string(r.Body), "write_bytes_per_user") || r.Header.Get("Retry-After") == "" {
				refused <- fmt.Sprintf("%s %s of a 700 KB document beside the held share: %d %.300s (Retry-After %q), want a 429 naming write_bytes_per_user", req.method, req.path, r.Status, r.Body, r.Header.Get("Retry-After"))
				return
			}
			refused <- ""
		}()
	}
	for range 2 {
		if msg := <-refused; msg != "" {
			t.Error(msg)
		}
	}
	if textOf("a") != big || textOf("b") != big {
		t.Fatal("a refused PUT or DELETE wrote its document")
	}

	deleted := make(chan dt.Response, 1)
	go func() {
		deleted <- doRequest(t, d, rita, "POST", "/api/graphql/admin/wb",
			strings.NewReader(`{"query":"mutation { _deleteDocuments(ids: [\"Note/b\"]) }"}`), "application/json")
	}()
	eventually.True(t, 10*time.Second, "sluice_write_bytes_waiting counts the _deleteDocuments", func() bool {
		return metric("sluice_write_bytes_waiting") == 1
	})
	select {
	case r := <-deleted:
		t.Fatalf("the _deleteDocuments was answered while rita's share was held: %d %.300s", r.Status, r.Body)
	default:
	}
	if _, err := feed.Write([]byte(`{"@type":"Note","@id":"held2"}]`)); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	if r := <-deleted; r.Status != 200 || bytes.Contains(r.Body, []byte(`"errors"`)) {
		t.Fatalf("the _deleteDocuments, once the stalled write was written: %d %.300s", r.Status, r.Body)
	}
	if got := textOf("b"); got != "(deleted)" {
		t.Fatalf("Note/b after the _deleteDocuments: %.20q", got)
	}
	d.MustDo(t, 200, rita, "PUT", "/api/document/admin/wb", `{"@type":"Note","@id":"a","text":"small"}`)
	if got := textOf("a"); got != "small" {
		t.Fatalf("Note/a after a PUT with the share free: %.20q", got)
	}
	if held := metric("sluice_write_bytes"); held != 0 {
		t.Fatalf("once the writes were answered, sluice_write_bytes is %v, want 0", held)
	}
}

// TestGraphQLRefusalCarriesRetryAfter: a GraphQL mutation refused by the
// write budget says when to retry as the REST write refused beside it
// does: the answer (200, its data null: GraphQL over HTTP answers a
// response with data 2xx) carries the REST answer's Retry-After header,
// and its error extensions.retryAfter, the same seconds (it had neither:
// a client had no way to know). While a REST write whose body stalled
// holds 600 KB of rita's 1 MiB share, a REST POST of 600 KB and an
// _insertDocuments of 600 KB both wait for it and are refused; once the
// body ends, a mutation that succeeds carries no Retry-After.
func TestGraphQLRefusalCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	d, rita := ritaWithOneMiB(t, "type Note { text: String }")
	text := strings.Repeat("x", 600<<10)
	note := func(id string) string { return fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, text) }
	metric := metricOf(t, d)
	mutation := func(id string) []byte {
		b, err := json.Marshal(map[string]any{"query": `mutation($d: JSON!) { _insertDocuments(json: $d) }`,
			"variables": map[string]any{"d": []any{map[string]any{"@type": "Note", "@id": id, "text": text}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	rest := make(chan dt.Response, 1)
	go func() {
		rest <- doRequest(t, d, rita, "POST", "/api/document/admin/wb", strings.NewReader(note("r")), "application/json")
	}()
	g := doRequest(t, d, rita, "POST", "/api/graphql/admin/wb", bytes.NewReader(mutation("g")), "application/json")
	r := <-rest
	if r.Status != 429 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the REST write beside the held share: %d %.300s (Retry-After %q), want a 429 with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	var res struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions struct {
				Code       string
				RetryAfter json.Number
			}
		}
	}
	if err := json.Unmarshal(g.Body, &res); err != nil {
		t.Fatalf("the mutation's answer: %v: %s", err, g.Body)
	}
	if g.Status != 200 || string(res.Data) != "null" || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "TOO_MANY_REQUESTS" ||
		!strings.Contains(res.Errors[0].Message, "write_bytes_per_user") {
		t.Fatalf("the mutation beside the held share: %d %.300s, want 200, data null and one TOO_MANY_REQUESTS naming write_bytes_per_user", g.Status, g.Body)
	}
	if got, want := g.Header.Get("Retry-After"), r.Header.Get("Retry-After"); got != want {
		t.Fatalf("the refused mutation's Retry-After is %q, the REST write's %q", got, want)
	}
	if got, want := res.Errors[0].Extensions.RetryAfter.String(), r.Header.Get("Retry-After"); got != want {
		t.Fatalf("the refused mutation's extensions.retryAfter is %q, the REST write's Retry-After %q: %s", got, want, g.Body)
	}
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	g = doRequest(t, d, rita, "POST", "/api/graphql/admin/wb", bytes.NewReader(mutation("g")), "application/json")
	if g.Status != 200 || bytes.Contains(g.Body, []byte(`"errors"`)) || g.Header.Get("Retry-After") != "" {
		t.Fatalf("the mutation once the share is free: %d %.300s (Retry-After %q), want 200 without errors or Retry-After", g.Status, g.Body, g.Header.Get("Retry-After"))
	}
}

// ritaWithOneMiB starts a daemon whose users each have 1 MiB of
// write_bytes (write_bytes_per_user), with database admin/wb of schema
// sdl, and returns it with rita, a user who may write there.
func ritaWithOneMiB(t *testing.T, sdl string) (*dt.Daemon, dt.Auth) {
	t.Helper()
	d := dt.Start(t, func(c *config.Config) { c.WriteBytesPerUser = 1 << 20 })
	d.CreateDatabase(t, "wb", sdl)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wb", `{"user":"rita","role":"write"}`)
	return d, dt.Basic("rita", "rita-password")
}

// bigNote is a Note of 600 KB: more than half of rita's share.
func bigNote(id string) string {
	return fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, strings.Repeat("x", 600<<10))
}

// metricOf returns a function reading the value of a metric of d.
func metricOf(t *testing.T, d *dt.Daemon) func(name string) float64 {
	return func(name string) float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), name)
	}
}
