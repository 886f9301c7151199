package daemon_test

import (
	"regexp"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestInterfaceStreamsEndWhenMembershipChanges: a schema change that takes
// a class out of an interface (Cat dropped with force, or made to stop
// implementing Animal) or brings one with documents in (Cat made to
// implement Animal) changes which documents a stream of Animal covers,
// without any event. REST streams of Animal, GraphQL subscriptions and
// _ChangeSet selecting Animal, open at the change, end there with a
// Conflict naming it, and so do streams resumed from before the change
// (they went on past it silently, a client mirroring the Animals kept the
// dead Cats or never learnt of the new ones). A change that leaves the
// Animals as they were (a field added, an unrelated class, a new class
// implementing Animal, which has no documents) ends nothing.
func TestInterfaceStreamsEndWhenMembershipChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	commitOf := regexp.MustCompile(`changed to version \d+ \(commit \d+\)`)
	for _, c := range []struct {
		name, from, to, force string
		// want names the change in the error; "" for a change after
		// which the streams go on.
		want string
	}{
		{"catdropped", zooSchema, "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }", "?force=true", "which dropped class Cat"},
		{"catleaves", zooSchema, zooCatNotAnimal, "?force=true", "which made Cat stop implementing Animal"},
		{"catjoins", zooCatNotAnimal, zooSchema, "", "which made Cat implement Animal"},
		{"unrelated", zooSchema, "interface Animal { name: String! }\ntype Cat implements Animal { name: String! }\ntype Dog implements Animal { name: String! age: Int }\ntype Bird implements Animal { name: String! }\ntype Note { text: String }", "?force=true", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d.CreateDatabase(t, c.name, c.from)
			db := "/api/document/admin/" + c.name
			d.MustDo(t, 200, dt.Admin(), "POST", db, `{"@type":"Cat","@id":"tom","name":"Tom"}`)
			d.MustDo(t, 200, dt.Admin(), "POST", db, `{"@type":"Dog","@id":"rex","name":"Rex"}`)
			p0 := d.MustDo(t, 200, dt.Admin(), "GET", db+"?type=Dog", nil).Header.Get("Sluice-Position")
			if p0 == "" {
				t.Fatal("no Sluice-Position")
			}
			gql := "/api/graphql/admin/" + c.name
			open := func(kind, from string) *dt.Stream {
				var req dt.StreamRequest
				switch kind {
				case "REST":
					req = dt.StreamRequest{Path: "/api/subscribe/admin/" + c.name + "/Animal"}
				case "GraphQL":
					req = dt.StreamRequest{Method: "POST", Path: gql, Body: `{"query":"subscription { Animal_added { _id } }"}`, Header: []string{"Accept", "text/event-stream"}}
				case "_ChangeSet":
					req = dt.StreamRequest{Method: "POST", Path: gql, Body: `{"query":"subscription { _ChangeSet { Animal_added { _id } } }"}`, Header: []string{"Accept", "text/event-stream"}}
				}
				if from != "" {
					req.Header = append(req.Header, "Last-Event-ID", from)
				}
				s := d.MustOpenStream(t, dt.Admin(), req)
				if f := s.Event(); !strings.HasPrefix(f.String(), ": connected") {
					t.Fatalf("%s stream: first frame %s", kind, f)
				}
				return s
			}
			kinds := []string{"REST", "GraphQL", "_ChangeSet"}
			live := map[string]*dt.Stream{}
			for _, k := range kinds {
				live[k] = open(k, "")
			}
			d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/"+c.name+c.force, c.to)
			d.MustDo(t, 200, dt.Admin(), "POST", db, `{"@type":"Dog","@id":"max","name":"Max"}`)

			// check reads the first event of stream s of kind: the
			// Conflict naming the change, or Dog/max when the change
			// leaves the Animals as they were. It returns the error's
			// version and commit.
			check := func(what, kind string, s *dt.Stream) string {
				f := s.Event()
				if c.want == "" {
					if !strings.Contains(f.String(), `Dog/max`) || strings.Contains(f.String(), "onflict") || strings.Contains(f.String(), "CONFLICT") {
						t.Errorf("%s %s stream of Animal after a change that leaves the Animals as they were: %s; want Dog/max", what, kind, f)
					}
					return ""
				}
				code := `"CONFLICT"`
				if kind == "REST" {
					code = "api:Conflict"
					if f.Field("event") != "error" {
						t.Errorf("%s REST stream of Animal at the change: %s; want an error event", what, f)
					}
				}
				if !strings.Contains(f.String(), code) || !strings.Contains(f.String(), c.want) {
					t.Errorf("%s %s stream of Animal at the change: %s; want %s naming the change (%s)", what, kind, f, code, c.want)
				}
				return commitOf.FindString(f.String())
			}
			for _, k := range kinds {
				at := check("open", k, live[k])
				// A stream resumed from before the change ends at the
				// same change, or goes on as the open one did.
				if got := check("resumed", k, open(k, p0)); got != at {
					t.Errorf("%s stream resumed from %s ends at %q; the open one at %q", k, p0, got, at)
				}
			}
		})
	}
}
