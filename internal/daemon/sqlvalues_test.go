package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

const valuesSDL = `type V { f: Float d: DateTime b: BigInt fs: [Float!] ds: [DateTime!] bs: [BigInt!] is: [Int!] ss: [String!] ok: String }`

// TestSQLWritesOfValuesTheAPICannotRead: Postgres stores values that
// JSON, and so the API and the log's images, cannot: a Float NaN or
// infinity, an infinite DateTime or one outside years 1 to 9999, a NaN,
// infinite or fractional BigInt, list elements that are null or of
// another type. A SQL write of one is refused with an error naming the
// field, on INSERT and UPDATE, and writes nothing; the same values in
// range are written. And a row that holds one all the same (written
// before such writes were refused) does not fail the reads of its class:
// the value is left out of the document, the other fields and documents
// read, aggregates answer, and the document can be changed.
func TestSQLWritesOfValuesTheAPICannotRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "vals", valuesSDL)
	w := newSQLWriter(t, d, "vals")
	tbl := w.table("V")
	sqlExec(t, w.url, "INSERT INTO "+tbl+` (_id, f, d, b, fs, ds, bs, "is", ss, ok) VALUES ('V/good', 1.5, '2024-08-01T16:00:00Z', 12345678901234567890,
		'[1.5, 2]', '["2024-08-01T16:00:00Z"]', '["123", 4]', '[1, -2147483648]', '["a"]', 'yes')`)
	before := logLength(t, d, "vals")
	for _, c := range []struct{ set, field string }{
		{"f = 'NaN'", "V.f is a Float"},
		{"f = 'Infinity'", "V.f is a Float"},
		{"f = '-Infinity'", "V.f is a Float"},
		{"d = 'infinity'", "V.d is a DateTime"},
		{"d = '-infinity'", "V.d is a DateTime"},
		{"d = '10000-01-01T00:00:00Z'", "V.d is a DateTime"},
		{"d = '0001-01-01T00:00:00Z'::timestamptz - interval '1 second'", "V.d is a DateTime"},
		{"b = 'NaN'", "V.b is a BigInt"},
		{"b = 'Infinity'", "V.b is a BigInt"},
		{"b = 1.5", "V.b is a BigInt"},
		{"b = 2.0", "V.b is a BigInt"},
		{`fs = '[1, null]'`, "V.fs holds null"},
		{`fs = '["NaN"]'`, `V.fs holds "NaN"`},
		{`ds = '["infinity"]'`, `V.ds holds "infinity"`},
		{`ds = '["10000-01-01T00:00:00Z"]'`, "V.ds holds"},
		{`ds = '[20240801]'`, "V.ds holds"},
		{`bs = '["1.5"]'`, "V.bs holds"},
		{`"is" = '[1.5]'`, "V.is holds"},
		{`"is" = '[2147483648]'`, "V.is holds"},
		{`"is" = '["1"]'`, "V.is holds"},
		{`ss = '[1]'`, "V.ss holds"},
		// As the API writes them: RFC 3339 times, BigInts without
		// leading zeros, no deeper than 512 levels.
		{`ds = '["2020-01-01"]'`, "V.ds holds"},
		{`ds = '["2020-01-01 10:00:00 America/New_York"]'`, "V.ds holds"},
		{`ds = '["2020-01-01T10:00:00"]'`, "V.ds holds"},
		// Times Postgres reads and the API does not (hour 24, second
		// 60), and ones its cast raised on, naming no field.
		{`ds = '["2020-01-01T24:00:00Z"]'`, "V.ds holds"},
		{`ds = '["2020-01-01T23:59:60Z"]'`, "V.ds holds"},
		{`ds = '["2021-02-29T00:00:00Z"]'`, "V.ds holds"},
		{`ds = '["2021-13-01T00:00:00Z"]'`, "V.ds holds"},
		{`ds = '["2020-01-01T10:00:00+99:00"]'`, "V.ds holds"},
		{`ds = '["0000-01-01T00:00:00Z"]'`, "V.ds holds"},
		{`bs = '["-0001"]'`, "V.bs holds"},
		{`bs = '["1` + strings.Repeat("0", 131072) + `"]'`, "V.bs holds"}, // 131,073 digits: one past the API's
		{`fs = '` + strings.Repeat("[", 512) + "1" + strings.Repeat("]", 512) + `'`, "nests objects and arrays deeper than 512 levels"},
	} {
		col, val, _ := strings.Cut(c.set, " = ")
		insert := "INSERT INTO " + tbl + " (_id, " + col + ") VALUES ('V/bad', " + val + ")"
		update := "UPDATE " + tbl + " SET " + c.set + " WHERE _id = 'V/good'"
		for _, stmt := range []string{insert, update} {
			err := sqlTx(w.url, stmt)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%s: %v, want an error naming %s", stmt, err, c.field)
			}
		}
	}
	if n := logLength(t, d, "vals"); n != before {
		t.Fatalf("refused writes made %d commits", n-before)
	}
	// The edges of what is accepted.
	sqlExec(t, w.url, "INSERT INTO "+tbl+` (_id, f, d, b) VALUES ('V/edge', 1e308, '9999-12-31T23:59:59.999999Z', -1)`,
		"UPDATE "+tbl+` SET d = '0001-01-01T00:00:00Z', ds = '["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2024-02-29T23:59:59.5+15:59", "2000-12-31T00:00:00-00:00"]',
			bs = '["-1`+strings.Repeat("0", 131071)+`"]' WHERE _id = 'V/edge'`)
	checkLogMatchesTables(t, d, "vals", "V")

	// Rows holding such values, written as Sluice's own role with the
	// triggers skipped, as if from before the checks.
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'",
		"INSERT INTO "+tbl+` (_id, _commit_uid, f, d, b, fs, "is", ok) VALUES ('V/nan', 1, 'NaN', 'infinity', 'NaN', '[null]', '[1.5]', 'kept'),
			('V/inf', 1, '-Infinity', '0001-01-01T00:00:00Z'::timestamptz - interval '1 day', 'Infinity', '["x"]', '[1]', 'kept too')`)
	list := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/vals?type=V", nil).Body)
	if !strings.Contains(list, `{"@id":"V/nan","@type":"V","@version":"1","ok":"kept"}`) ||
		!strings.Contains(list, `{"@id":"V/inf","@type":"V","@version":"1","is":[1],"ok":"kept too"}`) || !strings.Contains(list, `"V/good"`) {
		t.Fatalf("GET ?type=V:\n%s", list)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/vals?id=V/nan", nil)
	for _, q := range []string{
		`{ V { _id f d b fs is ok } }`,
		`{ V { _id f d b fs is ok _CommitMetadata { _id } } }`,
		`{ V(orderBy: {f: DESC}) { _id f } }`,
		`{ V_aggregate { count min { f d b } max { f d b } sum { f b } avg { b } } }`, // avg { f } of 1e308 overflows: another matter
	} {
		a := gqlQuery(t, d, dt.Admin(), "vals", q)
		if len(a.Errors) > 0 || !strings.Contains(string(a.Data), `"V/nan"`) && !strings.Contains(string(a.Data), `"count":4`) {
			t.Errorf("%s: %s %+v", q, a.Data, a.Errors)
		}
	}
	var docs struct {
		V []map[string]any `json:"V"`
	}
	if err := json.Unmarshal([]byte(gqlData(t, d, dt.Admin(), "vals", `{ V(ids: ["V/nan"]) { f d b ok } }`)), &docs); err != nil || len(docs.V) != 1 ||
		docs.V[0]["f"] != nil || docs.V[0]["d"] != nil || docs.V[0]["b"] != nil || docs.V[0]["ok"] != "kept" {
		t.Fatalf("V/nan reads %v (%v)", docs.V, err)
	}
	// Such a document can be changed, and the change replaces the value.
	d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/vals?id=V/nan", `{"f":2.5}`, "Content-Type", "application/merge-patch+json")
	if doc, _ := docOf(t, d, "vals", "V/nan"); doc["f"] != 2.5 || doc["ok"] != "kept" || doc["d"] != nil {
		t.Fatalf("V/nan after the patch: %v", doc)
	}
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/vals?id=V/inf", nil)
}

