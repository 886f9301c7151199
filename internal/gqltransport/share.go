package gqltransport

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
)

// Identical subscriptions share one evaluation through the hub (see
// changefeed's share.go): the hub evaluates each commit once with the
// evaluator below, frames its events as SSE once, and every member writes
// the prepared frames (or, in another framing, the prepared payloads).

// shareKey identifies subscribers that share one evaluation: the same
// executable schema (database, schema version and role), query, operation
// name and variables.
type shareKey struct {
	es        *graph.ExecutableSchema
	query     string
	operation string
	variables string
}

// keyOf returns the share key of a request, and false when its variables
// cannot be put in canonical form (then it shares with no one).
func keyOf(es *graph.ExecutableSchema, req *request) (shareKey, bool) {
	var vars bytes.Buffer
	if len(req.params.Variables) > 0 {
		// encoding/json sorts map keys: equal variables give equal bytes.
		if err := json.NewEncoder(&vars).Encode(req.params.Variables); err != nil {
			return shareKey{}, false
		}
	}
	return shareKey{es: es, query: req.params.Query, operation: req.params.OperationName, variables: vars.String()}, true
}

// evaluator evaluates a GraphQL subscription for the hub: per piece for
// per-document fields, per gathered commit for _ChangeSet (pieces.go).
type evaluator struct {
	gs  *graph.Subscription
	asm assembler
}

func (e *evaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return e.asm.events(ctx, e.gs, c)
}

// frameNext is the SSE frame of a GraphQL next message: a share builds it
// once for every member.
func frameNext(dst []byte, ev sluice.Event) []byte { return appendNextSSE(dst, ev.ID, ev.Data) }
