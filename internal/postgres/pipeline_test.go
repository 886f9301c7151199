package postgres

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestPipelineMergesRows: rows queued one after another for one insert
// go in statements of power-of-two sizes, largest first, with their
// values in queue order; another statement or another table's rows end a
// run.
func TestPipelineMergesRows(t *testing.T) {
	a := newRowInsert("t", []string{"x", "y"})
	b := newRowInsert("u", []string{"z"})
	var p pipeline
	p.queue("BEGIN")
	for i := range 13 {
		p.queueRow(a, []any{i, -i})
	}
	p.queueRow(b, []any{"b0"})
	p.queueRow(b, []any{"b1"})
	p.queueRow(a, []any{100, -100})
	p.queue("COMMIT")
	if got := p.Len(); got != 7 {
		t.Fatalf("Len = %d, want 7 (BEGIN, 8+4+1 rows, 2 rows, 1 row, COMMIT)", got)
	}
	batch := p.batch()
	if p.Len() != 0 {
		t.Fatal("batch left statements queued")
	}
	var got []string
	var args []any
	for _, q := range batch.QueuedQueries {
		got = append(got, q.SQL)
		args = append(args, q.Arguments...)
	}
	rows := func(ins *rowInsert, n int) string { return ins.sql(n) }
	want := []string{"BEGIN", rows(a, 8), rows(a, 4), rows(a, 1), rows(b, 2), rows(a, 1), "COMMIT"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("statements:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var wantArgs []any
	for i := range 13 {
		wantArgs = append(wantArgs, i, -i)
	}
	wantArgs = append(wantArgs, "b0", "b1", 100, -100)
	if !reflect.DeepEqual(args, wantArgs) {
		t.Fatalf("arguments %v, want %v", args, wantArgs)
	}
	if s := a.sql(2); s != `INSERT INTO t ("x", "y") VALUES ($1, $2), ($3, $4)` {
		t.Fatalf("sql(2) = %s", s)
	}
}

// TestPipelineKeepsParametersInBounds: an insert of many columns merges
// fewer rows, so that no statement has more than Postgres's 65,535
// parameters.
func TestPipelineKeepsParametersInBounds(t *testing.T) {
	cols := make([]string, 1600) // Postgres's most columns in a table
	for i := range cols {
		cols[i] = fmt.Sprintf("c%d", i)
	}
	ins := newRowInsert("t", cols)
	var p pipeline
	row := make([]any, len(cols))
	for range maxMergedRows {
		p.queueRow(ins, row)
	}
	for _, q := range p.batch().QueuedQueries {
		if len(q.Arguments) > 65535 {
			t.Fatalf("a statement has %d parameters", len(q.Arguments))
		}
		if len(q.Arguments)%len(cols) != 0 {
			t.Fatalf("a statement has %d parameters, not whole rows", len(q.Arguments))
		}
	}
	if got := ins.maxRows(); got != 32 {
		t.Fatalf("maxRows = %d, want 32", got)
	}
}
