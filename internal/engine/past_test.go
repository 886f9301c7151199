package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestPastSchema: what of the state at a position, read through today's
// schema, cannot be shown, and which fields the log's images lose, for a
// reader and an admin.
func TestPastSchema(t *testing.T) {
	t.Parallel()
	// Version 1 (commits 1 to 4), the one in force at position 3; version
	// 2 from commit 5, version 3 (today's) from commit 8.
	v1 := mustParse(t, `enum Size { S M L }
		type Item { name: String! qty: Int size: Size note: String secret: String @private again: Int hid: Int }
		type Tag { label: String! }
		type Old { x: Int }`)
	v2 := mustParse(t, `enum Size { S M }
		type Item { name: String! qty: String size: Size note: String @private secret: String hid: String @private }
		type Other { y: Int }`)
	now := mustParse(t, `enum Size { S M }
		type Item { name: String! qty: String size: Size note: String secret: String added: Int again: Int hid: String @private }
		type Tag { label: String! }
		type Other { y: Int }`)
	versions, firsts := []*sluice.Schema{v1, v2, now}, []int64{1, 5, 8}
	// scanOf scans the versions, loading only versions 0 and at.
	scanOf := func(role sluice.Role, at int) *versionScan {
		t.Helper()
		return scanVersionsOf(t, versions, firsts, at, now, role)
	}
	pos := sluice.Position{Epoch: "e", Seq: 3, Index: sluice.WholeCommit}

	past, drop := pastSchema(scanOf(sluice.RoleRead, 0), 0, now, sluice.RoleRead, pos)
	keys := func(m map[string]string) string { return strings.Join(slices.Sorted(maps.Keys(m)), " ") }
	// note and secret were protected from readers since the position
	// (secret then, note later), qty changed type, size's enum lost a
	// value, again was dropped and added back.
	if got := keys(past.Unknown["Item"]); got != "again note qty secret size" {
		t.Errorf("a reader's unknown Item fields: %s (%v)", got, past.Unknown["Item"])
	}
	for f, want := range map[string]string{
		"qty":  "Item.qty as of e-3-2147483647 cannot be shown: a schema change after that position (in effect from commit 5) dropped its values",
		"note": "Item.note as of e-3-2147483647 cannot be shown: it was protected from your role at that position or since",
	} {
		if got := past.Unknown["Item"][f]; got != want {
			t.Errorf("why %s: %q", f, got)
		}
	}
	// Tag was dropped and made again, Old dropped for good: the
	// documents of both then are gone, by the change from commit 5 (Tag
	// made again from commit 8 does not bring them back).
	if got := keys(past.Lost); got != "Old Tag" || !strings.Contains(past.Lost["Tag"], "in effect from commit 5") ||
		!strings.Contains(past.Lost["Old"], "in effect from commit 5") {
		t.Errorf("lost classes: %v", past.Lost)
	}
	if err := past.CheckAll(); err == nil || !strings.Contains(err.Error(), "documents of Old") {
		t.Errorf("CheckAll: %v", err)
	}
	// added is new (it was nothing then, not unknown); hid, hidden from
	// the reader now, is not named to it, but its images lose it; Other
	// did not exist then (no loss).
	if got := strings.Join(drop["Item"], " "); got != "qty size added again hid" {
		t.Errorf("dropped from Item's images: %s", got)
	}
	if len(past.Unknown["Other"]) != 0 || past.CheckClass("Other") != nil {
		t.Errorf("Other, made after the position: %v %v", past.Unknown["Other"], past.CheckClass("Other"))
	}
	if err := past.CheckField("Item", "qty"); sluice.ErrorCode(err) != sluice.CodeInvalid {
		t.Errorf("CheckField qty: %v", err)
	}
	if got := past.Hidden([]string{"Item", "Tag"}); strings.Join(got, ",") != "Item.again,Item.note,Item.qty,Item.secret,Item.size" {
		t.Errorf("hidden: %v", got)
	}

	// An admin reads protected fields.
	past, _ = pastSchema(scanOf(sluice.RoleAdmin, 0), 0, now, sluice.RoleAdmin, pos)
	if got := keys(past.Unknown["Item"]); got != "again hid qty size" {
		t.Errorf("an admin's unknown Item fields: %s", got)
	}
	// As of a position after the last change, nothing is unknown.
	past, drop = pastSchema(scanOf(sluice.RoleRead, 2), 2, now, sluice.RoleRead, sluice.Position{Epoch: "e", Seq: 9})
	if len(past.Unknown) != 0 || len(past.Lost) != 0 || len(drop) != 0 {
		t.Errorf("as of commit 9: %v %v %v", past.Unknown, past.Lost, drop)
	}
	// As of commit 6 (version 2): note was protected since, added and
	// again are new since (again, dropped before, too).
	past, drop = pastSchema(scanOf(sluice.RoleRead, 1), 1, now, sluice.RoleRead, sluice.Position{Epoch: "e", Seq: 6})
	if got := keys(past.Unknown["Item"]); got != "note" || len(past.Lost) != 0 || strings.Join(drop["Item"], " ") != "added again" {
		t.Errorf("as of commit 6: %v %v %v", past.Unknown, past.Lost, drop)
	}
	// What a scan tells of the versions from at on is what a scan of
	// those versions alone tells.
	for _, role := range []sluice.Role{sluice.RoleRead, sluice.RoleAdmin} {
		for at := range versions {
			p := sluice.Position{Epoch: "e", Seq: firsts[at]}
			got, gotDrop := pastSchema(scanOf(role, at), at, now, role, p)
			alone := scanVersionsOf(t, versions[at:], firsts[at:], 0, now, role)
			want, wantDrop := pastSchema(alone, 0, now, role, p)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotDrop, wantDrop) {
				t.Errorf("role %v from version %d: %v %v, alone %v %v", role, at, got, gotDrop, want, wantDrop)
			}
		}
	}
	// A diff from commit 3 to 9 cannot show Old, dropped between; one
	// from 6 (version 2, without Old) can.
	if p := diffPast(scanOf(sluice.RoleRead, 2), now, sluice.RoleRead, pos, sluice.Position{Epoch: "e", Seq: 9}); p.CheckAll() == nil || p.CheckClass("Old") == nil {
		t.Errorf("a diff from commit 3: %v", p.Lost)
	}
	later := scanVersionsOf(t, versions[1:], firsts[1:], 1, now, sluice.RoleRead)
	if p := diffPast(later, now, sluice.RoleRead, sluice.Position{Epoch: "e", Seq: 6}, sluice.Position{Epoch: "e", Seq: 9}); p.CheckClass("Old") != nil {
		t.Errorf("a diff from commit 6: %v", p.Lost)
	}
	// Before the first commit nothing existed: nothing is lost.
	past, _ = pastSchema(scanOf(sluice.RoleRead, 0), 0, now, sluice.RoleRead, sluice.Position{Epoch: "e", Seq: 0, Index: sluice.WholeCommit})
	if len(past.Unknown) != 0 || len(past.Lost) != 0 {
		t.Errorf("as of commit 0: %v %v", past.Unknown, past.Lost)
	}
}

