package filter

import (
	"context"

	"github.com/sluice-dev/sluice"
)

// MatchSteps is MatchContext that also returns the steps the evaluation
// took beneath references (calls of object, element and scalar on the
// documents references reached: those counted against maxSteps). memo false evaluates without
// remembering results or documents, as Match did before it did: each path
// through the documents is explored again. maxSteps > 0 replaces
// MaxMatchSteps.
func MatchSteps(ctx context.Context, e Expr, doc *sluice.Document, lookup Lookup, memo bool, maxSteps int) (ok bool, steps int, err error) {
	m := newMatcher(ctx, lookup)
	m.noMemo = !memo
	if maxSteps > 0 {
		m.maxSteps = maxSteps
	}
	ok = m.match(e, doc)
	if m.err != nil {
		return false, m.steps, m.err
	}
	return ok, m.steps, nil
}
