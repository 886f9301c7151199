package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

type changeJSON struct {
	Position string          `json:"position"`
	ID       string          `json:"id"`
	Op       string          `json:"op"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
}

type commitJSON struct {
	ID           string       `json:"id"`
	ChangesCount int          `json:"changes_count"`
	Changes      []changeJSON `json:"changes"`
}

// changesPage is a page of /api/changes.
type changesPage struct {
	Next     string       `json:"next"`
	More     bool         `json:"more"`
	Position string       `json:"position"`
	Commits  []commitJSON `json:"commits"`
}

// allChanges reads the whole change history of admin/<db>, page by page.
func allChanges(t *testing.T, d *dt.Daemon, db string) []commitJSON {
	t.Helper()
	return allChangesOf(t, d, "admin/"+db)
}

// allChangesOf reads the whole change history of <org>/<db>, page by
// page, joining the parts of a commit that spans pages.
func allChangesOf(t *testing.T, d *dt.Daemon, path string) []commitJSON {
	t.Helper()
	var out []commitJSON
	after := "0"
	for {
		var page changesPage
		r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/"+path+"?limit=1000&after="+after, nil)
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for i, c := range page.Commits {
			if i == 0 && len(out) > 0 && out[len(out)-1].ID == c.ID {
				out[len(out)-1].Changes = append(out[len(out)-1].Changes, c.Changes...)
				continue
			}
			out = append(out, c)
		}
		if !page.More {
			return out
		}
		after = page.Next
	}
}

// TestConcurrentWritersGaplessAndOrdered runs 8 writers that update one
// shared document and one document each. The log must number commits
// 1..N without gaps, and for every document each change's before image must
// be the previous change's after image: the log order is the commit order.
func TestConcurrentWritersGaplessAndOrdered(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "counters", "type Counter { writer: Int! step: Int! }")
	const writers, steps = 8, 40
	var docs bytes.Buffer
	docs.WriteString(`[{"@type":"Counter","@id":"shared","writer":-1,"step":-1}`)
	for w := range writers {
		fmt.Fprintf(&docs, `,{"@type":"Counter","@id":"own%d","writer":%d,"step":-1}`, w, w)
	}
	docs.WriteString("]")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/counters", docs.String())

	var wg sync.WaitGroup
	errs := make(chan error, writers*steps)
	for w := range writers {
		wg.Go(func() {
			for i := range steps {
				id := "shared"
				if i%2 == 1 {
					id = fmt.Sprintf("own%d", w)
				}
				body := fmt.Sprintf(`{"@type":"Counter","@id":"%s","writer":%d,"step":%d}`, id, w, i)
				if r := d.Do(t, dt.Admin(), "PUT", "/api/document/admin/counters", body); r.Status != 200 {
					errs <- fmt.Errorf("writer %d step %d: %d %s", w, i, r.Status, r.Body)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	commits := allChanges(t, d, "counters")
	if len(commits) != 1+writers*steps {
		t.Fatalf("%d commits, want %d", len(commits), 1+writers*steps)
	}
	last := map[string]string{}
	for i, c := range commits {
		if c.ID != fmt.Sprint(i+1) {
			t.Fatalf("commit %d has id %s: the sequence has a gap or is out of order", i+1, c.ID)
		}
		for _, ch := range c.Changes {
			if prev, ok := last[ch.ID]; ok && prev != string(ch.Before) {
				t.Fatalf("commit %s: %s before image %s, but the previous change left %s", c.ID, ch.ID, ch.Before, prev)
			}
			last[ch.ID] = string(ch.After)
		}
	}
}

// TestBulkCommitsReadBackInOrder writes requests larger than one chunk of
// 1,000 documents (stored as one batch of changes per chunk): two classes
// interleaved, then a replace with create=true that updates some documents
// and inserts others across the chunk boundary. Every change comes back in
// request order with its op and images.
func TestBulkCommitsReadBackInOrder(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "bulk", "type Item { n: Int! } type Tag { name: String! }")
	const n = 2500
	doc := func(i, v int) string {
		if i%3 == 0 {
			return fmt.Sprintf(`{"@id":"Tag/t%d","@type":"Tag","name":"v%d"}`, i, v)
		}
		return fmt.Sprintf(`{"@id":"Item/i%d","@type":"Item","n":%d}`, i, v)
	}
	var body strings.Builder
	for i := range n {
		body.WriteString(doc(i, 0) + "\n")
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bulk", body.String(), "Content-Type", "application/x-ndjson")
	// Replace documents 1500..3999: the first 1,000 exist, the rest are new.
	body.Reset()
	for i := 1500; i < 1500+n; i++ {
		body.WriteString(doc(i, 1) + "\n")
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/bulk?create=true", body.String(), "Content-Type", "application/x-ndjson")

	commits := allChanges(t, d, "bulk")
	if len(commits) != 2 || len(commits[0].Changes) != n || len(commits[1].Changes) != n {
		t.Fatalf("got %d commits", len(commits))
	}
	for k, ch := range commits[0].Changes {
		if ch.Op != "added" || string(ch.Before) != "null" || string(ch.After) != doc(k, 0) {
			t.Fatalf("insert change %d: %+v", k, ch)
		}
	}
	for k, ch := range commits[1].Changes {
		i := 1500 + k
		want := changeJSON{Op: "added", Before: json.RawMessage("null"), After: json.RawMessage(doc(i, 1))}
		if i < n {
			want.Op, want.Before = "updated", json.RawMessage(doc(i, 0))
		}
		if ch.Op != want.Op || string(ch.Before) != string(want.Before) || string(ch.After) != string(want.After) {
			t.Fatalf("replace change %d: %+v, want %+v", k, ch, want)
		}
	}
}

// TestLargeImagesReadBack writes a request whose change images (3 MB)
// exceed what a Writer holds back before sending, so its change rows go
// out in several batches; every change reads back in order.
func TestLargeImagesReadBack(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "big", "type Blob { text: String! }")
	text := strings.Repeat("x", 8000)
	var body strings.Builder
	for i := range 400 {
		fmt.Fprintf(&body, `{"@id":"Blob/b%d","@type":"Blob","text":"%s%d"}`+"\n", i, text, i)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", body.String(), "Content-Type", "application/x-ndjson")
	commits := allChanges(t, d, "big")
	if len(commits) != 1 || len(commits[0].Changes) != 400 {
		t.Fatalf("got %d commits", len(commits))
	}
	for i, ch := range commits[0].Changes {
		want := fmt.Sprintf(`{"@id":"Blob/b%d","@type":"Blob","text":"%s%d"}`, i, text, i)
		if ch.ID != fmt.Sprintf("Blob/b%d", i) || string(ch.After) != want {
			t.Fatalf("change %d: %s", i, ch.ID)
		}
	}
}

// TestFailedRequestLeavesNoTrace fails a bulk insert after its first chunk
// of 1,000 documents was already sent to Postgres.
func TestFailedRequestLeavesNoTrace(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "bulk", "type Item { n: Int! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bulk", `{"@type":"Item","@id":"taken","n":0}`)

	var body strings.Builder
	for i := range 1500 {
		id := fmt.Sprintf("i%d", i)
		if i == 1200 {
			id = "taken"
		}
		fmt.Fprintf(&body, "{\"@type\":\"Item\",\"@id\":\"%s\",\"n\":%d}\n", id, i)
	}
	r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/bulk", body.String(), "Content-Type", "application/x-ndjson")
	if r.Status != 409 || !strings.Contains(string(r.Body), "Item/taken already exists") {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	// The same with the duplicate among the documents read before the
	// request was known to be large (written while the rest is read).
	early := strings.Replace(body.String(), `"@id":"taken","n":1200`, `"@id":"i1200","n":1200`, 1)
	early = strings.Replace(early, `"@id":"i50","n":50`, `"@id":"taken","n":50`, 1)
	r = d.Do(t, dt.Admin(), "POST", "/api/document/admin/bulk", early, "Content-Type", "application/x-ndjson")
	if r.Status != 409 || !strings.Contains(string(r.Body), "Item/taken already exists") {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	// The same with a validation error late in the stream.
	bad := strings.Replace(body.String(), `"@id":"taken","n":1200`, `"@id":"i1200","n":"x"`, 1)
	r = d.Do(t, dt.Admin(), "POST", "/api/document/admin/bulk", bad, "Content-Type", "application/x-ndjson")
	if r.Status != 400 || !strings.Contains(string(r.Body), `document 1200 (i1200, line 1201): Item: field \"n\"`) {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	// And with a document that is not valid JSON, whose braces and
	// quotes still balance.
	broken := strings.Replace(body.String(), `"@id":"taken","n":1200}`, `"@id":"i1200","n":1200,}`, 1)
	r = d.Do(t, dt.Admin(), "POST", "/api/document/admin/bulk", broken, "Content-Type", "application/x-ndjson")
	if r.Status != 400 || !strings.Contains(string(r.Body), `document 1200 (line 1201): invalid JSON: an unexpected character '}' at byte `) {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	commits := allChanges(t, d, "bulk")
	if len(commits) != 1 {
		t.Fatalf("%d commits after failed requests, want 1", len(commits))
	}
	list := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/bulk", nil)
	if n := strings.Count(string(list.Body), "\n"); n != 1 {
		t.Fatalf("%d documents after failed requests, want 1", n)
	}
	// The next commit gets the next number: the failures used none.
	r = d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bulk", `{"@type":"Item","n":1}`)
	if !strings.Contains(string(r.Body), `"commit":"2"`) {
		t.Fatalf("next commit: %s", r.Body)
	}
}

// TestGroupCommitIsolatesFailures sends concurrent single-document inserts
// where every third one collides with an existing id. The collisions fail
// alone (409); every other insert commits, each as its own commit, and the
// sequence stays gapless.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "group", "type Item { n: Int! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/group", `{"@type":"Item","@id":"taken","n":0}`)
	const clients, each = 8, 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, conflicts := 0, 0
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("c%d-%d", c, i)
				if i%3 == 0 {
					id = "taken"
				}
				r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/group", fmt.Sprintf(`{"@type":"Item","@id":"%s","n":%d}`, id, i))
				mu.Lock()
				switch r.Status {
				case 200:
					ok++
				case 409:
					conflicts++
				default:
					t.Errorf("insert %s: %d %s", id, r.Status, r.Body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if conflicts != clients*each/3 || ok != clients*each-conflicts {
		t.Fatalf("%d ok, %d conflicts", ok, conflicts)
	}
	commits := allChanges(t, d, "group")
	if len(commits) != 1+ok {
		t.Fatalf("%d commits, want %d", len(commits), 1+ok)
	}
	for i, c := range commits {
		if c.ID != fmt.Sprint(i+1) || len(c.Changes) != 1 {
			t.Fatalf("commit %d: id %s with %d changes", i+1, c.ID, len(c.Changes))
		}
	}
}

// TestBulkInsertAllTypesReadsBack writes the same documents, with a field
// of every kind, once as one large insert (whose rows Sluice encodes for
// COPY itself) and once one request per document (rows encoded by pgx),
// into two databases, and checks that both read back identically and as
// the change feed's after images say (whose ids, for insertions, are read
// from the images: migration 4).
func TestBulkInsertAllTypesReadsBack(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const sdl = `enum Color { RED GREEN }
		type Address @subdocument { city: String! }
		type Thing { s: String i: Int f: Float b: Boolean id: ID at: DateTime big: BigInt
			js: JSON color: Color other: Thing tags: [String!] addr: Address }`
	d.CreateDatabase(t, "bulk", sdl)
	d.CreateDatabase(t, "single", sdl)
	const n = 300 // more than a first chunk and a chunk
	docs := make([]string, n)
	for k := range n {
		id := fmt.Sprintf("Thing/t%03d", k)
		if k%10 == 0 {
			id += `"<&>\é` // escaped in JSON, or not by encoding/json
		}
		doc := map[string]any{"@type": "Thing", "@id": id}
		// Every field is missing or null in some documents.
		set := func(field string, v any) {
			switch k % 7 {
			case len(field) % 7:
				return
			case (len(field) + 1) % 7:
				doc[field] = nil
			default:
				doc[field] = v
			}
		}
		set("s", fmt.Sprintf("é \u2028 \"%d\" 💧", k))
		set("i", []int64{0, 1, -1, 2147483647, -2147483648}[k%5])
		set("f", []float64{0, -0.5, 1e300, 5e-324, 3.14159, float64(k)}[k%6])
		set("b", k%2 == 0)
		set("id", fmt.Sprintf("key-%d", k))
		set("at", []string{"2024-02-29T12:00:00.123456+02:00", "1970-01-01T00:00:00Z", "2000-01-01T00:00:00.5Z"}[k%3])
		set("big", []string{"0", "-1", "123456789012345678901234567890"}[k%3])
		set("js", map[string]any{"k": k, "nested": []any{1, "two", nil, true}})
		set("color", []string{"RED", "GREEN"}[k%2])
		set("other", fmt.Sprintf("Thing/t%03d", (k+1)%n))
		set("tags", []string{"a", fmt.Sprint(k)})
		set("addr", map[string]any{"city": fmt.Sprintf("c%d", k)})
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		docs[k] = string(b)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bulk", "["+strings.Join(docs, ",")+"]")
	for _, doc := range docs {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/single", doc)
	}
	read := func(db string) []json.RawMessage {
		var out []json.RawMessage
		r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?type=Thing&as_list=true", nil)
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	bulk, single := read("bulk"), read("single")
	if len(bulk) != n || len(single) != n {
		t.Fatalf("read %d and %d documents, want %d", len(bulk), len(single), n)
	}
	after := map[string]string{}
	for _, ch := range allChanges(t, d, "bulk")[0].Changes {
		if ch.Op != "added" || string(ch.Before) != "null" {
			t.Fatalf("change %+v", ch)
		}
		after[ch.ID] = string(ch.After)
	}
	if len(after) != n {
		t.Fatalf("%d changes name distinct documents, want %d", len(after), n)
	}
	for k := range n {
		if withoutVersion(string(bulk[k])) != withoutVersion(string(single[k])) {
			t.Fatalf("document %d reads back differently:\nbulk   %s\nsingle %s", k, bulk[k], single[k])
		}
		var id struct {
			ID string `json:"@id"`
		}
		if err := json.Unmarshal(bulk[k], &id); err != nil {
			t.Fatal(err)
		}
		if after[id.ID] != withoutVersion(string(bulk[k])) {
			t.Fatalf("document %s: after image %s, reads back %s", id.ID, after[id.ID], bulk[k])
		}
	}
}

// TestConcurrentUpsertsOfANewDocument: two requests, to two daemons on one
// database, upsert (PUT ?create=true) the same new document at once, over
// and over. Both succeed: one creates the document and the other then
// updates it, whichever found it missing first.
func TestConcurrentUpsertsOfANewDocument(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t)
	d1.CreateDatabase(t, "upserts", "type Note { by: Int! }")
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	const rounds = 40
	for i := range rounds {
		var wg sync.WaitGroup
		got := make([]dt.Response, 2)
		start := make(chan struct{})
		for w, d := range []*dt.Daemon{d1, d2} {
			wg.Go(func() {
				<-start
				got[w] = d.Do(t, dt.Admin(), "PUT", "/api/document/admin/upserts?create=true", fmt.Sprintf(`{"@type":"Note","@id":"n%d","by":%d}`, i, w))
			})
		}
		close(start)
		wg.Wait()
		for w, r := range got {
			if r.Status != 200 {
				t.Fatalf("round %d, writer %d: %d %s", i, w, r.Status, r.Body)
			}
		}
	}
	ops := map[string][]string{}
	for _, c := range allChanges(t, d1, "upserts") {
		for _, ch := range c.Changes {
			ops[ch.ID] = append(ops[ch.ID], ch.Op)
		}
	}
	for i := range rounds {
		id := fmt.Sprintf("Note/n%d", i)
		if got := strings.Join(ops[id], ","); got != "added,updated" {
			t.Fatalf("%s: changes %s, want added,updated", id, got)
		}
	}
}
