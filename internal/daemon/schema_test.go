package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

func TestSchemaChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "s", "enum Size { S M L }\ntype Shirt { size: Size! color: String }\ntype Hat { brim: Int }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/s",
		`[{"@type":"Shirt","@id":"a","size":"M","color":"red"},{"@type":"Shirt","@id":"b","size":"L"},{"@type":"Hat","@id":"h","brim":3}]`)

	// Additive: new optional field, new class, new enum value, relaxing.
	r := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/s",
		"enum Size { S M L XL }\ntype Shirt { size: Size color: String sleeves: Int }\ntype Hat { brim: Int }\ntype Sock { pair: Boolean }")
	if !strings.Contains(string(r.Body), `"schema_version":2`) {
		t.Fatalf("additive change: %s", r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/s", `{"@type":"Sock","pair":true}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/s", `{"@type":"Shirt","size":"XL","sleeves":2}`)
	got := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/s?id=Shirt/a", nil)
	if withoutVersion(string(got.Body)) != `{"@id":"Shirt/a","@type":"Shirt","size":"M","color":"red"}`+"\n" {
		t.Fatalf("existing document after an additive change: %s", got.Body)
	}

	// Making a field required while a document lacks it is refused, force or not.
	for _, q := range []string{"", "?force=true"} {
		r = d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/s"+q,
			"enum Size { S M L XL }\ntype Shirt { size: Size color: String! sleeves: Int }\ntype Hat { brim: Int }\ntype Sock { pair: Boolean }")
		if r.Status != 409 || !strings.Contains(string(r.Body), "Shirt.color required: 2 stored documents lack it") {
			t.Fatalf("require with missing values%s: %d %s", q, r.Status, r.Body)
		}
	}

	// Dropping an enum value that documents hold is refused, force or not;
	// an unused one goes with force.
	r = d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/s?force=true",
		"enum Size { S M XL }\ntype Shirt { size: Size color: String sleeves: Int }\ntype Hat { brim: Int }\ntype Sock { pair: Boolean }")
	if r.Status != 409 || !strings.Contains(string(r.Body), "cannot drop value L of enum Size: 1 stored documents hold it in Shirt.size") {
		t.Fatalf("drop a used enum value: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, 409, dt.Admin(), "PUT", "/api/schema/admin/s",
		"enum Size { M L XL }\ntype Shirt { size: Size color: String sleeves: Int }\ntype Hat { brim: Int }\ntype Sock { pair: Boolean }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/s?force=true",
		"enum Size { M L XL }\ntype Shirt { size: Size color: String sleeves: Int }\ntype Hat { brim: Int }\ntype Sock { pair: Boolean }")

	// Destructive: dropping a class and a field is refused, naming the loss.
	destructive := "enum Size { M L XL }\ntype Shirt { size: Size sleeves: Int }\ntype Sock { pair: Boolean }"
	r = d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/s", destructive)
	if r.Status != 409 || !strings.Contains(string(r.Body), "Hat") || !strings.Contains(string(r.Body), "Shirt.color") {
		t.Fatalf("destructive change: %d %s", r.Status, r.Body)
	}
	// Nothing changed.
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/s?id=Hat/h", nil)
	// With force it applies.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/s?force=true", destructive)
	// Its ids name no class any more (400, as every id of no document class).
	if r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/s?id=Hat/h", nil); r.Status != 400 || !strings.Contains(string(r.Body), `unknown class \"Hat\"`) {
		t.Fatalf("a read of a dropped class's document: %d %s", r.Status, r.Body)
	}
	got = d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/s?id=Shirt/a", nil)
	if withoutVersion(string(got.Body)) != `{"@id":"Shirt/a","@type":"Shirt","size":"M"}`+"\n" {
		t.Fatalf("after a forced change: %s", got.Body)
	}
	sdl := d.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/s", nil)
	if string(sdl.Body) != destructive {
		t.Fatalf("stored SDL: %s", sdl.Body)
	}
}