// TestSQLReferenceOfAnotherClass: a reference that names a document of a
// class the field's type does not cover (written in SQL before such
// writes were refused: as Sluice's own role, the triggers skipped) reads
// in GraphQL as a dangling reference (null, left out of a list), not as
// that document shown through the field's type.
func TestSQLReferenceOfAnotherClass(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "refs", "type Person { name: String! pet: Pet pets: [Pet!] }\ntype Pet { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/refs", `[{"@type":"Person","@id":"ann","name":"Ann"},{"@type":"Pet","@id":"rex","name":"Rex"}]`)
	w := newSQLWriter(t, d, "refs")
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'",
		"INSERT INTO "+w.table("Person")+` (_id, _commit_uid, name, pet, pets) VALUES ('Person/bob', 1, 'Bob', 'Person/ann', '["Person/ann", "Pet/rex"]')`)
	if got := gqlData(t, d, dt.Admin(), "refs", `{ Person(id: "Person/bob") { pet { name } pets { name } } Pet { name } }`); got != `{"Person":[{"pet":null,"pets":[{"name":"Rex"}]}],"Pet":[{"name":"Rex"}]}` {
		t.Errorf("references of another class: %s", got)
	}
}

// TestSQLReferencesAsTheAPIChecksThem: a reference written in SQL, in a
// column, a list or a subdocument, is an id "<Class>/<key>" as the API
// takes one: its class the field's type or one inheriting from it, its
// key as schema.CheckKey has it. Anything else is refused with an error
// naming the field, on INSERT and UPDATE, and writes nothing; the
// references the API would take are written.
func TestSQLReferencesAsTheAPIChecksThem(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "refchk", `interface Animal { name: String }
		type Pet implements Animal { name: String }
		type Person { pet: Pet pets: [Pet!] animal: Animal home: Home homes: [Home!] }
		type Home @subdocument { pet: Pet pets: [Pet!] }`)
	w := newSQLWriter(t, d, "refchk")
	tbl := w.table("Person")
	long := "Pet/" + strings.Repeat("k", 5000)
	sqlExec(t, w.url, "INSERT INTO "+tbl+` (_id, pet, pets, animal, home, homes) VALUES ('Person/good', 'Pet/rex', '["Pet/a/b", "Pet/é"]', 'Pet/rex',
		'{"pet": "Pet/rex", "pets": ["Pet/x"]}', '[{"@type": "Home", "pet": "Pet/y"}]')`,
		"INSERT INTO "+tbl+` (_id, pet) VALUES ('Person/edge', 'Pet/`+strings.Repeat("k", 255)+`')`)
	before := logLength(t, d, "refchk")
	for _, c := range []struct{ set, field string }{
		{"pet = 'garbage'", "Person.pet holds"},
		{"pet = 'Pet/ has space'", "Person.pet holds"},
		{"pet = 'Pet/'", "Person.pet holds"},
		{"pet = 'Pet/a' || chr(160)", "Person.pet holds"},
		{"pet = '" + long + "'", "Person.pet holds"},
		{"pet = 'Pet/" + strings.Repeat("k", 256) + "'", "Person.pet holds"},
		{"pet = 'Person/a'", "Person.pet holds"},
		{"pet = 'Nope/x'", "Person.pet holds"},
		{"animal = 'Animal/x'", "Person.animal holds"}, // an interface has no documents
		{`pets = '["", "Nope/x"]'`, "Person.pets holds"},
		{`pets = '["Pet/ok", "Person/a"]'`, "Person.pets holds"},
		{`home = '{"pet": "nonsense"}'`, "Person.home.pet holds"},
		{`home = '{"pets": ["Pet/x", "Pet/a b"]}'`, "Person.home.pets holds"},
		{`homes = '[{"pet": "Person/a"}]'`, "Person.homes.pet holds"},
	} {
		col, val, _ := strings.Cut(c.set, " = ")
		insert := "INSERT INTO " + tbl + " (_id, " + col + ") VALUES ('Person/bad', " + val + ")"
		update := "UPDATE " + tbl + " SET " + c.set + " WHERE _id = 'Person/good'"
		for _, stmt := range []string{insert, update} {
			err := sqlTx(w.url, stmt)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%.200s: %.300v, want an error naming %s", stmt, err, c.field)
			}
		}
	}
	if n := logLength(t, d, "refchk"); n != before {
		t.Fatalf("refused writes made %d commits", n-before)
	}
	checkLogMatchesTables(t, d, "refchk", "Person")
	// What was written reads back, and goes back, through the API.
	doc := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/refchk?id=Person/good", nil).Body
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/refchk", doc)
}

