package postgres

import "context"

// ExecForTest runs sql in the transaction (tests only).
func (t *Tx) ExecForTest(ctx context.Context, sql string) error {
	_, err := t.tx.Exec(ctx, sql)
	return err
}
