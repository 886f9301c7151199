package daemon_test

import (
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestChangeSetWithoutChildrenOutlivesRegrouping: a _ChangeSet field of a
// parent without its children (include_children: false, given on
// _ChangeSet or on the field) selects the parent's own documents only,
// so a schema change that takes a class out of the parent, or brings
// one in, leaves its selection as it was: the stream goes on, as a
// change of a class it does not select leaves it (docs/subscriptions.md,
// What ends a stream). It ended with CONFLICT naming the change. A
// field of an abstract parent without its children selects nothing, and
// ends nothing either. One that selects the children still ends.
func TestChangeSetWithoutChildrenOutlivesRegrouping(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const (
		from = "interface Pet @concrete { name: String! }\ninterface Animal { name: String! }\ntype Cat implements Pet & Animal { name: String! }\ntype Dog implements Pet & Animal { name: String! }"
		to   = "interface Pet @concrete { name: String! }\ninterface Animal { name: String! }\ntype Cat { name: String! }\ntype Dog implements Pet & Animal { name: String! }"
	)
	// Pet made abstract: its own documents go, and every stream of them
	// ends.
	const abstract = "interface Pet { name: String! }\ninterface Animal { name: String! }\ntype Cat implements Pet & Animal { name: String! }\ntype Dog implements Pet & Animal { name: String! }"
	for _, c := range []struct {
		name, query, to string
		ends            string // the change named by the CONFLICT; "": none
	}{
		{"top", `subscription { _ChangeSet(include_children: false) { Pet_added { _id } Animal_added { _id } Dog_added { _id } } }`, to, ""},
		{"field", `subscription { _ChangeSet { Pet_added(include_children: false) { _id } Animal_added(include_children: false) { _id } Dog_added { _id } } }`, to, ""},
		{"overridden", `subscription { _ChangeSet(include_children: false) { Pet_added(include_children: true) { _id } Dog_added { _id } } }`, to, "made Cat stop implementing Pet"},
		{"both", `subscription { _ChangeSet { Pet_added(include_children: false) { _id } Pet_deleted { _id } } }`, to, "made Cat stop implementing Pet"},
		{"abstract", `subscription { _ChangeSet(include_children: false) { Pet_added { _id } Dog_added { _id } } }`, abstract, "made Pet an interface"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d.CreateDatabase(t, c.name, from)
			db := "/api/document/admin/" + c.name
			d.MustDo(t, 200, dt.Admin(), "POST", db, `{"@type":"Cat","@id":"tom","name":"Tom"}`)
			open := func(from string) *dt.Stream {
				req := dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/" + c.name, Body: `{"query":"` + strings.ReplaceAll(c.query, `"`, `\"`) + `"}`, Header: []string{"Accept", "text/event-stream"}}
				if from != "" {
					req.Header = append(req.Header, "Last-Event-ID", from)
				}
				s := d.MustOpenStream(t, dt.Admin(), req)
				if f := s.Event(); !strings.HasPrefix(f.String(), ": connected") {
					t.Fatalf("first frame %s", f)
				}
				return s
			}
			live := open("")
			d.MustDo(t, 200, dt.Admin(), "POST", db, `{"@type":"Pet","@id":"old","name":"Old"}`)
			p0 := d.MustDo(t, 200, dt.Admin(), "GET", db+"?type=Cat", nil).Header.Get("Sluice-Position")
			if f := live.Event().String(); !strings.Contains(f, "Pet/old") {
				t.Fatalf("the commit of Pet/old: %s", f)
			}
			d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/"+c.name+"?force=true", c.to)
			if c.to == abstract {
				d.MustDo(t, 200, dt.Admin(), "POST", db, `{"@type":"Dog","@id":"rex","name":"Rex"}`)
			} else {
				d.MustDo(t, 200, dt.Admin(), "POST", db, `[{"@type":"Pet","@id":"own","name":"Own"},{"@type":"Dog","@id":"rex","name":"Rex"}]`)
			}
			for what, s := range map[string]*dt.Stream{"open": live, "resumed": open(p0)} {
				f := s.Event().String()
				if c.ends != "" {
					if !strings.Contains(f, `"CONFLICT"`) || !strings.Contains(f, c.ends) {
						t.Errorf("%s %s, across the change that %s: %s; want CONFLICT naming it", what, c.query, c.ends, f)
					}
					continue
				}
				if want := `{"Pet_added":[{"_id":"Pet/own"}],"Animal_added":[],"Dog_added":[{"_id":"Dog/rex"}]}`; !strings.Contains(f, want) {
					t.Errorf("%s %s, across the change that made Cat stop implementing Pet and Animal: %s; want the next commit, %s", what, c.query, f, want)
				}
			}
		})
	}
}
