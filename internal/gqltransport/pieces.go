package gqltransport

import (
	"context"
	"encoding/json"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
)

// A large commit reaches subscriptions in pieces (sluice.Commit.Partial),
// so that what a stream holds is bounded by the size of a piece, not of a
// commit. A per-document subscription evaluates each piece as it comes.
// A _ChangeSet subscription gives one event per commit, so it gathers a
// commit's pieces first, up to a bound on their bytes: a commit past it
// gives an error event instead of its change set, naming the bound, and
// the stream goes on. The bound counts what a gathered change holds
// besides its images (its id and class, and changeOverheadBytes), so that
// a commit of many tiny changes is bounded as a commit of large images
// is.

// changeOverheadBytes is what a change gathered for _ChangeSet holds
// besides its images, its id and its class: its sluice.Change (152 bytes
// on 64-bit platforms), the rounding of its strings' and images'
// allocations and the spare capacity of the growing slice. Counted by
// image bytes alone, a commit of 200,000 deletions of one short field
// (2 MB of images) held 39 MB while it was gathered, 193 bytes a change
// (TestChangeSetAssemblyMemory); counted with it, what a gathering holds
// stays under the byte bound whatever the number of changes. (It was
// 128 when sluice.Change was 96 bytes, and undercounted as the struct
// grew: a gathering could hold a third more than its bound.)
const changeOverheadBytes = 176

// changeBytes is what the budget counts for a gathered change.
func changeBytes(ch *sluice.Change) int64 {
	return int64(len(ch.Before)+len(ch.After)+len(ch.DocID)+len(ch.Class)) + changeOverheadBytes
}

// assembler is the piece state of one consumer (a share, or a stream
// with a subscription of its own). It is used by one goroutine.
type assembler struct {
	// max bounds the bytes of a commit gathered for _ChangeSet: its
	// changes' images and overhead (changeBytes).
	max     int64
	pending *sluice.Commit
	start   sluice.Position
	size    int64
	over    bool
}

// subscriptionEvents is what the assembler evaluates: a subscription
// (its evaluator, which revises it after a schema change).
type subscriptionEvents interface {
	PerCommit() bool
	events(ctx context.Context, c *sluice.Commit) ([]graph.SubscriptionEvent, error)
}

// events returns the events piece c gives gs, and the position just
// before the first change they were evaluated from (where a reader that
// has not taken them resumes).
func (a *assembler) events(ctx context.Context, gs subscriptionEvents, c *sluice.Commit) ([]graph.SubscriptionEvent, sluice.Position, error) {
	start := sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}
	if len(c.Changes) > 0 {
		start.Index = c.Changes[0].Index - 1
	}
	if !gs.PerCommit() {
		evs, err := gs.events(ctx, c)
		return evs, start, err
	}
	if a.pending == nil {
		if !c.Partial {
			evs, err := gs.events(ctx, c)
			return evs, start, err
		}
		head := *c
		head.Changes = nil
		a.pending, a.start, a.size, a.over = &head, start, 0, false
	}
	if !a.over {
		for i := range c.Changes {
			a.size += changeBytes(&c.Changes[i])
		}
		if a.max > 0 && a.size > a.max {
			a.over = true
			a.pending.Changes = nil
		} else {
			a.pending.Changes = append(a.pending.Changes, c.Changes...)
		}
	}
	if c.Partial {
		return nil, a.start, nil
	}
	whole, start, over := a.pending, a.start, a.over
	a.pending = nil
	whole.Partial = false
	if !over {
		evs, err := gs.events(ctx, whole)
		return evs, start, err
	}
	last := c.Position(c.NumChanges - 1)
	data, _ := json.Marshal(map[string]any{"errors": []map[string]any{{
		"message":    "commit " + whole.ID() + " is too large for one _ChangeSet event: its changes exceed graphql_max_response_bytes; subscribe to the per-document fields to receive it",
		"extensions": map[string]any{"code": "RESULT_TOO_LARGE", "limit": "graphql_max_response_bytes"},
	}}})
	return []graph.SubscriptionEvent{{Position: last, ID: last.String(), Data: data}}, start, nil
}
