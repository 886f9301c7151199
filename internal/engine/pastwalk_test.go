package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// walkSchema is version v of a schema whose every change touches each of
// its subdocument classes in what a read of the past walks (a field
// renamed): the digest of each version is as large as the schema.
func walkSchema(classes, v int) string {
	var b strings.Builder
	b.WriteString("type Root { name: String }\n")
	for c := range classes {
		fmt.Fprintf(&b, "type S%d @subdocument { a: String b: Int c: Float d: Boolean e: String v%d: Int }\n", c, v)
	}
	return b.String()
}

// walkHistory makes database org/name with a document (r) in a first
// version of walkSchema(classes, ·), then changes that schema changes
// times, and returns the end of the document's commit.
func walkHistory(t testing.TB, e *engine.Engine, admin *sluice.User, name string, classes, changes int) sluice.Position {
	t.Helper()
	ctx := context.Background()
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "admin", Name: name, Schema: walkSchema(classes, 0)}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Insert(ctx, admin, "admin", name, &docs{{"@type": "Root", "@id": "r", "name": "N"}}, engine.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= changes; v++ {
		if _, err := e.PutSchema(ctx, admin, "admin", name, walkSchema(classes, v), engine.PutSchemaOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Commit.End()
}

// BenchmarkReadAsOfWalk: one read of a document as of a position before
// 152 schema changes of 900 classes each, each change touching every
// class (a review's case: the digests of the versions, about 94 MB as
// their cache counts them, do not fit it, 32 MiB, and every read walked
// the versions again, parsing each). The first read walks the versions
// from the position's to today's; see docs/benchmarks.md, "Reads of the
// past".
func BenchmarkReadAsOfWalk(b *testing.B) {
	ctx := context.Background()
	e, _, admin := newEngine(b)
	pos := walkHistory(b, e, admin, "walk", 900, 152)
	read := func() {
		doc, err := e.Document(ctx, admin, "admin", "walk", "Root/r", &pos)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(string(doc.JSON), `"N"`) {
			b.Fatalf("as of %s: %s", pos, doc.JSON)
		}
	}
	// The first read walks the versions (first-ns); ns/op is the reads
	// after it, and walk-bytes what the cached walk holds.
	start := time.Now()
	read()
	first := time.Since(start)
	b.ResetTimer()
	for range b.N {
		read()
	}
	b.ReportMetric(float64(first.Nanoseconds()), "first-ns")
	b.ReportMetric(float64(e.WalkBytes()), "walk-bytes")
}

// TestReadAsOfWalksOnce: a read of the past repeated does not walk the
// schema versions again when their digests do not fit their cache (a
// review's 152 changes of 900 classes: 94 MB of digests, 32 MiB of
// cache, every read parsed every version, 2 s). The cache of digests is
// made to hold one here: a read that walks leaves a digest in it. What
// the walk found is cached per today's version: a schema change makes
// the next read walk again, and see what the change did.
func TestReadAsOfWalksOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	pos := walkHistory(t, e, admin, "once", 3, 4)
	read := func() *engine.ReadDocument {
		t.Helper()
		doc, err := e.Document(ctx, admin, "admin", "once", "Root/r", &pos)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	e.KeepDigests(1)
	first := read()
	if n := e.DigestsKept(); n != 1 {
		t.Fatalf("the first read as of %s left %d digests, want 1 (it walks)", pos, n)
	}
	e.KeepDigests(1)
	again := read()
	if n := e.DigestsKept(); n != 0 {
		t.Errorf("the same read again walked the versions (%d digests made)", n)
	}
	if string(again.JSON) != string(first.JSON) || !strings.Contains(string(first.JSON), `"name":"N"`) {
		t.Errorf("as of %s: %s, then %s", pos, first.JSON, again.JSON)
	}
	// A change of Root.name's type drops its values then: the read
	// walks again and no longer shows it.
	if _, err := e.PutSchema(ctx, admin, "admin", "once", strings.Replace(walkSchema(3, 4), "name: String", "name: Int", 1), engine.PutSchemaOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	after := read()
	if n := e.DigestsKept(); n != 1 {
		t.Errorf("the read after a schema change left %d digests, want 1 (it walks)", n)
	}
	if strings.Contains(string(after.JSON), `"name"`) || strings.Join(after.Hidden, ",") != "Root.name" {
		t.Errorf("as of %s after name's type changed: %s (hidden %v)", pos, after.JSON, after.Hidden)
	}
}

// TestCachedWalksAreKeptApart: a walk of the schema versions found cached
// is one made for the same reader's role and the same version at a
// diff's end: a field protected for a while since the position is
// hidden from a reader, not from an admin, whichever walked first, and a
// diff's walk knows the version at its end after a read as of its start.
func TestCachedWalksAreKeptApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "admin", Name: "apart", Schema: "type P { name: String ssn: String }"}); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for i, sdl := range []string{"type P { name: String ssn: String @private }", "type P { name: String ssn: String }"} {
		res, err := e.Insert(ctx, admin, "admin", "apart", &docs{{"@type": "P", "@id": fmt.Sprintf("p%d", i), "name": "N", "ssn": "1"}}, engine.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, res.Commit.Seq)
		if _, err := e.PutSchema(ctx, admin, "admin", "apart", sdl, engine.PutSchemaOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	d, cur, err := e.Database(ctx, admin, "admin", "apart", sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role       sluice.Role
		seq, toSeq int64
		at         int
		hidden     string
	}{
		{sluice.RoleAdmin, seqs[0], seqs[0], 0, ""},
		{sluice.RoleRead, seqs[0], seqs[0], 0, "P.ssn"},
		{sluice.RoleAdmin, seqs[0], seqs[0], 0, ""},
		{sluice.RoleRead, seqs[0], seqs[1], 1, "P.ssn"},
		{sluice.RoleRead, seqs[0], seqs[0], 0, "P.ssn"},
	} {
		at, hidden, err := e.WalkOf(ctx, d, cur, c.role, c.seq, c.toSeq)
		if err != nil {
			t.Fatal(err)
		}
		if at != c.at || strings.Join(hidden, ",") != c.hidden {
			t.Errorf("role %v, commits %d to %d: at %d, hidden %v; want %d, %q", c.role, c.seq, c.toSeq, at, hidden, c.at, c.hidden)
		}
	}
}
