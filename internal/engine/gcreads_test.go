package engine_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// TestReadsAreSmallRequests: a read is a small request for the
// collector's target (a read leaves nothing resident, as a small write
// does): one that runs while another request is in progress makes them
// overlap, which lets a burst of reads raise the target without waiting
// two seconds. Not parallel: the requests in progress are the process's.
func TestReadsAreSmallRequests(t *testing.T) {
	e, _, u := newEngine(t)
	ctx := context.Background()
	if _, err := e.CreateDatabase(ctx, u, engine.NewDatabase{Org: "admin", Name: "gc", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	d, s, _, err := e.GraphQLDatabase(ctx, u, "admin", "gc")
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]func() error{
		"Document": func() error {
			_, err := e.Document(ctx, u, "admin", "gc", "Note/a", nil)
			if sluice.ErrorCode(err) == sluice.CodeNotFound {
				return nil // it read all the same
			}
			return err
		},
		"Documents": func() error {
			return e.Documents(ctx, u, "admin", "gc", engine.DocumentQuery{Type: "Note"}, func(engine.ReadAt) {}, func([]byte) error { return nil })
		},
		"QueryDocuments": func() error {
			_, err := e.QueryDocuments(ctx, d, s, engine.DocQuery{Class: "Note", Classes: []string{"Note"}, Limit: -1})
			return err
		},
		"DocumentsByID": func() error {
			_, err := e.DocumentsByID(ctx, d, s, []string{"Note/a"}, -1)
			return err
		},
	}
	done := engine.ServingRequest()
	for name, read := range reads {
		engine.RequestsOverlapped()
		if err := read(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !engine.RequestsOverlapped() {
			t.Errorf("%s did not count as a small request", name)
		}
	}
	done()
	engine.RequestsOverlapped()
	if err := reads["QueryDocuments"](); err != nil {
		t.Fatal(err)
	}
	if engine.RequestsOverlapped() {
		t.Errorf("a read alone made requests overlap")
	}
}
