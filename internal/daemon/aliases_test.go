package daemon_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// aliasSDL has a field named like every table alias, column alias and CTE
// Sluice's SQL uses (t, u, c, s, x, p, k, n, j, cls, uid, the numbered
// ones of unions and filters…): a column of the same name takes
// precedence over an alias in Postgres, so SQL that names a row by a
// bare alias (to_jsonb(t)) or joins its own columns with a row's would
// read the field instead. N is a parent (an interface with documents of
// its own) so that queries of it read a union of tables; t is JSON so
// that a document could hold what would pass for a whole row.
const aliasSDL = `interface N @concrete {
  t: JSON u: String c: String s: String x: String p: String r: String j: String
  cls: String uid: String id: String lk: String o0: String o1: String t0: String t1: String
  r1: String r2: String e1: String e2: String img: String ch: String a: String past: String
  author: String message: String committed_at: String
  k: Int n: Int v: Int seq: Int
  secret: String @private
  ref: N refs: [N!] tags: [String!]
}
type M implements N { w: String }`

// TestFieldsNamedLikeSQLAliases: documents of classes whose fields are
// named like Sluice's SQL aliases read, write, stream and replay as any
// other, through REST, GraphQL and SQL; and a JSON field shaped like a
// row (its _id, _commit_uid and fields) is a value, never the row: it
// forges neither the document read, nor its version, nor the log.
func TestFieldsNamedLikeSQLAliases(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "aliases", aliasSDL)
	const docs = "/api/document/admin/aliases"
	forged := `{"_id":"N/a","_commit_uid":1,"v":999,"secret":"forged","u":"forged"}`
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[
		{"@type":"N","@id":"N/a","t":`+forged+`,"u":"ua","c":"c","s":"s","x":"x","p":"p","r":"r","j":"j","cls":"cls","uid":"uid","id":"id",
		 "lk":"lk","o0":"o0","o1":"o1","t0":"t0","t1":"t1","r1":"r1","r2":"r2","e1":"e1","e2":"e2","img":"img","ch":"ch","a":"a","past":"past",
		 "author":"au","message":"me","committed_at":"ca","k":1,"n":2,"v":1,"seq":3,"secret":"S","tags":["x"]},
		{"@type":"M","@id":"M/b","u":"ub","c":"b","v":2,"ref":"N/a","refs":["N/a"],"w":"w"}]`)

	// REST reads: one document (its ETag is its version, not the
	// forged _commit_uid's), the listing, and as of a position.
	doc, tag := docOf(t, d, "aliases", "N/a")
	if doc["v"] != 1.0 || doc["secret"] != "S" || doc["u"] != "ua" {
		t.Fatalf("N/a reads %v", doc)
	}
	if tag == `"1"` {
		t.Fatalf("N/a's version is the forged _commit_uid's: %s", tag)
	}
	if got, _ := json.Marshal(doc["t"]); !sameJSON(t, got, []byte(forged)) {
		t.Fatalf("field t reads %s, want %s", got, forged)
	}
	r := d.MustDo(t, 200, dt.Admin(), "GET", docs+"?type=N", nil)
	if n := strings.Count(string(r.Body), `"@id"`); n != 2 {
		t.Fatalf("GET ?type=N lists %d documents: %s", n, r.Body)
	}
	pos := r.Header.Get("Sluice-Position")
	d.MustDo(t, 200, dt.Admin(), "GET", docs+"?type=N&as_of="+url.QueryEscape(pos), nil)
	d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=N/a&as_of="+url.QueryEscape(pos), nil)

	// Writes: PUT, PATCH with If-Match, GraphQL update, DELETE; the
	// forged version does not hold, the real one does.
	d.MustDo(t, 412, dt.Admin(), "PATCH", docs+"?id=N/a", `{"u":"u2"}`, "Content-Type", "application/merge-patch+json", "If-Match", `"1"`)
	d.MustDo(t, 200, dt.Admin(), "PATCH", docs+"?id=N/a", `{"u":"u2"}`, "Content-Type", "application/merge-patch+json", "If-Match", tag)
	doc, tag = docOf(t, d, "aliases", "N/a")
	doc["c"] = "c2"
	delete(doc, "@version")
	body, _ := json.Marshal(doc)
	d.MustDo(t, 200, dt.Admin(), "PUT", docs, body, "If-Match", tag)
	gqlData(t, d, dt.Admin(), "aliases", `mutation { N_update(documents: [{_id: "N/a", s: "s2", t: {_id: "N/a", v: 5}}]) }`)
	if doc, _ := docOf(t, d, "aliases", "N/a"); doc["secret"] != "S" || doc["v"] != 1.0 || doc["c"] != "c2" || doc["s"] != "s2" || doc["u"] != "u2" {
		t.Fatalf("after the writes N/a reads %v", doc)
	}

	// GraphQL reads: whole documents, a projection, a union of both
	// classes with a filter through a reference and a list, an order,
	// backlinks, aggregates, and as of a position.
	for _, q := range []string{
		`{ N(orderBy: {c: DESC}) { _id t u c s x p r j cls uid id lk o0 o1 t0 t1 r1 r2 e1 e2 img ch a past author message committed_at k n v seq secret tags _CommitMetadata { _id } } }`,
		`{ N(filter: {u: {eq: "ub"}}) { _id u } }`,
		`{ N(filter: {ref: {u: {eq: "u2"}}, refs: {someHave: {c: {eq: "c2"}}}}, orderBy: {v: ASC, u: DESC}, limit: 5) { _id v } }`,
		`{ M(filter: {ref: {c: {eq: "c2"}}}) { _id ref { _id t } } }`,
		`{ N(id: "N/a") { _id _ref_of_N { _id } _refs_of_N(orderBy: {u: ASC}) { _id u } _ref_of_M { _id } } }`,
		`{ N_aggregate(filter: {v: {ge: 1}}) { count min { v u } max { seq } sum { v } avg { v } } }`,
		`{ N(asOf: "` + pos + `", orderBy: {c: ASC}) { _id t u c v } M(asOf: "` + pos + `", filter: {ref: {u: {eq: "ua"}}}) { _id } }`,
	} {
		data := gqlData(t, d, dt.Admin(), "aliases", q)
		if !strings.Contains(data, `"N/a"`) && !strings.Contains(data, `"M/b"`) && !strings.Contains(data, `"count"`) {
			t.Errorf("%s: %s", q, data)
		}
	}
	past := gqlData(t, d, dt.Admin(), "aliases", `{ N(asOf: "`+pos+`", id: "N/a") { u c s } }`)
	if past != `{"N":[{"u":"ua","c":"c","s":"s"}]}` {
		t.Errorf("N/a as of %s: %s", pos, past)
	}

	// SQL writes of such a table join the log like any, TRUNCATE
	// included, and the log replays to the tables.
	w := newSQLWriter(t, d, "aliases")
	sqlExec(t, w.url,
		"INSERT INTO "+w.table("N")+` (_id, t, u, c, v) VALUES ('N/sql', '{"_id":"N/sql","v":7}', 'us', 'cs', 3)`,
		"UPDATE "+w.table("N")+" SET u = 'us2', t = NULL WHERE _id = 'N/sql'")
	checkLogMatchesTables(t, d, "aliases", "N")
	sqlExec(t, w.url, "TRUNCATE "+w.table("M"), "DELETE FROM "+w.table("N")+" WHERE _id = 'N/sql'")
	checkLogMatchesTables(t, d, "aliases", "N")
	d.MustDo(t, 200, dt.Admin(), "DELETE", docs+"?id=N/a", nil)
	if n := strings.Count(string(d.MustDo(t, 200, dt.Admin(), "GET", docs+"?type=N", nil).Body), `"@id"`); n != 0 {
		t.Fatalf("documents left after the deletes: %d", n)
	}
	checkLogMatchesTables(t, d, "aliases", "N")
}
