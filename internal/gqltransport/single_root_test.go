package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSubscriptionOfTwoRootFieldsLocatesThem: a subscription selecting two
// response names (two aliases of one field, or two fields) is refused
// as the GraphQL spec's "Single root field" validation has it: one error
// with the locations of the fields past the first, over a plain HTTP
// request and the SSE transport alike, for an event subscription and a
// live query. Before, two aliases of one field passed validation and were
// refused with no locations.
func TestSubscriptionOfTwoRootFieldsLocatesThem(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "roots", staffSDL)
	for _, c := range []struct{ what, query, locations string }{
		{"two aliases of an event field", "subscription {\n  a: Person_added { _id }\n  b: Person_added { name }\n}", "[{3 3}]"},
		{"three aliases of a live field", "subscription S {\n  a: Person { _id }\n  b: Person { _id } c: Person { name }\n}", "[{3 3} {3 21}]"},
		{"two fields", "subscription {\n  Person_added { _id }\n  Team_added { _id }\n}", "[{3 3}]"},
		{"an alias repeated", "subscription { a: Person_added { _id } ... on Subscription { x: Person_added { name } } }", "[{1 62}]"},
	} {
		name := "Anonymous Subscription"
		if strings.HasPrefix(c.query, "subscription S") {
			name = `Subscription "S"`
		}
		// A plain request's answer, and the SSE stream's one result
		// before it completes.
		plain := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/graphql/admin/roots", body(c.query), "Content-Type", "application/json")
		frames := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/roots", body(c.query), nil, "Accept", sse).Ended()
		if len(frames) != 2 || frames[0][0] != "event: next" || frames[1][0] != "event: complete" {
			t.Errorf("%s over SSE: %q, want one result and complete", c.what, frames)
			continue
		}
		for _, a := range []struct{ how, body string }{{"a plain request", string(plain.Body)}, {"SSE", frames[0].Field("data")}} {
			var ans struct {
				Data   json.RawMessage
				Errors []struct {
					Message   string
					Locations []struct{ Line, Column int }
				}
			}
			if err := json.Unmarshal([]byte(a.body), &ans); err != nil || ans.Data != nil || len(ans.Errors) != 1 {
				t.Errorf("%s over %s: %s, want one error", c.what, a.how, a.body)
				continue
			}
			e := ans.Errors[0]
			if got := fmt.Sprint(e.Locations); e.Message != name+" must select only one top level field." || got != c.locations {
				t.Errorf("%s over %s: %q at %s, want %q at %s", c.what, a.how, e.Message, got, name+" must select only one top level field.", c.locations)
			}
		}
	}
	// One response name, however many times selected, is one root field.
	s := subscribe(t, d, "roots", "subscription { a: Person_added { _id } a: Person_added { name } }")
	s.connected()
	// A field left out by a variable counts as the operation runs: the
	// same error, located, when it is not left out.
	const skip = "subscription($s: Boolean!) { a: Person_added { _id } b: Person_added @skip(if: $s) { _id } }"
	s = mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/roots", body(skip, "variables", map[string]any{"s": true}), nil, "Accept", sse)
	s.connected()
	frames := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/roots", body(skip, "variables", map[string]any{"s": false}), nil, "Accept", sse).Ended()
	if want := `{"errors":[{"message":"Anonymous Subscription must select only one top level field.","locations":[{"line":1,"column":54}],"extensions":{"code":"BAD_USER_INPUT"}}]}`; len(frames) != 2 || frames[0].Field("data") != want {
		t.Errorf("a field a variable leaves in: %q, want %s", frames, want)
	}
}
