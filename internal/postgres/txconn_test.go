package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestTransactSendsBeginWithItsFirstStatement: a transaction's BEGIN
// travels with its first statement when that is a batch or a QueryRow (an
// Exec or a Query sends it first, on its own), and the transaction is
// still one, whichever way it began: what it wrote
// commits with it, or is rolled back when it fails, and a statement's own
// error is reported as its own. A transaction that sent nothing ends
// without a statement.
func TestTransactSendsBeginWithItsFirstStatement(t *testing.T) {
	t.Parallel()
	db, _, _, _ := openNotes(t)
	ctx := context.Background()
	if _, err := db.pool.Exec(ctx, "CREATE TABLE public.t (k text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	has := func(k string) bool {
		var n int
		if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM public.t WHERE k = $1", k).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	// inTx reports whether the statement ran inside a transaction block
	// begun before it: the transaction's start is not the statement's.
	const inTx = "SELECT now() <> statement_timestamp() OR txid_current_if_assigned() IS NOT NULL"

	refused := errors.New("refused")
	for _, tc := range []struct {
		name  string
		fn    func(tx *Tx) error
		want  error
		wrote []string
	}{
		{"batch, then an error: rolled back", func(tx *Tx) error {
			b := &pgx.Batch{}
			b.Queue("INSERT INTO public.t VALUES ('a')")
			if err := tx.tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			return refused
		}, refused, nil},
		{"query row, then exec: committed", func(tx *Tx) error {
			var one int
			if err := tx.tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				return errors.Join(err, errors.New("SELECT 1 answered otherwise"))
			}
			_, err := tx.tx.Exec(ctx, "INSERT INTO public.t VALUES ('b')")
			return err
		}, nil, []string{"b"}},
		{"exec first: committed", func(tx *Tx) error {
			_, err := tx.tx.Exec(ctx, "INSERT INTO public.t VALUES ('c')")
			return err
		}, nil, []string{"c"}},
		{"a failing first statement keeps its error", func(tx *Tx) error {
			var n int
			return tx.tx.QueryRow(ctx, "SELECT 1 / 0").Scan(&n)
		}, &pgconn.PgError{Code: "22012"}, nil},
		{"nothing sent", func(tx *Tx) error { return nil }, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.transact(ctx, tc.fn)
			var pe, wantPE *pgconn.PgError
			switch {
			case errors.As(tc.want, &wantPE):
				if !errors.As(err, &pe) || pe.Code != wantPE.Code {
					t.Fatalf("transact: %v, want SQLSTATE %s", err, wantPE.Code)
				}
			case !errors.Is(err, tc.want):
				t.Fatalf("transact: %v, want %v", err, tc.want)
			}
			for _, k := range tc.wrote {
				if !has(k) {
					t.Fatalf("%s was not committed", k)
				}
			}
		})
	}
	if has("a") {
		t.Fatal("a failed transaction's row was committed")
	}

	// Each way of sending a first statement runs it inside the
	// transaction.
	for name, first := range map[string]func(tx *Tx) (bool, error){
		"batch": func(tx *Tx) (bool, error) {
			b := &pgx.Batch{}
			b.Queue("SELECT pg_sleep(0.01)")
			b.Queue(inTx)
			br := tx.tx.SendBatch(ctx, b)
			defer br.Close()
			if _, err := br.Exec(); err != nil {
				return false, err
			}
			var in bool
			err := br.QueryRow().Scan(&in)
			return in, err
		},
		"query row": func(tx *Tx) (bool, error) {
			var in bool
			if err := tx.tx.QueryRow(ctx, "SELECT pg_sleep(0.01)").Scan(new(any)); err != nil {
				return false, err
			}
			err := tx.tx.QueryRow(ctx, inTx).Scan(&in)
			return in, err
		},
	} {
		err := db.transact(ctx, func(tx *Tx) error {
			in, err := first(tx)
			if err == nil && !in {
				err = errors.New("the statements ran outside a transaction")
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
