package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), pgtest.NewDatabase(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestMigrateIsIdempotentAndRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	if n, err := db.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("second Migrate applied %d: %v", n, err)
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != postgres.LatestVersion() {
		t.Fatalf("version %d (%v), want %d", v, err, postgres.LatestVersion())
	}
	_, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.ExecForTest(ctx, "INSERT INTO sluice.schema_migrations (version, name, readable_by) VALUES (999, 'future.sql', 999)")
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "schema version 999") || !strings.Contains(err.Error(), "upgrade sluice") {
		t.Fatalf("Migrate on a newer database: %v", err)
	}
}

// TestMigrateRunsBesideExpandMigrations: a database a newer binary
// migrated with expand migrations only (readable_by no newer than what
// this binary knows) is run on as it is: a rolling upgrade.
func TestMigrateRunsBesideExpandMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	latest := postgres.LatestVersion()
	if err := db.ExecDBForTest(ctx, "INSERT INTO sluice.schema_migrations (version, name, readable_by) VALUES ($1, 'expand.sql', $2)", latest+1, latest); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("Migrate beside an expand migration: applied %d, %v", n, err)
	}
	// A contract migration after it: this binary must be upgraded.
	if err := db.ExecDBForTest(ctx, "INSERT INTO sluice.schema_migrations (version, name, readable_by) VALUES ($1, 'contract.sql', $1)", latest+2); err != nil {
		t.Fatal(err)
	}
	_, err := db.Migrate(ctx)
	if want := fmt.Sprintf("needs a sluice binary that knows at least %d, but this one only knows %d: upgrade sluice", latest+2, latest); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Migrate beside a contract migration: %v, want %q", err, want)
	}
}

