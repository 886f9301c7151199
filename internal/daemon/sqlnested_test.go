package daemon_test

import (
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSQLChangesOfADocumentStayInOrder: the capture triggers log a
// statement's changes when it ends, and a statement run inside it (by a
// function it calls, which any role may create in pg_temp) ends first. A
// document the outer statement changed and the inner one changed again
// had the inner change logged first: replaying the log gave the outer
// statement's row while the table held the inner one's, and every stream
// showed that state. Such a write now fails, naming the document, for an
// UPDATE whose row the inner statement changed again or deleted, an
// INSERT whose row it deleted and a DELETE whose document it inserted
// again (and a data-modifying WITH doing the same in one statement);
// nothing of it is logged or kept. Inner statements that change other
// documents are logged as before.
func TestSQLChangesOfADocumentStayInOrder(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nest", "type Note { text: String }")
	w := newSQLWriter(t, d, "nest")
	tbl := w.table("Note")
	sqlExec(t, w.url, "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/a', 'a'), ('Note/b', 'b')")
	fn := func(body string) string {
		return "CREATE FUNCTION pg_temp.inner_write() RETURNS text LANGUAGE sql AS $$ " + body + "; SELECT 'by the outer statement' $$"
	}
	before := logLength(t, d, "nest")
	for _, c := range []struct {
		what  string
		stmts []string
		want  string
	}{
		{"an UPDATE changed again inside it", []string{
			fn("UPDATE " + tbl + " SET text = 'by the inner statement' WHERE _id = 'Note/a'"),
			"UPDATE " + tbl + " SET text = CASE WHEN _id = 'Note/a' THEN 'outer' ELSE pg_temp.inner_write() END",
		}, "document Note/a: changed again"},
		{"an UPDATE deleted inside it", []string{
			fn("DELETE FROM " + tbl + " WHERE _id = 'Note/a'"),
			"UPDATE " + tbl + " SET text = CASE WHEN _id = 'Note/a' THEN 'outer' ELSE pg_temp.inner_write() END",
		}, "document Note/a: changed again"},
		{"an INSERT deleted inside it", []string{
			fn("DELETE FROM " + tbl + " WHERE _id = 'Note/c'"),
			"INSERT INTO " + tbl + " (_id, text) SELECT x, CASE WHEN x = 'Note/c' THEN 'c' ELSE pg_temp.inner_write() END FROM (VALUES ('Note/c'), ('Note/d')) v(x)",
		}, "document Note/c: changed again"},
		{"a DELETE inserted again inside it", []string{
			fn("INSERT INTO " + tbl + " (_id, text) VALUES ('Note/a', 'again')"),
			"DELETE FROM " + tbl + " WHERE _id = 'Note/a' OR (_id = 'Note/b' AND pg_temp.inner_write() IS NOT NULL)",
		}, "document Note/a: written again"},
		{"a DELETE and an INSERT of one id in one statement", []string{
			"WITH gone AS (DELETE FROM " + tbl + " WHERE _id = 'Note/a' RETURNING _id) INSERT INTO " + tbl + " (_id, text) SELECT _id, 'again' FROM gone",
		}, "document Note/a: written again"},
	} {
		err := sqlTx(w.url, c.stmts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.what, err, c.want)
		}
		checkLogMatchesTables(t, d, "nest", "Note")
	}
	if n := logLength(t, d, "nest"); n != before {
		t.Fatalf("refused writes made %d commits", n-before)
	}
	// An inner statement changing another document is logged, before the
	// outer statement's changes.
	sqlExec(t, w.url, fn("INSERT INTO "+tbl+" (_id, text) VALUES ('Note/z', 'inner')"),
		"UPDATE "+tbl+" SET text = CASE WHEN _id = 'Note/a' THEN 'outer' ELSE pg_temp.inner_write() END")
	checkLogMatchesTables(t, d, "nest", "Note")
	checkBeforeImages(t, d, "nest")
	checkCaptureConsistent(t, d.DatabaseURL)
	if got := tableState(t, d, "nest", "Note"); len(got) != 3 || !strings.Contains(got["Note/z"], "inner") || !strings.Contains(got["Note/a"], `"outer"`) {
		t.Fatalf("the table after the accepted write: %v", got)
	}
}
