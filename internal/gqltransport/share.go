package gqltransport

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/engine"
)

// Identical subscriptions share one evaluation through the hub (see
// changefeed's share.go): the hub evaluates each commit once with the
// evaluator below, frames its events as SSE once, and every member writes
// the prepared frames (or, in another framing, the prepared payloads).

// shareKey identifies subscribers that share one evaluation: the same
// executable schema (database, schema version and role), query, operation
// name and variables. The variables are a digest of their canonical
// encoding, not the encoding: a share key is only compared (a map key of
// the hub's shares), and the encoding kept whole held as many bytes as the
// variables, six times that for a '<' (encoded \u003c), for as long as the
// subscription was open.
type shareKey struct {
	es        *graph.ExecutableSchema
	query     string
	operation string
	variables [sha256.Size]byte
}

// keyOf returns the share key of a request, and false when its variables
// cannot be put in canonical form (then it shares with no one).
func keyOf(es *graph.ExecutableSchema, req *request) (shareKey, bool) {
	h := sha256.New()
	if err := encodeVariables(h, req.params.Variables); err != nil {
		return shareKey{}, false
	}
	k := shareKey{es: es, query: req.params.Query, operation: req.params.OperationName}
	h.Sum(k.variables[:0])
	return k, true
}

// encodeVariables writes the canonical encoding of vars to w, nothing when
// there are none: encoding/json sorts map keys, so equal variables give
// equal bytes. <, > and & are written as they are, not as six bytes each.
func encodeVariables(w io.Writer, vars map[string]any) error {
	if len(vars) == 0 {
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(vars)
}

// evaluator evaluates a GraphQL subscription for the hub: per piece for
// per-document fields, per gathered commit for _ChangeSet (pieces.go).
// It holds the subscription as prepared for the newest schema version it
// met: a commit made under a later version, or a read that finds the
// schema moved, makes it revise it first (graph.Subscription.Revise),
// which ends the stream with the error naming the change when the change
// invalidates it. One goroutine evaluates; a detached member of a share
// reads gs from another (current).
type evaluator struct {
	gs  atomic.Pointer[graph.Subscription]
	asm assembler
}

func newEvaluator(gs *graph.Subscription, maxChangeSet int64) *evaluator {
	e := &evaluator{asm: assembler{max: maxChangeSet}}
	e.gs.Store(gs)
	return e
}

// current returns the subscription as the evaluator last prepared it.
func (e *evaluator) current() *graph.Subscription { return e.gs.Load() }

func (e *evaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return e.asm.events(ctx, e, c)
}

// Classes returns the classes the subscription, as last prepared, needs
// the commits of, and the schema version it was prepared for: the stream
// server narrows its class filter to them once the subscription was
// revised (a commit of a later version passes it until then).
func (e *evaluator) Classes() ([]string, int) {
	gs := e.gs.Load()
	return gs.Classes(), gs.Version()
}

// PerCommit and events are what the assembler evaluates through.
func (e *evaluator) PerCommit() bool { return e.gs.Load().PerCommit() }

func (e *evaluator) events(ctx context.Context, c *sluice.Commit) ([]graph.SubscriptionEvent, error) {
	if v := e.gs.Load().Version(); v > 0 && c.SchemaVersion > v {
		if err := e.revise(ctx); err != nil {
			return nil, err
		}
	}
	evs, err := e.gs.Load().Events(ctx, c)
	if errors.Is(err, engine.ErrSchemaChanged) {
		// A document it references was read through the schema it was
		// prepared for, which moved on meanwhile.
		if err := e.revise(ctx); err != nil {
			return nil, err
		}
		evs, err = e.gs.Load().Events(ctx, c)
	}
	return evs, err
}

// revise prepares the subscription for the current schema version.
func (e *evaluator) revise(ctx context.Context) error {
	next, err := e.gs.Load().Revise(ctx)
	if err != nil {
		return err
	}
	e.gs.Store(next)
	return nil
}

// frameNext is the SSE frame of a GraphQL next message: a share builds it
// once for every member.
func frameNext(dst []byte, ev sluice.Event) []byte { return appendNextSSE(dst, ev.ID, ev.Data) }
