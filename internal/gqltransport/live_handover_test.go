package gqltransport

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/stream"
)

// liveQueryOn returns live query q of database admin/db, created with
// sdl and the documents docs (a JSON array), on a fresh Postgres.
func liveQueryOn(t *testing.T, sdl, docs, q string) *graph.LiveQuery {
	t.Helper()
	lq, _ := liveQueryAs(t, "", sdl, docs, q)
	return lq
}

// liveQueryAs is liveQueryOn with the live query of a new user named
// user, with the read role (the super user's when user is ""), and it
// also returns the Postgres store.
func liveQueryAs(t *testing.T, user, sdl, docs, q string) (*graph.LiveQuery, *postgres.DB) {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	store, err := postgres.Open(ctx, pgtest.NewDatabase(t), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, auth.New(store, 4, nil), logger, engine.Hooks{})
	if _, err := eng.Bootstrap(ctx, "pw"); err != nil {
		t.Fatal(err)
	}
	admin := &sluice.User{Name: "admin", Org: "admin", Superuser: true}
	if _, err := eng.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "admin", Name: "db", Schema: sdl}); err != nil {
		t.Fatal(err)
	}
	h := graph.NewHandler(eng, graph.Options{Logger: logger})
	operation := func(query string, vars map[string]any) (context.Context, *graph.ExecutableSchema, graphql.GraphExecutor, *graphql.OperationContext) {
		t.Helper()
		octx, es, exec, err := h.Operation(ctx, admin, "admin", "db")
		if err != nil {
			t.Fatal(err)
		}
		op, errs := exec.CreateOperationContext(octx, &graphql.RawParams{Query: query, Variables: vars})
		if errs != nil {
			t.Fatal(errs)
		}
		return octx, es, exec, op
	}
	octx, _, exec, op := operation(`mutation($d: JSON!) { _insertDocuments(json: $d) }`, map[string]any{"d": docs})
	responses, rctx := exec.DispatchOperation(graphql.WithOperationContext(octx, op), op)
	if resp := responses(rctx); len(resp.Errors) > 0 {
		t.Fatal(resp.Errors)
	}
	as := admin
	if user != "" {
		if as, err = eng.CreateUser(ctx, admin, "admin", user, user+"-password"); err != nil {
			t.Fatal(err)
		}
		if err := eng.SetRole(ctx, admin, "admin", "db", user, sluice.RoleRead); err != nil {
			t.Fatal(err)
		}
	}
	octx, es, exec, err := h.Operation(ctx, as, "admin", "db")
	if err != nil {
		t.Fatal(err)
	}
	op, errs := exec.CreateOperationContext(octx, &graphql.RawParams{Query: q})
	if errs != nil {
		t.Fatal(errs)
	}
	lq, err := es.NewLiveQuery(op, graph.RequestFrom(octx))
	if err != nil {
		t.Fatal(err)
	}
	return lq, store
}

// TestLiveHandOverReadsAsTheNewOwner: rita's share of 5 documents, which
// otto's live query joined, is past what rita may still hold
// (live_rows_per_user 10, her other live queries hold 8): its charge
// moves to otto, and it is read again as otto's read, under a token of
// his. With otto's reads all running, it is not read under rita's token
// (found by review: the read after the charge moved ran under the token
// the settle took for rita, so otto's reads were not bounded by his half
// of the cores, and rita's, who may have left the share, were taken):
// it stays due, to be settled once otto's token is free, and is then
// read and charged to otto.
func TestLiveHandOverReadsAsTheNewOwner(t *testing.T) {
	t.Parallel()
	var docs []string
	for i := 1; i <= 5; i++ {
		docs = append(docs, fmt.Sprintf(`{"@type":"Item","@id":"Item/i%d","n":%d}`, i, i))
	}
	lq := liveQueryOn(t, "type Item { n: Int! }", "["+strings.Join(docs, ",")+"]", `subscription { Item { n } }`)
	rita, otto := &sluice.User{ID: 1001, Name: "rita"}, &sluice.User{ID: 1002, Name: "otto"}
	b := &liveBatcher{budget: newLiveBudget(LiveBudget{RowsPerUser: 10}), reads: newLiveReads(1)}
	other := b.budget.hold(rita) // rita's other live queries
	if err := other.set(8, 100); err != nil {
		t.Fatal(err)
	}
	e := &liveEvaluator{lq: lq, hold: b.budget.hold(rita)}
	e.hold.joined(rita)
	e.hold.joined(otto)
	evs := []stream.Evaluator{e}
	g := &liveGroup{b: b}
	ctx := context.Background()

	// otto's other reads take his one token.
	ottoBusy, err := b.reads.acquire(ctx, []*sluice.User{otto})
	if err != nil {
		t.Fatal(err)
	}
	tokens := b.reads.batch()
	if ok, _ := tokens.take(e.hold.user()); !ok {
		t.Fatal("rita's token, free, was not taken")
	}
	g.due, g.lqs = []int{0}, []*graph.LiveQuery{lq}
	res, retry := g.read(ctx, evs, tokens)
	tokens.release()
	if e.hold.user().ID != otto.ID {
		t.Fatalf("the share is charged to %s, want otto", e.hold.user().Name)
	}
	if retry[0] == nil {
		t.Fatalf("read with otto's token taken: %s, %v; want it left for otto's next token", res[0].Data, res[0].Err)
	}
	if rows, _ := e.hold.held(); rows != 0 {
		t.Fatalf("the share holds %d documents, read under rita's token", rows)
	}
	select {
	case <-retry[0]:
		t.Fatal("told to retry while otto's token is taken")
	default:
	}
	ottoBusy()
	select {
	case <-retry[0]:
	case <-time.After(time.Minute):
		t.Fatal("otto's token given back, and the share not told")
	}

	// The next settle: otto's token, and his budget.
	tokens = b.reads.batch()
	if ok, _ := tokens.take(e.hold.user()); !ok {
		t.Fatal("otto's token, free, was not taken")
	}
	res, retry = g.read(ctx, evs, tokens)
	tokens.release()
	if retry[0] != nil || res[0].Err != nil || strings.Count(string(res[0].Data), `"n":`) != 5 {
		t.Fatalf("read by otto: %s, %v, retry %v", res[0].Data, res[0].Err, retry[0] != nil)
	}
	if rows, _ := e.hold.held(); rows != 5 || b.budget.users[otto.ID].rows != 5 || b.budget.users[rita.ID].rows != 8 {
		t.Fatalf("the share holds %d documents; otto %+v, rita %+v", rows, b.budget.users[otto.ID], b.budget.users[rita.ID])
	}
	if len(b.reads.users) != 0 {
		t.Fatalf("read tokens left: %v", b.reads.users)
	}
}
