package daemon_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLoggedNumbersAreRead: the numbers of a JSON value answer in the
// log's images (/api/history, /api/changes, /api/diff) as reads of the
// document answer them, in the plain decimal form Postgres stores them in
// (1E2 is 100, 1.0e-2 is 0.010, -0.0 is 0.0), at any depth, in a list of
// JSON and in a subdocument. Before, the images kept them as sent. A
// number whose plain form is much longer than written is refused.
func TestLoggedNumbersAreRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nums", `type Sub @subdocument { f: Float j: JSON } type N { f: Float fs: [Float!] j: JSON js: [JSON!] b: BigInt s: Sub }`)
	from := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nums", `{"@type":"N","@id":"N/z"}`).Header.Get("Sluice-Position")
	doc := `{"@type":"N","@id":"N/a","f":1e-7,"fs":[1e-7,1E2,2.50],"j":{"x":[1E2,1.50,1e-3,-0,-0.0,-1e-2,1.0e-2,123.456e1,0e5,6.02214076e23,-1e-30],"y":[0,-0.00,0e5,0.00e1,0e-3,1e+2,-1.50,100e-2,1.00e2,123.456e-1,12e-1,0.012e2,0.0012e1,5e-05,1.2345675e+06]},"js":[1E2,{"a":1e1}],"b":"100","s":{"f":1E2,"j":[1E2,2.50e-1]}}`
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nums", doc)

	var read map[string]json.RawMessage
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/nums?id=N/a", nil).Body, &read); err != nil {
		t.Fatal(err)
	}
	delete(read, "@version")
	want, _ := json.Marshal(read)
	if !bytes.Contains(want, []byte(`"x":[100,1.50,0.001,0,0.0,-0.01,0.010,1234.56,0,602214076000000000000000,-0.000000000000000000000000000001],"y":[0,0.00,0,0.0,0.000,100,-1.50,1.00,100,12.3456,1.2,1.2,0.012,0.00005,1234567.5]`)) {
		t.Fatalf("a read of the document: %s", want)
	}
	same := func(where string, got json.RawMessage) {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatalf("%s: %v: %s", where, err, got)
		}
		if b, _ := json.Marshal(m); !bytes.Equal(b, want) {
			t.Errorf("%s: %s\nwant, as reads answer it, %s", where, b, want)
		}
	}

	var versions []struct{ Document json.RawMessage }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/nums?id=N/a", nil).Body, &versions); err != nil || len(versions) != 1 {
		t.Fatalf("history: %v %d versions", err, len(versions))
	}
	same("/api/history", versions[0].Document)

	var changes struct {
		Commits []struct {
			Changes []struct{ After json.RawMessage }
		}
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/nums?after="+url.QueryEscape(from), nil).Body, &changes); err != nil || len(changes.Commits) != 1 {
		t.Fatalf("changes: %v %+v", err, changes)
	}
	same("/api/changes", changes.Commits[0].Changes[0].After)

	var diff struct {
		Changes []struct{ After json.RawMessage }
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/nums?from="+url.QueryEscape(from), nil).Body, &diff); err != nil || len(diff.Changes) != 1 {
		t.Fatalf("diff: %v %+v", err, diff)
	}
	same("/api/diff", diff.Changes[0].After)

	// A patch's numbers too.
	d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/nums?id=N/a", `{"js":[2.5E1]}`, "Content-Type", "application/merge-patch+json")
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/nums?id=N/a", nil).Body, &read); err != nil {
		t.Fatal(err)
	}
	delete(read, "@version")
	want, _ = json.Marshal(read)
	if !bytes.Contains(want, []byte(`"js":[25]`)) {
		t.Fatalf("a read of the patched document: %s", want)
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/nums?id=N/a", nil).Body, &versions); err != nil || len(versions) != 2 {
		t.Fatalf("history: %v %d versions", err, len(versions))
	}
	same("/api/history after a patch", versions[0].Document)

	// 1e100 is 101 characters in plain form, more than 64 longer than
	// written: the image keeps it as written; a read answers it plain.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nums", `{"@type":"N","@id":"N/big","j":[1e100,1E2]}`)
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/nums?id=N/big", nil).Body); !strings.Contains(got, `"j":[1`+strings.Repeat("0", 100)+`,100]`) {
		t.Errorf("a read of 1e100: %s", got)
	}
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/nums?id=N/big", nil).Body); !strings.Contains(got, `"j":[1e100,100]`) {
		t.Errorf("the history of 1e100: %s", got)
	}
}

// TestNumbersThatReadLongAreRefused: a write whose JSON numbers would read
// back more than 16 MiB longer than written (1e131000 is 131,001 digits
// once Postgres prints it) is refused naming the field, by REST's POST and
// merge patch and by GraphQL's update alike, and writes nothing. Before, a
// 9 KB POST made a document that every read answered as 131 MB.
func TestNumbersThatReadLongAreRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "longnums", `type N { name: String j: JSON }`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/longnums", `{"@type":"N","@id":"a","name":"a","j":[1e131000]}`)
	commits := logLength(t, d, "longnums")
	huge := "[" + strings.TrimSuffix(strings.Repeat("1e131000,", 129), ",") + "]" // 129 × 130,993 bytes
	const want = `field "j": with the JSON values before it, the document's JSON numbers are more than 16777216 bytes longer in plain decimal form`
	for _, r := range []dt.Response{
		d.Do(t, dt.Admin(), "POST", "/api/document/admin/longnums", `{"@type":"N","@id":"b","j":`+huge+`}`),
		d.Do(t, dt.Admin(), "PATCH", "/api/document/admin/longnums?id=N/a", `{"j":`+huge+`}`, "Content-Type", "application/merge-patch+json"),
	} {
		if typ, msg := errBody(t, r); r.Status != 400 || typ != "api:BadRequest" || !strings.Contains(msg, want) {
			t.Errorf("%d %s %s, want 400 saying %q", r.Status, typ, msg, want)
		}
	}
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/longnums",
		`{"query":"mutation($j: JSON) { N_update(documents: [{_id: \"a\", j: $j}]) }","variables":{"j":`+huge+`}}`, "Content-Type", "application/json")
	var res struct {
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	if err := json.Unmarshal(r.Body, &res); err != nil || len(res.Errors) != 1 ||
		res.Errors[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(res.Errors[0].Message, want) {
		t.Errorf("GraphQL update: %s, want BAD_USER_INPUT saying %q", r.Body, want)
	}
	if n := logLength(t, d, "longnums"); n != commits {
		t.Errorf("the log holds %d commits, %d before the refused writes", n, commits)
	}
}