// TestSQLWritesOfSubdocuments: a subdocument written in SQL is checked as
// the API checks one, at any depth and in lists: its fields' kinds, its
// required fields, no field its type lacks; a valid one is taken, with
// or without "@type".
func TestSQLWritesOfSubdocuments(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "subs", `type Person { name: String! home: Home homes: [Home!] }
		type Home @subdocument { city: String! n: Int when: DateTime inner: Home size: Size tags: [String!] data: JSON }
		enum Size { S M }`)
	w := newSQLWriter(t, d, "subs")
	tbl := w.table("Person")
	before := logLength(t, d, "subs")
	for _, c := range []struct{ cols, vals, why string }{
		{"home", `'{"city":5}'`, "Person.home.city holds 5, which is not a string"},
		{"home", `'{"city":"x","n":"x"}'`, "Person.home.n holds"},
		{"home", `'{"city":"x","when":"garbage"}'`, "Person.home.when holds"},
		{"home", `'{"city":"x","when":"10000-01-01T00:00:00Z"}'`, "Person.home.when holds"},
		{"home", `'{"n":1}'`, "field Person.home.city is required"},
		{"home", `'{"city":"x","zzz":1}'`, "Person.home.zzz is not a field"},
		{"home", `'{"city":"x","size":"XL"}'`, "Person.home.size"},
		{"home", `'{"city":"x","tags":[1]}'`, "Person.home.tags holds 1"},
		{"home", `'{"city":"x","inner":{"city":null}}'`, "field Person.home.inner.city is required"},
		{"home", `'{"city":"x","inner":[1]}'`, "Person.home.inner is a subdocument"},
		{"homes", `'[{"city":"a"},{"zzz":1}]'`, "Person.homes.zzz is not a field"},
		{"homes", `'[{"city":null}]'`, "field Person.homes.city is required"},
		{"home", `'{"@type":"Person","city":"x"}'`, "Person.home is a subdocument of type Home"},
	} {
		err := sqlTx(w.url, "INSERT INTO "+tbl+" (_id, name, "+c.cols+") VALUES ('Person/bad', 'B', "+c.vals+")")
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s = %s: %v, want an error saying %q", c.cols, c.vals, err, c.why)
		}
	}
	if n := logLength(t, d, "subs"); n != before {
		t.Fatalf("refused writes made %d commits", n-before)
	}
	sqlExec(t, w.url, "INSERT INTO "+tbl+` (_id, name, home, homes) VALUES ('Person/ok', 'Ok',
		'{"@type":"Home","city":"x","n":1,"when":"2024-08-01T16:00:00Z","size":"S","tags":["a"],"data":{"any":[1,{"x":null}]},"inner":{"city":"y"}}',
		'[{"city":"a"},{"city":"b","inner":{"city":"c"}}]')`)
	if got := gqlData(t, d, dt.Admin(), "subs", `{ Person(id: "Person/ok") { home { city n size inner { city } } homes { city } } }`); got != `{"Person":[{"home":{"city":"x","n":1,"size":"S","inner":{"city":"y"}},"homes":[{"city":"a"},{"city":"b"}]}]}` {
		t.Errorf("a valid subdocument written in SQL: %s", got)
	}
	// What the API writes passes the same checks when SQL writes it back,
	// as deep as a document may nest (checked without recursion: a
	// plpgsql call per level ran out of stack at about 450).
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subs", `{"@type":"Person","@id":"api","name":"A","home":{"city":"c","when":"2024-08-01T16:00:00.5+02:00","tags":["t"],"data":[1],"inner":{"city":"d","size":"M"}}}`)
	deep := strings.Repeat(`{"city":"c","inner":`, 510) + `{"city":"c"}` + strings.Repeat("}", 510)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subs", `{"@type":"Person","@id":"deep","name":"D","home":`+deep+`}`)
	sqlExec(t, w.url, "UPDATE "+tbl+" SET name = 'A2' WHERE _id IN ('Person/api', 'Person/deep')")
}