// noteDatabase creates organization o with database o/<name> whose schema
// has one class, Note, and returns them.
func noteDatabase(t *testing.T, db *postgres.DB, name string) (*sluice.Database, *sluice.Schema) {
	t.Helper()
	ctx := context.Background()
	s, err := schema.Parse("type Note { text: String! }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: name}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, d, s, postgres.Creator{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// commitN makes n single-document commits on d.
func commitN(t *testing.T, db *postgres.DB, d *sluice.Database, s *sluice.Schema, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		doc := &sluice.Document{ID: "Note/n" + string(rune('a'+i)), Type: "Note", Fields: map[string]any{"text": "x"}}
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, []*sluice.Document{doc}) }})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneKeepsNewestAndWhatSubscribersNeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	s, err := schema.Parse("type Note { text: String! }")
	if err != nil {
		t.Fatal(err)
	}
	a := &sluice.Database{Org: "o", Name: "a"}
	b := &sluice.Database{Org: "o", Name: "b"}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		if err := tx.CreateDatabase(ctx, a, s, postgres.Creator{}); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, b, s, postgres.Creator{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, a, s, 5)
	commitN(t, db, b, s, 5)

	// Nothing is older than an hour ago.
	if n, err := db.Prune(ctx, time.Now().Add(-time.Hour), 0, nil); err != nil || n != 0 {
		t.Fatalf("prune of recent history removed %d (%v)", n, err)
	}
	// Everything is older than a minute from now: a keeps what a
	// subscriber at seq 2 needs, b keeps only its newest commit.
	n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, map[int64]int64{a.ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2+4 {
		t.Fatalf("pruned %d commits, want 6", n)
	}
	for _, c := range []struct {
		d            *sluice.Database
		pruned, left int64
	}{{a, 2, 3}, {b, 4, 1}} {
		h, err := db.History(ctx, c.d.ID)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := db.CommitsAfter(ctx, c.d, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if h.PrunedSeq != c.pruned || int64(len(cs)) != c.left || cs[0].Seq != c.pruned+1 || len(cs[0].Changes) != 1 {
			t.Fatalf("%s: pruned through %d with %d commits left, want %d and %d", c.d.Name, h.PrunedSeq, len(cs), c.pruned, c.left)
		}
	}
}

// TestPruneKeepsWhatOtherReplicasNeed publishes floors for two replicas:
// pruning keeps everything after the lower one, and proceeds once both are
// withdrawn.
func TestPruneKeepsWhatOtherReplicasNeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	a, s := noteDatabase(t, db, "a")
	commitN(t, db, a, s, 6)
	if err := db.PublishFloors(ctx, "one", map[int64]int64{a.ID: 4}); err != nil {
		t.Fatal(err)
	}
	if err := db.PublishFloors(ctx, "two", map[int64]int64{a.ID: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2: replica two still needs commit 3 on", n, err)
	}
	for _, r := range []string{"one", "two"} {
		if err := db.PublishFloors(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 3 {
		t.Fatalf("pruned %d (%v), want 3 (all but the newest)", n, err)
	}
}

// Migration 3 turns the per-document change rows of migration 1 into
// batches; commits written before it read back exactly as they were.
func TestMigrationToChangeBatchesKeepsOldCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.MigrateToForTest(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// The database is made by hand: today's CreateDatabase writes tables
	// of later migrations.
	d := &sluice.Database{ID: 1, Org: "o", Name: "a", Epoch: "ep"}
	for _, sql := range []string{
		"INSERT INTO sluice.organizations (name) VALUES ('o')",
		"INSERT INTO sluice.databases (id, org, name, epoch, schema_sdl) VALUES (1, 'o', 'a', 'ep', 'type Note { text: String! }')",
		"INSERT INTO sluice.commit_counters (db_id) VALUES (1)",
		"CREATE SCHEMA sluice_db_1",
		`CREATE TABLE sluice_db_1."Note" (_id text PRIMARY KEY, _commit_uid bigint NOT NULL, text text)`,
	} {
		if err := db.ExecDBForTest(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	before := `{"@id": "Note/b", "@type": "Note", "text": "old"}` // spacing kept as written
	after := `{"@id":"Note/b","@type":"Note","text":"new"}`
	for _, sql := range []string{
		"INSERT INTO sluice.commits (db_id, seq, uid, n_changes) VALUES ($1, 1, 900001, 3)",
		`INSERT INTO sluice.changes (commit_uid, idx, class, doc_id, op, before, after) VALUES
			(900001, 0, 'Note', 'Note/a', 1, NULL, '{"@id":"Note/a","@type":"Note","text":"x"}'),
			(900001, 1, 'Note', 'Note/b', 2, '` + before + `', '` + after + `'),
			(900001, 2, 'Note', 'Note/c', 3, '{"@id":"Note/c","@type":"Note","text":"y"}', NULL)`,
		"UPDATE sluice.commit_counters SET last_seq = 1 WHERE db_id = $1",
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, d.ID)
		}
		if err := db.ExecDBForTest(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if n, err := db.Migrate(ctx); err != nil || n != postgres.LatestVersion()-2 {
		t.Fatalf("Migrate applied %d: %v", n, err)
	}
	c, err := db.Commit(ctx, d, 1, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := []sluice.Change{
		{Index: 0, Class: "Note", DocID: "Note/a", Op: sluice.OpAdded, After: []byte(`{"@id":"Note/a","@type":"Note","text":"x"}`)},
		{Index: 1, Class: "Note", DocID: "Note/b", Op: sluice.OpUpdated, Before: []byte(before), After: []byte(after)},
		{Index: 2, Class: "Note", DocID: "Note/c", Op: sluice.OpDeleted, Before: []byte(`{"@id":"Note/c","@type":"Note","text":"y"}`)},
	}
	if len(c.Changes) != len(want) {
		t.Fatalf("%d changes, want %d: %+v", len(c.Changes), len(want), c.Changes)
	}
	for i, w := range want {
		g := c.Changes[i]
		if g.Index != w.Index || g.Class != w.Class || g.DocID != w.DocID || g.Op != w.Op || string(g.Before) != string(w.Before) || string(g.After) != string(w.After) {
			t.Errorf("change %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// A commit whose schema changed after its documents were validated is
// refused, and since COMMIT travels behind the commit row in the same
// round trip, nothing of it may be left, grouped or not.
func TestWriteRefusesAChangedSchema(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			d, s := noteDatabase(t, db, "a")
			_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Group: group, Meta: postgres.CommitMeta{User: "admin"},
				Documents: func(ctx context.Context, w *postgres.Writer) error {
					doc := &sluice.Document{ID: "Note/n1", Type: "Note", Fields: map[string]any{"text": "x"}}
					if err := w.Insert(ctx, []*sluice.Document{doc}); err != nil {
						return err
					}
					// A schema change commits meanwhile.
					return db.ExecDBForTest(ctx, "UPDATE sluice.commit_counters SET schema_version = schema_version + 1 WHERE db_id = $1", d.ID)
				}})
			if sluice.ErrorCode(err) != sluice.CodeConflict || !strings.Contains(err.Error(), "schema of o/a changed") {
				t.Fatalf("got %v, want a Conflict about the schema change", err)
			}
			// A read prepared for the old version is refused too; one
			// for the new version finds nothing.
			if _, _, err := db.Document(ctx, d, s, "Note/n1"); !errors.Is(err, postgres.ErrSchemaChanged) {
				t.Fatalf("a read for the old schema version: %v", err)
			}
			cur := *d
			cur.SchemaVersion++
			if _, _, err := db.Document(ctx, &cur, s, "Note/n1"); sluice.ErrorCode(err) != sluice.CodeNotFound {
				t.Fatalf("the document was written: %v", err)
			}
			if cs, err := db.CommitsAfter(ctx, d, 0, 10); err != nil || len(cs) != 0 {
				t.Fatalf("commits after the refused one: %v %v", cs, err)
			}
		})
	}
}

// TestNotifierAnnouncesEveryDatabase wakes the notifier for one database,
// then for three more at once, as a burst of commits under load does: a
// listener must hear of every one of them (notifications of a burst that
// arrives while a send is being spaced out go in the next one).
func TestNotifierAnnouncesEveryDatabase(t *testing.T) {
	t.Parallel()
	db := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := db.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	n := postgres.NewNotifier(db)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.Run(runCtx) }()
	defer func() { stop(); <-done }()
	heard := map[int64]bool{}
	wait := func(ids ...int64) {
		t.Helper()
		for _, id := range ids {
			for !heard[id] {
				got, err := l.Wait(ctx)
				if err != nil {
					t.Fatalf("waiting for database %d: %v (heard %v)", id, err, heard)
				}
				heard[got] = true
			}
		}
	}
	n.Wake(1)
	wait(1)
	n.Wake(2)
	n.Wake(3)
	n.Wake(4)
	wait(2, 3, 4)
}

// TestPruneKeepsADatabasesLongerRetention: a database that keeps its
// commits for ever, or for longer than the server's retention, keeps them
// when others are pruned; reset, it is pruned as the others.
func TestPruneKeepsADatabasesLongerRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	plain, s := noteDatabase(t, db, "plain")
	forever, longer := &sluice.Database{Org: "o", Name: "forever"}, &sluice.Database{Org: "o", Name: "longer"}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateDatabase(ctx, forever, s, postgres.Creator{}); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, longer, s, postgres.Creator{})
	}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*sluice.Database{plain, forever, longer} {
		commitN(t, db, d, s, 3)
	}
	zero, twoDays := time.Duration(0), 48*time.Hour
	if err := db.SetLogRetention(ctx, forever, &zero); err != nil {
		t.Fatal(err)
	}
	if err := db.SetLogRetention(ctx, longer, &twoDays); err != nil {
		t.Fatal(err)
	}
	pruned := func() []int64 {
		var out []int64
		for _, d := range []*sluice.Database{plain, forever, longer} {
			h, err := db.History(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, h.PrunedSeq)
		}
		return out
	}
	// Three hours on, with a retention of one hour: only plain is
	// pruned (all but its newest commit).
	if _, err := db.Prune(ctx, time.Now().Add(3*time.Hour), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if got := pruned(); !slices.Equal(got, []int64{2, 0, 0}) {
		t.Fatalf("pruned through %v, want [2 0 0]", got)
	}
	// Three days on: longer is pruned too; forever never is.
	if _, err := db.Prune(ctx, time.Now().Add(72*time.Hour), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if got := pruned(); !slices.Equal(got, []int64{2, 0, 2}) {
		t.Fatalf("pruned through %v, want [2 0 2]", got)
	}
	if err := db.SetLogRetention(ctx, forever, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(ctx, time.Now().Add(3*time.Hour), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if got := pruned(); !slices.Equal(got, []int64{2, 2, 2}) {
		t.Fatalf("after the reset, pruned through %v, want [2 2 2]", got)
	}
}

// TestDeleteOrganizationStillInUse: an organization that still has a
// database or a user when its row is deleted (one made by a creation that
// raced the deletion, after it read them) is a Conflict to retry, not the
// foreign key's error answered as an internal one.
func TestDeleteOrganizationStillInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	s, err := schema.Parse("type Note { text: String }")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "busy"); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, &sluice.Database{Org: "busy", Name: "kept"}, s, postgres.Creator{})
	}}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.DeleteOrganization(ctx, "busy")
	}})
	if sluice.ErrorCode(err) != sluice.CodeConflict || !strings.Contains(err.Error(), "delete it again") {
		t.Fatalf("deleting an organization that still has a database: %v, want a Conflict to retry", err)
	}
}

// TestSetPasswordOfADeletedUser: a password set for a user read before it
// was deleted (and perhaps made again under its name) is NotFound, not a
// success that changed nothing.
func TestSetPasswordOfADeletedUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	u := &sluice.User{Org: "pw", Name: "gone"}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "pw"); err != nil {
			return err
		}
		return tx.CreateUser(ctx, u, "old-hash")
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.DeleteUser(ctx, u); err != nil {
			return err
		}
		return tx.CreateUser(ctx, &sluice.User{Org: "pw", Name: "gone"}, "other-hash")
	}}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.SetPassword(ctx, u, "new-hash")
	}})
	if sluice.ErrorCode(err) != sluice.CodeNotFound {
		t.Fatalf("setting the password of a deleted user: %v, want NotFound", err)
	}
	if _, hash, err := db.UserByName(ctx, "gone"); err != nil || hash != "other-hash" {
		t.Fatalf("the user made again under the name: hash %q, %v; want other-hash", hash, err)
	}
}
