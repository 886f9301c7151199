package rest

import (
	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/cloudevent"
	"github.com/sluice-dev/sluice/internal/engine"
)

// restEvaluator computes the REST change stream's events from the pieces
// of commits: one per change of a document of the class (or a subclass)
// whose operation the stream selects, as a CloudEvents envelope whose data
// is the document as the role may see it (internal/cloudevent, which
// webhooks share). The hub runs one per share of streams; a stream of its
// own (a resume) has its own. A schema change that takes a class out of
// the class's set (it, or the classes implementing it) or brings one with
// documents in ends the stream with the error naming it, whether the
// stream was open at the change or reads it later (see
// engine.Engine.Regrouped). Not safe for concurrent use (its Reader
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
