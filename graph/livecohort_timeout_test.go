package graph_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
)

// TestLiveCohortReadIsBoundedByRequestTimeout: the read of a cohort of
// live queries (one query, different variables), whose documents one
// joined statement reads for all of them, is bounded by
// graphql_request_timeout as one live query's read is. Only each
// query's own reads were: the joined statement ran until it ended, with
// statement_timeout 0 (the test's) forever, here blocked by a lock
// another session holds on the class's table. Bounded, each query is
// read on its own, and ends with the error naming the limit.
func TestLiveCohortReadIsBoundedByRequestTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStack(t, `type Thing { tag: String }`)
	st.insert(t, `[{"@type":"Thing","@id":"a","tag":"x"},{"@type":"Thing","@id":"b","tag":"y"}]`)
	d, s, err := st.eng.Database(ctx, st.admin, "admin", "db", sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	es, err := graph.NewExecutableSchema(st.eng, s, sluice.RoleAdmin, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	graph.SetRequestTimeout(es, 200*time.Millisecond)
	const cohort = `subscription($v: String) { Thing(filter: {tag: {eq: $v}}) { _id } }`
	qs := []*graph.LiveQuery{
		liveJudgeQueryVars(t, es, d, st.admin, cohort, map[string]any{"v": "x"}),
		liveJudgeQueryVars(t, es, d, st.admin, cohort, map[string]any{"v": "y"}),
	}
	// Another session locks the table: every read of it waits.
	conn, err := pgx.Connect(ctx, st.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{fmt.Sprintf("sluice_db_%d", d.ID), "Thing"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan []graph.LiveResult, 1)
	go func() { done <- graph.RunEach(ctx, qs, make([]graph.Bounds, len(qs))) }()
	var res []graph.LiveResult
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		_ = tx.Rollback(ctx) // let the read end
		<-done
		t.Fatal("the cohort's read ran 30s past a graphql_request_timeout of 200ms")
	}
	_ = tx.Rollback(ctx)
	for i, r := range res {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "graphql_request_timeout") {
			t.Errorf("query %d: %v, want the error naming graphql_request_timeout", i, r.Err)
		}
	}
}
