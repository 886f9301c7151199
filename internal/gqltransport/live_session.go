package gqltransport

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/stream"
)

// subscribeLive opens the stream of a live query with the stream server
// (see subscribe): admitted by the live query budget, guarded, then
// joined to its share, whose first entry is the current result; a
// resumed one first reads what its client is owed (resumeLive), written
// after the readiness frame.
func (t *transport) subscribeLive(ctx context.Context, st framer, req *request, op *graphql.OperationContext, varBytes int64, mr *muxRequest) *stream.Stream {
	greq := graph.RequestFrom(ctx)
	sink := &frameSink{f: st, named: req.named}
	lq, err := t.es.NewLiveQuery(op, greq)
	if err != nil {
		sink.fail(ctx, t.opts.Logger, err)
		return nil
	}
	patch, err := livePatchOption(req.params.Extensions["patch"])
	if err != nil {
		sink.fail(ctx, t.opts.Logger, err)
		return nil
	}
	if t.opts.Streams == nil {
		sink.fail(ctx, t.opts.Logger, sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return nil
	}
	key, ok := keyOf(t.es, req)
	if !ok {
		sink.fail(ctx, t.opts.Logger, sluice.Errorf(sluice.CodeInvalid, "the variables cannot be encoded as JSON"))
		return nil
	}
	spec := t.spec(ctx, st, req, greq, lq.Classes(), lq.Version(), varBytes, mr)
	// The budget before anything is read for it (a refusal is an HTTP
	// 429, or a graphql-ws error, naming the bound).
	spec.Admit = func() (func(), error) { return t.live.budget.admit(greq.User) }
	if from := req.from; from != nil {
		spec.Prepare = func(ctx context.Context) (func(*stream.Entry) bool, error) {
			res, err := t.resumeLive(ctx, lq, *from, patch)
			if err != nil {
				return nil, err
			}
			sink.owed = func(f framer) {
				if res.msg != nil {
					f.next(res.id, res.msg)
				} else {
					f.current(res.id)
				}
			}
			return res.keep, nil
		}
	}
	spec.Share = &stream.ShareOptions{Key: liveKey{shareKey: key, patch: patch}, Classes: lq.Classes(), ClassesVersion: lq.Version(), Owner: greq.User,
		Latest: true, Batcher: t.live, Cohort: liveCohort{es: t.es, query: req.params.Query, operation: req.params.OperationName, classes: strings.Join(lq.Classes(), " ")},
		New: func() stream.Evaluator {
			return &liveEvaluator{lq: lq, patch: patch, hold: t.live.budget.hold(greq.User)}
		},
		Frame: frameNext,
	}
	return t.open(ctx, spec, sink, mr)
}

// livePatchOption reads extensions.patch: "json-patch" asks for patches.
func livePatchOption(v any) (bool, error) {
	switch v {
	case nil:
		return false, nil
	case patchMode:
		return true, nil
	}
	return false, sluice.Errorf(sluice.CodeInvalid, "extensions.patch must be %q (send results as JSON Patches) or left out", patchMode)
}

// maxResumeScan is the most pieces of the log (about 64 KiB each) a
// resumed live query judges to tell whether its result changed since its
// client's position; past it, the client gets the current result.
const maxResumeScan = 256

// liveResume is what a resumed live query's client is owed first: the
// current result (msg), or that its result is current (msg nil) at
// position id; and which of its share's results to write after it.
type liveResume struct {
	msg  []byte
	id   string
	keep func(*stream.Entry) bool
}

// resumeLive reads the current result of a live query whose client has
// its result at position from, in a snapshot, and judges the log between
// from and that snapshot as the share judges commits: when nothing there
// can have changed the result, the client's is current; otherwise (or
// when that history is gone, or from is from another incarnation of the
// database) it is owed the current result. From then on, the stream
// writes only results read after that snapshot and, without patches,
// not the first one when it equals the result the client has.
func (t *transport) resumeLive(ctx context.Context, lq *graph.LiveQuery, from sluice.Position, patch bool) (*liveResume, error) {
	// The read and the judgement of the log run under one of the user's
	// read tokens (liveReads): the scan, up to maxResumeScan pieces, is
	// as much the user's work as the read, and the token bounds both.
	// Nothing in them takes a token; the access changes are applied
	// after the token is given back, as a settle does.
	done, err := t.live.reads.acquire(ctx, []*sluice.User{lq.User()})
	if err != nil {
		return nil, err
	}
	run, changed, scanErr := t.readSince(ctx, lq, from)
	done()
	if run.Err != nil {
		return nil, run.Err
	}
	// What the read saw may have been written after an access change that
	// ends this stream: apply those first (its Join then fails with the
	// change's error, and nothing read is written).
	if err := t.opts.Streams.SyncAccess(ctx, run.Access); err != nil {
		return nil, err
	}
	if scanErr != nil {
		return nil, scanErr
	}
	data, errs, pos := run.Data, run.Errors, run.Position
	res := &liveResume{}
	if pos.Epoch != "" {
		res.id = pos.String()
	}
	if changed {
		// Revision 0: a whole result from outside the share, which the
		// first result the stream takes from its share replaces.
		res.msg = liveResult(data, errs, res.id, 0, patch)
	}
	// The first result the share gives after the snapshot is skipped when
	// it equals the one the client has: compared by a digest of it, not
	// kept, since the stream may wait for that result as long as the
	// result does not change, and the budget counts only the share's
	// copy (a resumed stream kept a whole result of its own before). Its
	// errors count as its data does: the same data with other errors is
	// another result.
	compare := !patch                      // a patch's base must be the share's: the first is whole
	head := appendLiveBody(nil, nil, errs) // the body up to its data
	h := sha256.New()
	h.Write(head)
	h.Write(data)
	var last [sha256.Size]byte
	h.Sum(last[:0])
	size := len(head) + len(data)
	res.keep = func(e *stream.Entry) bool {
		if len(e.Events) != 1 {
			return true
		}
		ev := &e.Events[0]
		if pos.Epoch != "" && ev.Position.Seq <= pos.Seq {
			return false // the client's result is as new
		}
		if compare {
			compare = false
			got := liveBody(ev.Data, ev.ID)
			return len(got) != size || sha256.Sum256(got) != last
		}
		return true
	}
	return res, nil
}

// readSince reads the current result of lq in a snapshot (within what
// the budget leaves its user: the result is not kept, the share's is),
// and judges the log between from and that snapshot as the share judges
// commits: changed reports whether something there can have changed the
// result (or that history is gone, or from is from another incarnation
// of the database). The caller holds a read token of lq's user.
func (t *transport) readSince(ctx context.Context, lq *graph.LiveQuery, from sluice.Position) (run graph.LiveResult, changed bool, err error) {
	maxRows, maxBytes := lq.Limits()
	rctx, statements := engine.CountStatements(ctx)
	run = lq.Run(rctx, t.live.budget.hold(lq.User()).bounds(maxRows, maxBytes))
	t.live.count(lq, statements())
	if run.Err != nil {
		return run, false, nil
	}
	if run.Position.Epoch == "" {
		return run, true, nil
	}
	if from.Seq == run.Position.Seq && from.Index == sluice.WholeCommit && from.Tag != "" && run.Position.Tag != "" && from.Tag != run.Position.Tag {
		// The commit from names was lost (a Postgres failover) and the
		// one read took its number: the result at from is not the log's.
		return run, true, nil
	}
	pieces := 0
	err = t.opts.Streams.Scan(ctx, lq.Database(), from, run.Position.Seq, func(c *sluice.Commit) bool {
		if t.live.scanned != nil {
			t.live.scanned(lq.User())
		}
		// A client chooses its position: past a bound, sending the
		// current result costs less than judging more of the log.
		if pieces++; pieces > maxResumeScan || c.NewSchema {
			// (A schema change may change any result.)
			changed = true
			return false
		}
		// Judged against the boundary of the result just read: a
		// change whose images both sort after the last row of that
		// full result left the rows up to it, and so the result at
		// from, as they are.
		for i := range c.Changes {
			ch := graph.NewChange(&c.Changes[i])
			if lq.AffectsResult(&ch, run.Boundary) {
				changed = true
				return false
			}
		}
		return true
	})
	if err != nil {
		if sluice.ErrorCode(err) != sluice.CodeGone {
			return run, false, err
		}
		return run, true, nil // a live query's result is whole: never an error
	}
	return run, changed, nil
}

// count adds a read of lq's result that sent n statements to the metrics.
func (b *liveBatcher) count(lq *graph.LiveQuery, n int64) {
	if m := b.metrics; m != nil {
		db := strconv.FormatInt(lq.Database().ID, 10)
		m.LiveReads.WithLabelValues(db).Inc()
		m.LiveStatements.WithLabelValues(db).Add(float64(n))
	}
}
