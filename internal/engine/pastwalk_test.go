package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/pgtest"
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

// TestSharedWalkOutlivesTheReadThatStartedIt: reads that miss a cached
// walk of the schema versions wait for one walk (sharedwalk.go), which
// ran on the context of the read that started it: when that read's
// client went away, every read waiting for the walk failed with its
// cancellation, told that a statement "ran longer than statement_timeout
// allows", though their own clients were still there (a review's find).
// Both walks are shared so: a read as of a position's (scanVersions), and
// the one that names the tag of a document read now (dropsOf). The walk
// is held up by a lock on the schema versions, the first read cancelled
// while the second waits for its walk, then the lock let go: the second
// read answers.
func TestSharedWalkOutlivesTheReadThatStartedIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// frame is the function a read waits for the walk in.
		frame string
		// at is the position read as of (nil: now).
		at func(pos sluice.Position) *sluice.Position
	}{
		{"as of a position", "engine.(*Engine).scanVersions(", func(pos sluice.Position) *sluice.Position { return &pos }},
		{"a document now", "engine.(*Engine).dropsOf(", func(sluice.Position) *sluice.Position { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := pgtest.NewDatabase(t)
			e, _, admin := newEngineOn(t, url)
			pos := walkHistory(t, e, admin, "shared", 2, 3)
			// A second engine, with nothing of the walk cached, on a
			// store that has read the list of versions (the read's
			// first look, before its walk).
			e2, store2, admin2 := newEngineOn(t, url)
			d, _, err := e2.Database(ctx, admin2, "admin", "shared", sluice.RoleRead)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store2.SchemaVersions(ctx, d); err != nil {
				t.Fatal(err)
			}
			read := func(ctx context.Context) error {
				_, err := e2.Document(ctx, admin2, "admin", "shared", "Root/r", c.at(pos))
				return err
			}
			release := holdSchemaVersions(t, url)
			ctxA, cancelA := context.WithCancel(ctx)
			errA := make(chan error, 1)
			go func() { errA <- read(ctxA) }()
			waitForWalkers(t, c.frame, 1)
			errB := make(chan error, 1)
			go func() { errB <- read(ctx) }()
			waitForWalkers(t, c.frame, 2)
			cancelA() // the first read's client goes away
			if err := <-errA; !errors.Is(err, context.Canceled) {
				t.Errorf("the read whose client went away: %v, want its cancellation", err)
			}
			release()
			if err := <-errB; err != nil {
				t.Errorf("a read whose client is there failed with the walk of one that went away: %v", err)
			}
		})
	}
}

// TestSharedWalkEndsAtItsOwnLimit: a shared walk of schema versions, on a
// context no read's cancellation reaches, ends at its own limit, and the
// reads waiting for it are told that, not that a statement ran longer
// than statement_timeout allows.
func TestSharedWalkEndsAtItsOwnLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	e, _, admin := newEngineOn(t, url)
	pos := walkHistory(t, e, admin, "limit", 2, 3)
	e2, store2, admin2 := newEngineOn(t, url)
	d, s, err := e2.Database(ctx, admin2, "admin", "limit", sluice.RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store2.SchemaVersions(ctx, d); err != nil {
		t.Fatal(err)
	}
	e2.LimitWalks(100 * time.Millisecond)
	defer holdSchemaVersions(t, url)()
	_, _, err = e2.WalkOf(ctx, d, s, sluice.RoleRead, pos.Seq, pos.Seq)
	if sluice.ErrorCode(err) != sluice.CodeUnavailable || !strings.Contains(sluice.ErrorMessage(err), "walk of its schema versions, which took longer than 100ms") {
		t.Errorf("a walk held past its limit: %v (%q), want one naming the walk's limit", err, sluice.ErrorMessage(err))
	}
}

// holdSchemaVersions locks the table of schema versions of the database
// at url, so that a walk of them waits in Postgres, until the function it
// returns is called.
func holdSchemaVersions(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE sluice.schema_versions IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctx) }
}

// waitForWalkers waits until n goroutines wait in frame (a function that
// reads wait for a shared walk in), blocked: in the walk, or for it.
func waitForWalkers(t *testing.T, frame string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	buf := make([]byte, 1<<22)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		waiting := 0
		for _, g := range strings.Split(stacks, "\n\n") {
			state, _, _ := strings.Cut(g, "\n")
			if strings.Contains(g, frame) && !strings.Contains(state, "[running]") && !strings.Contains(state, "[runnable]") {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reads wait in %s, want %d", waiting, frame, n)
		}
		runtime.Gosched()
	}
}