func TestSystemDatabaseRecordsDatabases(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/one", `{"label":"One","comment":"first"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/two", "")
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/two", nil)
	docs := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/_system/_system?type=UserDatabase", nil)
	if withoutVersion(string(docs.Body)) != `{"@id":"UserDatabase/admin/one","@type":"UserDatabase","name":"one","organization":"admin","label":"One","comment":"first"}`+"\n" {
		t.Fatalf("UserDatabase documents: %s", docs.Body)
	}
	// Each create and delete was a commit on _system, after the bootstrap one.
	commits := allChangesOf(t, d, "_system/_system")
	if len(commits) != 4 {
		t.Fatalf("%d _system commits, want 4 (bootstrap, create, create, delete)", len(commits))
	}
	last := commits[3].Changes[0]
	if last.Op != "deleted" || last.ID != "UserDatabase/admin/two" || !strings.Contains(string(last.Before), `"name":"two"`) {
		t.Fatalf("delete commit: %+v", last)
	}
	// The metrics count HTTP requests and commits.
	m := d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil)
	for _, want := range []string{`sluice_http_requests_total{code="201",method="POST",route="/api/db/{org}/{db}"} 2`, "sluice_commits_total{"} {
		if !strings.Contains(string(m.Body), want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
}

// TestRecreatedDatabaseServesItsNewSchema deletes a database that GraphQL
// served and re-creates it with another schema: the new schema is served,
// not a leftover of the old database.
func TestRecreatedDatabaseServesItsNewSchema(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "again", "type Old { a: Int }")
	q := func(query string) string {
		r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/again", `{"query":"`+query+`"}`, "Content-Type", "application/json")
		if data, _, ok := strings.Cut(string(r.Body), `,"extensions":`); ok {
			return data + "}" // without the position
		}
		return string(r.Body)
	}
	if got := q("{ Old { _id } }"); got != `{"data":{"Old":[]}}` {
		t.Fatalf("old schema: %s", got)
	}
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/again", nil)
	d.CreateDatabase(t, "again", "type New { b: Int }")
	if got := q("{ New { _id } }"); got != `{"data":{"New":[]}}` {
		t.Fatalf("new schema: %s", got)
	}
}

// Adding and removing @index apply in place, without force, and say what
// they did; a field that cannot be indexed is a 400 naming it.
func TestSchemaIndexChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "ix", "type Shirt { size: Int color: String tags: [String!] }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ix", `[{"@type":"Shirt","@id":"a","size":3,"color":"red"}]`)
	r := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/ix",
		`type Shirt @index(fields: ["size", "color"]) { size: Int color: String @index tags: [String!] }`)
	for _, want := range []string{"adds an index on Shirt(size, color)", "adds an index on Shirt(color)"} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("adding indexes: %s lacks %q", r.Body, want)
		}
	}
	r = d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/ix", "type Shirt { size: Int color: String tags: [String!] }")
	if !strings.Contains(string(r.Body), "drops the index on Shirt(color)") {
		t.Errorf("dropping indexes: %s", r.Body)
	}
	r = d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/ix", "type Shirt { size: Int color: String tags: [String!] @index }")
	if r.Status != 400 || !strings.Contains(string(r.Body), "@index on Shirt.tags: the field cannot be indexed: it is a list") {
		t.Errorf("index on a list: %d %s", r.Status, r.Body)
	}
	got := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/ix?id=Shirt/a", nil)
	if withoutVersion(string(got.Body)) != `{"@id":"Shirt/a","@type":"Shirt","size":3,"color":"red"}`+"\n" {
		t.Errorf("document after the index changes: %s", got.Body)
	}
}

// TestIndexesPerClassBounded: a class has at most 64 indexes, inherited
// ones included: 64 are made and serve writes, one more inherited from
// an interface is a 400 naming the bound that changes nothing (without
// the bound, 450 KB of @index on an interface that 20 types implement
// took 23 s to parse, and would have asked one transaction for 312,000
// indexes).
func TestIndexesPerClassBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	var fields strings.Builder
	for c := 'a'; c <= 'z'; c++ {
		fmt.Fprintf(&fields, " %c: Int", c)
	}
	indexes := func(n int) string { // n distinct pairs of a..z
		var b strings.Builder
		for i := range n {
			first, second := i/25, i%25
			if second >= first {
				second++
			}
			fmt.Fprintf(&b, ` @index(fields: ["%c", "%c"])`, 'a'+first, 'a'+second)
		}
		return b.String()
	}
	d.CreateDatabase(t, "manyix", "type Shirt"+indexes(64)+" {"+fields.String()+" }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/manyix", `{"@type":"Shirt","@id":"s","a":1,"b":2}`)
	r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/manyix",
		"interface Sized @index(fields: [\"z\"]) {"+fields.String()+" }\ntype Shirt implements Sized"+indexes(64))
	if r.Status != 400 || !strings.Contains(string(r.Body), "Shirt has more than 64 indexes, inherited ones included; at most 64 are allowed") {
		t.Errorf("a 65th index, inherited: %d %s", r.Status, r.Body)
	}
	r = d.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/manyix", nil)
	if r.Header.Get("ETag") != `"1"` {
		t.Errorf("the refused change moved the schema: ETag %s", r.Header.Get("ETag"))
	}
}