// TestSQLWritesInAnyTimeZone: a DateTime column written in SQL is read as
// to_jsonb gives it in the writer's session time zone, whose offset may
// have seconds (local mean time before 1937 in Amsterdam): accepted.
func TestSQLWritesInAnyTimeZone(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zone", valuesSDL)
	w := newSQLWriter(t, d, "zone")
	sqlExec(t, w.url, "SET LOCAL timezone = 'Europe/Amsterdam'",
		"INSERT INTO "+w.table("V")+` (_id, d) VALUES ('V/old', '1920-06-01T12:00:00Z')`)
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zone?id=V/old", nil).Body); !strings.Contains(got, `"d":"1920-06-01T12:00:00Z"`) {
		t.Errorf("a DateTime written in another time zone: %s", got)
	}
}

// TestSQLFloatsInRange: a Float in a list or a subdocument is JSON in its
// column, which holds numbers of any size; one that strconv.ParseFloat
// rounds to an infinity (from 2^1024 - 2^970, halfway between the
// largest float64 and 2^1024, on) is refused in SQL, as the API refuses
// it ("number 1e400 is out of Float range"): written, the document and
// the log read without the field. A Float column is a float8, whose own
// range Postgres keeps. Numbers just under the limit, which ParseFloat
// rounds to the largest float64, are taken, as by the API.
func TestSQLFloatsInRange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "floats", `type F { x: Float xs: [Float!] home: Home homes: [Home!] }
		type Home @subdocument { y: Float ys: [Float!] }`)
	w := newSQLWriter(t, d, "floats")
	tbl := w.table("F")
	// 2^1024 - 2^970, and one less.
	const limit = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792"
	under := limit[:len(limit)-1] + "1"
	before := logLength(t, d, "floats")
	for i, c := range []struct{ col, val, why string }{
		{"xs", "'[1e400, 1]'", "F.xs holds"},
		{"xs", "'[1, -1e400]'", "F.xs holds"},
		{"xs", "'[" + limit + "]'", "F.xs holds"},
		{"xs", "'[-" + limit + ".0]'", "F.xs holds"},
		{"home", `'{"y": 1e400}'`, "F.home.y holds"},
		{"home", `'{"y": -` + limit + `}'`, "F.home.y holds"},
		{"home", `'{"ys": [1e400]}'`, "F.home.ys holds"},
		{"homes", `'[{"y": 1}, {"y": 1e400}]'`, "F.homes.y holds"},
		{"x", "1e400", "out of range for type double precision"},
	} {
		err := sqlTx(w.url, fmt.Sprintf("INSERT INTO %s (_id, %s) VALUES ('F/bad%d', %s)", tbl, c.col, i, c.val))
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s = %.40s: %.300v, want an error saying %q", c.col, c.val, err, c.why)
		}
	}
	if n := logLength(t, d, "floats"); n != before {
		t.Fatalf("refused writes made %d commits", n-before)
	}
	sqlExec(t, w.url, "INSERT INTO "+tbl+` (_id, x, xs, home, homes) VALUES ('F/edge', 1.7976931348623157e308,
		'[`+under+`, -1.7976931348623158e308, 1e-400]', '{"y": -`+under+`, "ys": [1e308]}', '[{"y": 1.7976931348623158e308}]')`)
	// (A subdocument's numbers read as written.)
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/floats?id=F/edge", nil).Body); !strings.Contains(got,
		`"x":1.7976931348623157e+308,"xs":[1.7976931348623157e+308,-1.7976931348623157e+308,0],"home":{"y":-`+under+`,"ys":[`) ||
		!strings.Contains(got, `"homes":[{"y":`) {
		t.Errorf("F/edge reads %s", got)
	}
	checkLogMatchesTables(t, d, "floats", "F")
	// The API draws the line at the same place.
	d.MustDo(t, 400, dt.Admin(), "POST", "/api/document/admin/floats", `{"@type":"F","@id":"api","xs":[`+limit+`]}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/floats", `{"@type":"F","@id":"api","xs":[`+under+`]}`)
}

// TestSQLNegativeZero: a Float column written -0 in SQL reads 0, as the
// API writes it (its -0.0 is 0.0), in reads over REST and GraphQL and in
// the log alike. The capture triggers record rows with row_to_json, which
// prints a float8 -0 as -0, where to_jsonb (reads) gives 0: the stream
// said -0 of a document every read said 0 of.
func TestSQLNegativeZero(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zeros", `type F { x: Float y: Float }`)
	w := newSQLWriter(t, d, "zeros")
	sqlExec(t, w.url, "INSERT INTO "+w.table("F")+` (_id, x, y) VALUES ('F/z', '-0', 1)`)
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zeros?id=F/z", nil).Body); !strings.Contains(got, `"x":0,`) {
		t.Errorf("REST reads %s", got)
	}
	if got := string(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/zeros", `{"query":"{ F { x y } }"}`, "Content-Type", "application/json").Body); !strings.Contains(got, `"x":0,`) {
		t.Errorf("GraphQL reads %s", got)
	}
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/zeros", nil).Body); !strings.Contains(got, `"x":0,`) {
		t.Errorf("the log reads %s", got)
	}
	checkLogMatchesTables(t, d, "zeros", "F")
}
