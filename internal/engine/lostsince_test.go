package engine_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/schema"
)

// docs is an engine.DocSource over documents in memory.
type docs []map[string]any

func (d *docs) Next() (schema.RawDocument, error) {
	if len(*d) == 0 {
		return schema.RawDocument{}, io.EOF
	}
	m := (*d)[0]
	*d = (*d)[1:]
	return schema.RawDocument{Map: m}, nil
}

// TestLostSinceWalksOncePerVersion: what a schema change since a commit
// hides from a reader is worked out once for all the commits of a schema
// version, not for each (a resumed stream or a page of history over 400
// commits walked 200 versions for each, 5 s), and still names what it
// hides: the same finding serves every commit of the version.
func TestLostSinceWalksOncePerVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "admin", Name: "lost", Schema: "type P { name: String ssn: String }"}); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for i := range 3 {
		src := &docs{{"@type": "P", "@id": fmt.Sprintf("p%d", i), "name": "N", "ssn": "1"}}
		res, err := e.Insert(ctx, admin, "admin", "lost", src, engine.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, res.Commit.Seq)
	}
	for _, sdl := range []string{"type P { name: String }", "type P { name: String ssn: Int }"} {
		if _, err := e.PutSchema(ctx, admin, "admin", "lost", sdl, engine.PutSchemaOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	d, cur, err := e.Database(ctx, admin, "admin", "lost", sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	var first *engine.Past
	for _, seq := range seqs {
		past, err := e.LostSince(ctx, d, cur, sluice.RoleRead, seq)
		if err != nil {
			t.Fatal(err)
		}
		if past == nil || past.Unknown["P"]["ssn"] == "" {
			t.Fatalf("commit %d: %+v, want P.ssn hidden", seq, past)
		}
		if first == nil {
			first = past
		} else if past != first {
			t.Fatalf("commit %d of the same version was worked out again", seq)
		}
	}
}