// TestSchemaDescriptionsBounded: a schema within max_schema_bytes whose
// descriptions, repeated on every class that inherits them, come to more
// than 4 MiB is a 400 naming the bound, on create and on change (it was
// taken: 500 KB described an interface's field that 999 types implement,
// and every role's GraphQL schema would have held half a gigabyte of
// descriptions, built on the database's first GraphQL request).
func TestSchemaDescriptionsBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	var sdl strings.Builder
	sdl.WriteString(`interface Named { """` + strings.Repeat("x", 500000) + `""" name: String }` + "\n")
	for i := range 999 {
		fmt.Fprintf(&sdl, "type T%d implements Named\n", i)
	}
	const want = "type T7: the schema's descriptions come to more than 4194304 bytes, each class counting those of the fields it inherits"
	body, _ := json.Marshal(map[string]string{"schema": sdl.String()})
	r := d.Do(t, dt.Admin(), "POST", "/api/db/admin/described", body)
	if r.Status != 400 || !strings.Contains(string(r.Body), want) {
		t.Errorf("a database with 500 MB of inherited descriptions: %d %.300s", r.Status, r.Body)
	}
	d.CreateDatabase(t, "described", "type Person { name: String }")
	r = d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/described", sdl.String())
	if r.Status != 400 || !strings.Contains(string(r.Body), want) {
		t.Errorf("a change to 500 MB of inherited descriptions: %d %.300s", r.Status, r.Body)
	}
	// Within the bound, a description is kept on every class.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/described", `interface Named { "The name." name: String }`+"\ntype Person implements Named")
	if got := gqlData(t, d, dt.Admin(), "described", `{ __type(name: "Person") { fields { name description } } }`); !strings.Contains(got, `{"name":"name","description":"The name."}`) {
		t.Errorf("the inherited description: %s", got)
	}
}

// TestAddRequiredFieldToStoredDocuments: adding a required field to a
// class is refused (409) while stored documents lack it, with the count,
// and accepted on an empty class: the count reads a column that does not
// exist yet as missing everywhere.
func TestAddRequiredFieldToStoredDocuments(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "req", "type Note { text: String }\ntype Tag { name: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/req", `{"@type":"Note","text":"x"}`)
	r := d.MustDo(t, 409, dt.Admin(), "PUT", "/api/schema/admin/req", "type Note { text: String title: String! }\ntype Tag { name: String }")
	if !strings.Contains(string(r.Body), "cannot make Note.title required: 1 stored documents lack it") {
		t.Errorf("adding a required field to a class with a document: %s", r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/req", "type Note { text: String }\ntype Tag { name: String label: String! }")
}

// TestSchemaBodyMistakes: a PUT /api/schema body that cannot be the
// schema meant, an empty one (a script's unset $SCHEMA) or JSON (POST
// /api/db's body), is a 400 saying the body is the SDL, with force=true
// and in a dry run too. An empty body was taken as a schema of no
// classes: a 409 advising force=true, which then dropped every class and
// document. A schema of only comments is meant, and takes the normal way.
func TestSchemaBodyMistakes(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	sdl := "type Person { name: String! }"
	d.CreateDatabase(t, "mistakes", sdl)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/mistakes", `{"@type":"Person","@id":"alice","name":"Alice"}`)

	for _, tc := range []struct{ body, want string }{
		{"", "the request body is empty: PUT /api/schema takes the new schema, its SDL, as the body"},
		{" \n\t\r\n", "the request body is empty: PUT /api/schema takes the new schema, its SDL, as the body"},
		{`{"schema":"type Person { name: String! age: Int }"}`, `the request body starts with "{": PUT /api/schema takes the SDL itself as its body (such as type Person { name: String }), not JSON`},
		{"\n  {\"label\": \"x\"}", `the request body starts with "{": PUT /api/schema takes the SDL itself as its body`},
		{"{", `the request body starts with "{"`},
	} {
		for _, q := range []string{"", "?force=true", "?dry_run=true", "?dry_run=true&force=true"} {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/mistakes"+q, body)
			if _, msg := errBody(t, r); r.Status != 400 || !strings.Contains(msg, tc.want) {
				t.Errorf("PUT%s %q: %d %s, want 400 saying %q", q, tc.body, r.Status, msg, tc.want)
			}
		}
	}
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/mistakes", nil).Body); got != sdl {
		t.Fatalf("schema after refused bodies: %q", got)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/mistakes?id=Person/alice", nil)

	// Only comments: a schema of no classes, which drops Person, so
	// refused without force and applied with it.
	none := "# no classes\n"
	if r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/mistakes", none); r.Status != 409 || !strings.Contains(string(r.Body), "drops class Person") {
		t.Fatalf("a schema of only comments: %d %s, want 409 naming the class it drops", r.Status, r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/mistakes?force=true", none)
	d.MustDo(t, 400, dt.Admin(), "GET", "/api/document/admin/mistakes?id=Person/alice", nil)
}
