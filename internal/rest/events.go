package rest

import (
	"context"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/cloudevent"
	"github.com/sluice-dev/sluice/internal/engine"
)

// restEvaluator computes the REST change stream's events from the pieces
// of commits: one per change of a document of the class (or a subclass)
// whose operation the stream selects, as a CloudEvents envelope whose data
// is the document as the role may see it (internal/cloudevent, which
// webhooks share). The hub runs one per share of streams; a stream of its
// own (a resume) has its own. Not safe for concurrent use (its Reader
// refreshes).
type restEvaluator struct {
	*cloudevent.Evaluator
	class string
}

func newRestEvaluator(rd *engine.Reader, req *subscribeRequest) *restEvaluator {
	return &restEvaluator{cloudevent.New(rd, cloudevent.Selector{Classes: []string{req.class}, Ops: req.ops}), req.class}
}

// fork returns an evaluator of the same events for a member that
// continues on its own, with a reader of its own.
func (e *restEvaluator) fork() *restEvaluator {
	return &restEvaluator{e.Fork(), e.class}
}

// Events is the envelopes of piece c. A schema change that leaves the
// stream's class no document class ends it, with an error naming the
// change: nothing of that class can ever be written again, and the
// change deleted its documents without an event. It is judged by the
// schema the change made, whatever schema the stream reads through: a
// stream resumed from before the change, once the class was made again,
// ends there as the streams open at the change did, rather than go on
// past documents deleted without a word.
func (e *restEvaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	evs, start, err := e.Evaluator.Events(ctx, c)
	if err != nil || !c.NewSchema {
		return evs, start, err
	}
	rd := e.Reader()
	if c.SchemaVersion > 0 && c.SchemaVersion < rd.Database.SchemaVersion {
		// A change the reader's schema is newer than: whether it took
		// the class away is for its versions to say (a stream resumed
		// from before the class was made meets changes that never had
		// it, and goes on).
		if dropped, err := rd.Dropped(ctx, c, e.class); err != nil || !dropped {
			return evs, start, err
		}
		return nil, start, sluice.Errorf(sluice.CodeConflict, "the schema of %s changed to version %d (commit %d), which has no document class %s: this stream of it ends",
			rd.Database.Path(), c.SchemaVersion, c.Seq, e.class)
	}
	if cl := rd.Schema.Class(e.class); cl == nil || cl.Kind == sluice.KindSubdocument {
		return nil, start, sluice.Errorf(sluice.CodeConflict, "the schema of %s changed to version %d (commit %d), which has no document class %s: this stream of it ends",
			rd.Database.Path(), rd.Database.SchemaVersion, c.Seq, e.class)
	}
	return evs, start, nil
}

// frameREST appends the SSE frame of a change stream event to dst; it
// ends with the event's data and a blank line, as hub shares require.
func frameREST(dst []byte, ev sluice.Event) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, ev.ID...)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, ev.Kind...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, ev.Data...)
	return append(dst, "\n\n"...)
}