// scanVersionsOf scans versions (whose first commits are firsts) as
// Engine.scanVersions does, checking that it loads only versions 0 and at
// and learns the others from their digests.
func scanVersionsOf(t *testing.T, versions []*sluice.Schema, firsts []int64, at int, cur *sluice.Schema, role sluice.Role) *versionScan {
	t.Helper()
	sc, err := scan(firsts, at, func(i int) (*sluice.Schema, error) {
		if i != 0 && i != at {
			t.Fatalf("version %d loaded, want only 0 and %d", i, at)
		}
		return versions[i], nil
	}, func(i int) (*versionDigest, error) {
		return digestOf(versions[i-1], versions[i]), nil
	}, cur, role)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestPastSchemaSubdocuments: a field of a subdocument class protected
// from a reader at any time since a position, at any depth (a class
// holding itself too), is unknown as of that position, named by its class
// when a read shows it (not through a field hidden from the reader now),
// and left out of every subdocument of a document as of then.
func TestPastSchemaSubdocuments(t *testing.T) {
	t.Parallel()
	// Version 1 (commits 1 to 4): city protected; version 2 (from commit
	// 5): street, code and pin protected, city not; today's (from commit
	// 8): none of them.
	v1 := mustParse(t, `type Person { name: String home: Address homes: [Address] vault: Vault }
		type Address @subdocument { street: String city: String @private geo: Geo }
		type Geo @subdocument { code: String near: Geo }
		type Vault @subdocument { pin: String }`)
	v2 := mustParse(t, `type Person { name: String home: Address homes: [Address] vault: Vault }
		type Address @subdocument { street: String @private city: String geo: Geo }
		type Geo @subdocument { code: String @private near: Geo }
		type Vault @subdocument { pin: String @private }`)
	now := mustParse(t, `type Person { name: String home: Address homes: [Address] vault: Vault @private }
		type Address @subdocument { street: String city: String geo: Geo }
		type Geo @subdocument { code: String near: Geo }
		type Vault @subdocument { pin: String }`)
	versions, firsts := []*sluice.Schema{v1, v2, now}, []int64{1, 5, 8}
	pastAt := func(role sluice.Role, at int, seq int64) *Past {
		t.Helper()
		past, _ := pastSchema(scanVersionsOf(t, versions, firsts, at, now, role), at, now, role, sluice.Position{Epoch: "e", Seq: seq, Index: sluice.WholeCommit})
		return past
	}

	past := pastAt(sluice.RoleRead, 0, 3)
	unknown := func(p *Past) string {
		var out []string
		for c, fields := range p.Unknown {
			for f := range fields {
				out = append(out, c+"."+f)
			}
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	// Vault.pin is unknown too, but Person.vault is hidden from the
	// reader now: a read does not name it.
	if got := unknown(past); got != "Address.city Address.street Geo.code Vault.pin" {
		t.Errorf("a reader's unknown fields as of commit 3: %s", got)
	}
	if got := past.Unknown["Geo"]["code"]; got != "Geo.code as of e-3-2147483647 cannot be shown: it was protected from your role at that position or since" {
		t.Errorf("why Geo.code: %q", got)
	}
	if got := strings.Join(past.Hidden([]string{"Person"}), ","); got != "Address.city,Address.street,Geo.code" {
		t.Errorf("hidden as of commit 3: %s", got)
	}
	if err := past.CheckField("Address", "street"); sluice.ErrorCode(err) != sluice.CodeInvalid {
		t.Errorf("CheckField Address.street: %v", err)
	}
	doc := `{"@id":"Person/a","@type":"Person","name":"A",` +
		`"home":{"@type":"Address","street":"s","city":"c","geo":{"@type":"Geo","code":"x","near":{"@type":"Geo","code":"y"}}},` +
		`"homes":[{"@type":"Address","street":"s2"},{"@type":"Address","geo":{"@type":"Geo","code":"z"}}]}`
	got, err := dropUnknown(now, past, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"@id":"Person/a","@type":"Person","name":"A","home":{"@type":"Address","geo":{"@type":"Geo","near":{"@type":"Geo"}}},"homes":[{"@type":"Address"},{"@type":"Address","geo":{"@type":"Geo"}}]}`; !sameJSONText(t, got, want) {
		t.Errorf("as of commit 3:\n%s\nwant\n%s", got, want)
	}
	// Protected in version 2: the same as of commit 6, but city.
	if got := strings.Join(pastAt(sluice.RoleRead, 1, 6).Hidden([]string{"Person"}), ","); got != "Address.street,Geo.code" {
		t.Errorf("hidden as of commit 6: %s", got)
	}
	// Nothing after today's version, nor for an admin.
	if p := pastAt(sluice.RoleRead, 2, 9); len(p.Unknown) != 0 {
		t.Errorf("as of commit 9: %v", p.Unknown)
	}
	p := pastAt(sluice.RoleAdmin, 0, 3)
	if len(p.Unknown) != 0 {
		t.Errorf("an admin's as of commit 3: %v", p.Unknown)
	}
	if got, err := dropUnknown(now, p, []byte(doc)); err != nil || string(got) != doc {
		t.Errorf("an admin's document as of commit 3: %s %v", got, err)
	}
}

// TestPastSchemaSubdocumentDrops: a schema change that drops the values of
// a field of a subdocument class (its type, list-ness or subdocument type
// changed, its enum lost a value, or dropped and added back) makes it
// unknown as of a position before it, named by its class, for a reader
// and an admin, and a diff across it names it; a field of a subdocument
// class dropped for good is left out of the images. A field added since
// was nothing then.
func TestPastSchemaSubdocumentDrops(t *testing.T) {
	t.Parallel()
	// Version 1 (commits 1 to 4), version 2 (from commit 5), today's
	// (from commit 8).
	v1 := mustParse(t, `enum Kind { A B C }
		type Person { name: String home: Address }
		type Address @subdocument { zip: Int kind: Kind tags: String geo: Geo again: Int gone: Int same: String }
		type Geo @subdocument { code: String }
		type Pos @subdocument { code: String }`)
	v2 := mustParse(t, `enum Kind { A B }
		type Person { name: String home: Address }
		type Address @subdocument { zip: String kind: Kind tags: [String] geo: Pos same: String added: Int }
		type Geo @subdocument { code: String }
		type Pos @subdocument { code: String }`)
	now := mustParse(t, `enum Kind { A B }
		type Person { name: String home: Address }
		type Address @subdocument { zip: String kind: Kind tags: [String] geo: Pos again: Int same: String added: Int }
		type Geo @subdocument { code: String }
		type Pos @subdocument { code: String }`)
	versions, firsts := []*sluice.Schema{v1, v2, now}, []int64{1, 5, 8}
	for _, role := range []sluice.Role{sluice.RoleRead, sluice.RoleAdmin} {
		sc := scanVersionsOf(t, versions, firsts, 1, now, role) // at: commit 6's version
		past, drop := pastSchema(sc, 0, now, role, sluice.Position{Epoch: "e", Seq: 3, Index: sluice.WholeCommit})
		if got := strings.Join(past.Hidden([]string{"Person"}), " "); got != "Address.again Address.geo Address.kind Address.tags Address.zip" {
			t.Errorf("role %v: hidden as of commit 3: %s", role, got)
		}
		if got := past.Unknown["Address"]["zip"]; got != "Address.zip as of e-3-2147483647 cannot be shown: a schema change after that position (in effect from commit 5) dropped its values" {
			t.Errorf("role %v: why Address.zip: %q", role, got)
		}
		if len(drop) != 0 {
			t.Errorf("role %v: dropped from the images: %v (the subdocuments' columns stood)", role, drop)
		}
		// gone, dropped for good, is left out of an image that holds it.
		doc := `{"@id":"Person/a","@type":"Person","name":"A","home":{"@type":"Address","zip":1,"gone":2,"same":"s"}}`
		got, err := dropUnknown(now, past, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"@id":"Person/a","@type":"Person","name":"A","home":{"@type":"Address","same":"s"}}`; !sameJSONText(t, got, want) {
			t.Errorf("role %v: as of commit 3: %s, want %s", role, got, want)
		}
		// As of commit 6, again was absent (nothing then), and no image
		// holds gone.
		later, _ := pastSchema(sc, 1, now, role, sluice.Position{Epoch: "e", Seq: 6, Index: sluice.WholeCommit})
		if len(later.Unknown) != 0 || later.strays {
			t.Errorf("role %v: as of commit 6: %v (strays %v)", role, later.Unknown, later.strays)
		}
		// A diff from commit 3 to commit 6 crosses the change.
		diff := diffPast(sc, now, role, sluice.Position{Epoch: "e", Seq: 3, Index: sluice.WholeCommit}, sluice.Position{Epoch: "e", Seq: 6, Index: sluice.WholeCommit})
		if got := strings.Join(diff.Hidden([]string{"Person"}), " "); got != "Address.again Address.geo Address.kind Address.tags Address.zip" {
			t.Errorf("role %v: hidden from a diff from commit 3 to 6: %s", role, got)
		}
	}
}

// sameJSONText reports whether a and b hold the same JSON value.
func sameJSONText(t *testing.T, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// TestPastSchemaImplementations: an interface that a document class
// implemented at a position and no longer does today cannot be read as
// of that position (its documents then included the class's); one the
// class implements again can. A diff covers both its positions.
func TestPastSchemaImplementations(t *testing.T) {
	t.Parallel()
	// Version 1 (commits 1 to 4): Cat implements Animal; version 2 (from
	// commit 5): it does not; version 3 (from commit 8): it does again.
	in := mustParse(t, `interface Animal { name: String } type Dog implements Animal { name: String } type Cat implements Animal { name: String }`)
	out := mustParse(t, `interface Animal { name: String } type Dog implements Animal { name: String } type Cat { name: String }`)
	versions, firsts := []*sluice.Schema{in, out, in}, []int64{1, 5, 8}
	pos := func(seq int64) sluice.Position {
		return sluice.Position{Epoch: "e", Seq: seq, Index: sluice.WholeCommit}
	}

	// Today's schema is version 2: as of commit 3, Animal is refused.
	sc := scanVersionsOf(t, versions[:2], firsts[:2], 0, out, sluice.RoleRead)
	past, _ := pastSchema(sc, 0, out, sluice.RoleRead, pos(3))
	if err := past.CheckClass("Animal"); err == nil || sluice.ErrorMessage(err) != "the documents of Animal as of e-3-2147483647 cannot be shown: they included those of Cat, which a schema change after that position (in effect from commit 5) made stop implementing it" {
		t.Errorf("Animal as of commit 3: %v", err)
	}
	for _, c := range []string{"Cat", "Dog"} {
		if err := past.CheckClass(c); err != nil {
			t.Errorf("%s as of commit 3: %v", c, err)
		}
	}
	if past.CheckAll() != nil {
		t.Errorf("every class as of commit 3: %v", past.CheckAll())
	}
	// As of commit 6 (version 2), nothing is refused.
	sc = scanVersionsOf(t, versions[:2], firsts[:2], 1, out, sluice.RoleRead)
	if past, _ := pastSchema(sc, 1, out, sluice.RoleRead, pos(6)); past.CheckClass("Animal") != nil {
		t.Errorf("Animal as of commit 6: %v", past.CheckClass("Animal"))
	}

	// Today's schema is version 3: Animal covers Cat again, as of commit
	// 3.
	sc = scanVersionsOf(t, versions, firsts, 0, in, sluice.RoleRead)
	if past, _ := pastSchema(sc, 0, in, sluice.RoleRead, pos(3)); past.CheckClass("Animal") != nil {
		t.Errorf("Animal as of commit 3, Cat back: %v", past.CheckClass("Animal"))
	}

	// Version 4 (from commit 11, today's) takes Cat out again: a diff
	// from commit 6 (Cat out) to 9 (Cat in) covers the state at 9.
	versions, firsts = append(versions, out), append(firsts, 11)
	sc = scanVersionsOf(t, versions[1:], firsts[1:], 1, out, sluice.RoleRead)
	if err := diffPast(sc, out, sluice.RoleRead, pos(6), pos(9)).CheckClass("Animal"); err == nil || !strings.Contains(sluice.ErrorMessage(err), "as of e-9-2147483647 cannot be shown") || !strings.Contains(sluice.ErrorMessage(err), "in effect from commit 11") {
		t.Errorf("Animal's diff from commit 6 to 9: %v", err)
	}
}

// TestPastSchemaNamesNoUnseenField: a field of a subdocument type a
// reader sees no field of is hidden from it (hiddenFrom), its name too:
// a schema change since a position that dropped its values does not name
// it to the reader as unknown, as it does to the admin.
func TestPastSchemaNamesNoUnseenField(t *testing.T) {
	t.Parallel()
	// Version 1 (commits 1 to 4): home one Vault; today's (from commit
	// 5): a list of them, a forced change that dropped the values.
	v1 := mustParse(t, `type Person { name: String home: Vault }
		type Vault @subdocument { pin: Int @private }`)
	now := mustParse(t, `type Person { name: String home: [Vault] }
		type Vault @subdocument { pin: Int @private }`)
	versions, firsts := []*sluice.Schema{v1, now}, []int64{1, 5}
	for _, c := range []struct {
		role sluice.Role
		want string
	}{{sluice.RoleRead, ""}, {sluice.RoleAdmin, "Person.home"}} {
		past, _ := pastSchema(scanVersionsOf(t, versions, firsts, 0, now, c.role), 0, now, c.role, sluice.Position{Epoch: "e", Seq: 3, Index: sluice.WholeCommit})
		if got := strings.Join(past.Hidden([]string{"Person"}), ","); got != c.want {
			t.Errorf("%s: hidden as of commit 3: %q, want %q", c.role, got, c.want)
		}
	}
}

// TestPastSchemaNamesTheChangeThatDropped: what cannot be shown as of a
// position names the schema change after it that dropped the values: the
// first after the position, not a later one that made the field or class
// again or dropped it again. Version 2 (from commit 5) drops Item.a,
// retypes Item.b, drops Tag and Old and takes Cat out of Animal; version
// 3 (from commit 8) makes them all again; version 4 (today's, from commit
// 11) drops Old and takes Cat out of Animal again. As of commit 3 each
// names commit 5; before, Item.a, Item.b and Tag named commit 8 and Old
// and Animal commit 11. As of commit 9 (version 3) Old and Animal name
// commit 11.
func TestPastSchemaNamesTheChangeThatDropped(t *testing.T) {
	t.Parallel()
	full := mustParse(t, `interface Animal { name: String } type Dog implements Animal { name: String } type Cat implements Animal { name: String }
		type Item { a: Int b: Int } type Tag { l: String } type Old { x: Int }`)
	v2 := mustParse(t, `interface Animal { name: String } type Dog implements Animal { name: String } type Cat { name: String }
		type Item { b: String }`)
	now := mustParse(t, `interface Animal { name: String } type Dog implements Animal { name: String } type Cat { name: String }
		type Item { a: Int b: Int } type Tag { l: String }`)
	versions, firsts := []*sluice.Schema{full, v2, full, now}, []int64{1, 5, 8, 11}
	pos := func(seq int64) sluice.Position {
		return sluice.Position{Epoch: "e", Seq: seq, Index: sluice.WholeCommit}
	}
	const dropped = "a schema change after that position (in effect from commit %d)"

	past, _ := pastSchema(scanVersionsOf(t, versions, firsts, 0, now, sluice.RoleRead), 0, now, sluice.RoleRead, pos(3))
	for what, got := range map[string]string{
		"Item.a": past.Unknown["Item"]["a"],
		"Item.b": past.Unknown["Item"]["b"],
		"Tag":    past.Lost["Tag"],
		"Old":    past.Lost["Old"],
		"Animal": sluice.ErrorMessage(past.CheckClass("Animal")),
	} {
		if want := fmt.Sprintf(dropped, 5); !strings.Contains(got, want) {
			t.Errorf("%s as of commit 3: %q, want %q", what, got, want)
		}
	}
	// As of commit 9 the scan starts at version 3 (at), as a diff's to.
	for _, sc := range []*versionScan{
		scanVersionsOf(t, versions, firsts, 2, now, sluice.RoleRead),
		scanVersionsOf(t, versions[2:], firsts[2:], 0, now, sluice.RoleRead),
	} {
		past, _ := pastSchema(sc, sc.at, now, sluice.RoleRead, pos(9))
		for what, got := range map[string]string{
			"Old":    past.Lost["Old"],
			"Animal": sluice.ErrorMessage(past.CheckClass("Animal")),
		} {
			if want := fmt.Sprintf(dropped, 11); !strings.Contains(got, want) {
				t.Errorf("%s as of commit 9 (at %d): %q, want %q", what, sc.at, got, want)
			}
		}
		if len(past.Unknown) != 0 || past.Lost["Tag"] != "" {
			t.Errorf("as of commit 9 (at %d): %v %v", sc.at, past.Unknown, past.Lost)
		}
	}
}

// mustParse parses sdl, failing the test when it does not parse.
func mustParse(t *testing.T, sdl string) *sluice.Schema {
	t.Helper()
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
