package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// envelope is a CloudEvents 1.0 structured event.
type envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Source          string          `json:"source"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Entity          string          `json:"entity"`
	Operation       string          `json:"operation"`
	Tenant          string          `json:"tenant"`
	UserID          string          `json:"user_id"`
	Data            json.RawMessage `json:"data"`
}

// restEvaluator computes the REST change stream's events from the pieces
// of commits: one per change of a document of the class (or a subclass)
// whose operation the stream selects, as a CloudEvents envelope whose data
// is the document as the role may see it. The hub runs one per share of
// streams; a stream of its own (a resume) has its own. Not safe for
// concurrent use (its Reader refreshes).
type restEvaluator struct {
	rd    *engine.Reader
	class string
	ops   map[sluice.Op]bool
}

func newRestEvaluator(rd *engine.Reader, req *subscribeRequest) *restEvaluator {
	return &restEvaluator{rd: rd, class: req.class, ops: req.ops}
}

// fork returns an evaluator of the same events for a member that
// continues on its own, with a reader of its own.
func (e *restEvaluator) fork() *restEvaluator {
	return &restEvaluator{rd: e.rd.Shared(), class: e.class, ops: e.ops}
}

// Events returns the events of piece c.
func (e *restEvaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	start := sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}
	if len(c.Changes) > 0 {
		start.Index = c.Changes[0].Index - 1
	}
	rd := e.rd
	var out []sluice.Event
	for i := range c.Changes {
		ch := &c.Changes[i]
		if !e.ops[ch.Op] {
			continue
		}
		if cl, err := rd.Class(ctx, ch.Class); err != nil {
			return nil, start, err
		} else if cl == nil || !rd.Schema.IsA(ch.Class, e.class) {
			continue
		}
		doc := ch.After
		if ch.Op == sluice.OpDeleted {
			doc = ch.Before
		}
		data, err := rd.RedactAt(ctx, c, ch.Class, doc)
		if err != nil {
			return nil, start, err
		}
		d := rd.Database
		op := streamparam.OpToken(ch.Op)
		pos := c.Position(ch.Index)
		id := pos.String()
		b, err := json.Marshal(envelope{
			SpecVersion: "1.0", ID: id, Type: "entity." + op,
			Source: "/api/db/" + d.Path(), Subject: ch.DocID, Time: c.Time.UTC().Format(time.RFC3339Nano),
			DataContentType: "application/json", Entity: ch.Class, Operation: op,
			Tenant: d.Org, UserID: c.User, Data: data,
		})
		if err != nil {
			return nil, start, fmt.Errorf("encode event %s: %w", id, err)
		}
		out = append(out, sluice.Event{Position: pos, ID: id, Kind: "entity." + op, Data: b})
	}
	return out, start, nil
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
