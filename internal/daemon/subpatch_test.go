package daemon_test

import (
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestUpdateMergesSubdocuments: X_update merges a subdocument given into
// the stored one, as REST's PATCH does, without the subdocument's
// required fields given again (its patch input has every field
// optional), nested subdocuments too; null removes an optional field, and
// a merge that leaves a required field missing is refused naming it.
func TestUpdateMergesSubdocuments(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", `type Geo @subdocument { lat: Float! lon: Float! }
type Address @subdocument { city: String! zip: String geo: Geo }
type Person { name: String home: Address }`)
	gqlData(t, d, dt.Admin(), "people", `mutation { Person_insert(documents: [{_id: "alice", name: "Alice", home: {city: "Oslo", zip: "1", geo: {lat: 1, lon: 2}}}, {_id: "bob", name: "Bob"}]) }`)
	gqlData(t, d, dt.Admin(), "people", `mutation { Person_update(documents: [{_id: "alice", home: {zip: "10", geo: {lon: 3}}}]) }`)
	got := gqlData(t, d, dt.Admin(), "people", `{ Person(filter: {_id: "Person/alice"}) { name home { city zip geo { lat lon } } } }`)
	if want := `{"Person":[{"name":"Alice","home":{"city":"Oslo","zip":"10","geo":{"lat":1,"lon":3}}}]}`; got != want {
		t.Fatalf("after the update: %s, want %s", got, want)
	}
	gqlData(t, d, dt.Admin(), "people", `mutation { Person_update(documents: [{_id: "alice", home: {zip: null}}]) }`)
	got = gqlData(t, d, dt.Admin(), "people", `{ Person(filter: {_id: "Person/alice"}) { home { city zip } } }`)
	if want := `{"Person":[{"home":{"city":"Oslo","zip":null}}]}`; got != want {
		t.Fatalf("after removing zip: %s, want %s", got, want)
	}
	msg, code := gqlError(t, d, dt.Admin(), "people", `mutation { Person_update(documents: [{_id: "bob", home: {zip: "2"}}]) }`)
	if code != "BAD_USER_INPUT" || !strings.Contains(msg, "city") {
		t.Fatalf("a merge into no stored subdocument, its required city missing: %s %s", code, msg)
	}
}
