package daemon_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestPositionsPastACommitsEnd: a position inside a commit past its last
// change (an index of a two-change commit above 1, any index of a schema
// change's commit, which has none, an index of commit 0) names no event:
// as_of, asOf, from, to, before and after (of /api/changes) answer 400
// naming the commit's changes, never the end of the commit. The changes
// themselves and the commits' ends read.
func TestPositionsPastACommitsEnd(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "ends", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ends", `[{"@type":"Person","@id":"a","name":"A"},{"@type":"Person","@id":"b","name":"B"}]`)
	var change struct{ Commit string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/ends", "type Person { name: String! age: Int }").Body, &change); err != nil || change.Commit != "2" {
		t.Fatalf("the schema change's commit: %q %v", change.Commit, err)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ends", `{"@type":"Person","@id":"c","name":"C"}`)
	epoch, _, _ := strings.Cut(dbPosition(t, d, "ends"), "-")

	paths := func(pos string) []string {
		p := url.QueryEscape(pos)
		return []string{
			"/api/document/admin/ends?type=Person&as_of=" + p,
			"/api/document/admin/ends?id=Person/a&as_of=" + p,
			"/api/diff/admin/ends?from=" + p,
			"/api/diff/admin/ends?from=" + epoch + "-0-2147483647&to=" + p,
			"/api/history/admin/ends?id=Person/a&before=" + p,
			"/api/changes/admin/ends?after=" + p,
		}
	}
	for _, c := range []struct{ pos, why string }{
		{epoch + "-1-2", "commit 1 has 2 changes, at indexes 0 to 1 (the position of its end is " + epoch + "-1-2147483647)"},
		{epoch + "-1-5", "commit 1 has 2 changes"},
		{epoch + "-2-0", "commit 2 has no changes (the position of its end is " + epoch + "-2-2147483647)"},
		{epoch + "-2-3", "commit 2 has no changes"},
		{epoch + "-0-0", "commit 0 is none"},
	} {
		want := c.pos + " names no event of admin/ends: " + c.why
		for _, path := range paths(c.pos) {
			r := d.Do(t, dt.Admin(), "GET", path, nil)
			var e struct {
				Message string `json:"api:message"`
			}
			if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != 400 || !strings.Contains(e.Message, want) {
				t.Errorf("%s: %d %s, want 400 %q", path, r.Status, r.Body, want)
			}
		}
		if msg, code := gqlError(t, d, dt.Admin(), "ends", `{ Person(asOf: "`+c.pos+`") { _id } }`); code != "BAD_USER_INPUT" || !strings.Contains(msg, want) {
			t.Errorf("asOf %s: %s %s", c.pos, code, msg)
		}
	}
	for _, pos := range []string{epoch + "-1-0", epoch + "-1-1", epoch + "-1-2147483647", epoch + "-2-2147483647", epoch + "-3-0"} {
		for _, path := range paths(pos) {
			d.MustDo(t, 200, dt.Admin(), "GET", path, nil)
		}
	}
	if got := gqlData(t, d, dt.Admin(), "ends", `{ Person(asOf: "`+epoch+`-1-0") { _id } }`); got != `{"Person":[{"_id":"Person/a"}]}` {
		t.Errorf("as of the first change of commit 1: %s", got)
	}
}

// TestPastVersionWrittenBack: a GraphQL read as of a position answers
// _version "" for a document the API changed since (the log does not
// record the version it had then); sent back as a precondition, that ""
// is refused naming _version, the field the client sent, and nothing is
// written. An insert given a _version is refused naming it too.
func TestPastVersionWrittenBack(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "undo", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/undo", `{"@type":"Person","@id":"a","name":"A"}`)
	p1 := dbPosition(t, d, "undo")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/undo", `{"@type":"Person","@id":"Person/a","name":"B"}`)
	if got := gqlData(t, d, dt.Admin(), "undo", `{ Person(asOf: "`+p1+`") { _version name } }`); got != `{"Person":[{"_version":"","name":"A"}]}` {
		t.Fatalf("as of p1: %s", got)
	}
	commits := logLength(t, d, "undo")
	for _, c := range []struct{ mutation, want string }{
		{`mutation { Person_update(documents: [{_id: "a", _version: "", name: "A"}]) }`,
			`Person_update: the _version of Person/a is "", which is no version: give the _version a read of the document answers now`},
		{`mutation { Person_replace(documents: [{_id: "Person/a", _version: "", name: "A"}]) }`,
			`Person_replace: the _version of Person/a is "", which is no version`},
		{`mutation { Person_insert(documents: [{_id: "c", _version: "1", name: "C"}]) }`,
			`Person_insert: documents[0] gives a _version, but an insert takes no precondition`},
	} {
		msg, code := gqlError(t, d, dt.Admin(), "undo", c.mutation)
		if code != "BAD_USER_INPUT" || !strings.Contains(msg, c.want) || strings.Contains(msg, "@version") {
			t.Errorf("%s: %s %s, want BAD_USER_INPUT %q", c.mutation, code, msg, c.want)
		}
	}
	if n := logLength(t, d, "undo"); n != commits {
		t.Errorf("%d commits, want %d", n, commits)
	}
}
