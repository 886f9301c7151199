// Package cloudevent builds the CloudEvents 1.0 envelopes of document
// changes: the events of the REST change stream and the payloads of
// webhooks, which are the same bytes. An Evaluator selects the changes of
// a commit (classes with their subclasses, operations, and optionally a
// filter), redacts each document for the reader's role, and encodes it.
package cloudevent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// Envelope is a CloudEvents 1.0 structured event of one change.
type Envelope struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Type            string `json:"type"`
	Source          string `json:"source"`
	Subject         string `json:"subject"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	Entity          string `json:"entity"`
	Operation       string `json:"operation"`
	Tenant          string `json:"tenant"`
	UserID          string `json:"user_id"`
	// Version is the version the change gave the document (for a
	// deletion, the version of the deletion), an extension attribute.
	// It is left out (empty) for a change its commit follows with
	// another change of the same document (sluice.Commit.VersionOf): that
	// state has no version. Left out rather than "": CloudEvents takes
	// an attribute without a value as absent, and an empty string is no
	// version a client could compare or send back.
	Version string          `json:"version,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// Selector says which changes become events.
type Selector struct {
	// Classes selects documents of these classes or their subclasses;
	// empty selects every class.
	Classes []string
	// Ops selects operations.
	Ops map[sluice.Op]bool
	// Filter, when set, must match the document as the reader may see it
	// (after redaction, so a hidden field never matches). It holds no
	// filter through a reference (see CheckFilter).
	Filter filter.Expr
	// Outcome ends the error that ends the consumer at an event it
	// cannot show as it was (see engine.Engine.LeftSince): what it does
	// and what to do; a stream's when empty.
	Outcome string
}

// Evaluator computes the events of the pieces of commits for one reader
// and selector. Not safe for concurrent use (its Reader refreshes).
type Evaluator struct {
	rd  *engine.Reader
	sel Selector
}

// New returns an Evaluator of sel's events as rd may see them.
func New(rd *engine.Reader, sel Selector) *Evaluator {
	return &Evaluator{rd: rd, sel: sel}
}

// Reader returns the evaluator's reader: the database and schema it
// shows the commits through.
func (e *Evaluator) Reader() *engine.Reader { return e.rd }

// Fork returns an evaluator of the same events with a shared reader of
// its own (see engine.Reader.Shared), for a consumer that continues on its
// own.
func (e *Evaluator) Fork() *Evaluator {
	return &Evaluator{rd: e.rd.Shared(), sel: e.sel}
}

// Events returns the events of piece c, in change order, and the
// position just before the piece.
func (e *Evaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	start := sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}
	if len(c.Changes) > 0 {
		start.Index = c.Changes[0].Index - 1
	}
	rd := e.rd
	if err := rd.Follow(ctx, c.SchemaVersion); err != nil {
		return nil, start, err
	}
	if c.NewSchema {
		// A schema change that took a class out of those selected, or
		// brought one with documents in, did so without an event: the
		// consumer ends there (see engine.Engine.Regrouped), open at the
		// change or reading it later alike.
		rg, err := rd.Regrouped(ctx, c, e.sel.Classes)
		if err != nil {
			return nil, start, err
		}
		if rg != nil {
			return nil, start, engine.RegroupedError(rd.Database, c, rg, cmp.Or(e.sel.Outcome, engine.StreamEnds))
		}
	}
	// A commit made under an older schema version than the reader's (a
	// resumed stream, a member gone on alone, a webhook's loop) is
	// selected by the classes as they were then, as streams that kept
	// up selected it (see engine.SchemaThen).
	then, err := rd.SchemaThen(ctx, c)
	if err != nil {
		return nil, start, err
	}
	var out []sluice.Event
	for i := range c.Changes {
		ch := &c.Changes[i]
		if !e.sel.Ops[ch.Op] {
			continue
		}
		cl, err := rd.Class(ctx, ch.Class)
		if err != nil {
			return nil, start, err
		}
		if then != nil {
			under, ok := engine.Fits(then, ch.Class, e.sel.Classes)
			if !ok {
				continue // not selected then: no stream was sent it
			}
			if cl == nil || cl.Kind != sluice.KindDocument {
				// Selected then, and today's schema has no documents of
				// its class to show it as: the stream ends naming the
				// change rather than go on without the event.
				return nil, start, rd.LeftSince(ctx, c.Position(ch.Index), ch.Class, under, cmp.Or(e.sel.Outcome, engine.StreamEnds))
			}
			// Selected then, selected now: a class that no longer
			// implements a class selected is still shown, as it was.
		} else if cl == nil || !e.selects(ch.Class) {
			continue
		}
		doc, unknown := ch.After, ch.AfterUnknown
		if ch.Op == sluice.OpDeleted {
			doc, unknown = ch.Before, ch.BeforeUnknown
		}
		data, err := rd.RedactAt(ctx, c, ch.Class, doc)
		if err != nil {
			return nil, start, err
		}
		if e.sel.Filter != nil {
			ok, err := matches(ctx, e.sel.Filter, data, unknown)
			if err != nil {
				return nil, start, fmt.Errorf("filter %s: %w", ch.DocID, err)
			}
			if !ok {
				continue
			}
		}
		d := rd.Database
		op := streamparam.OpToken(ch.Op)
		pos := c.Position(ch.Index)
		id := pos.String()
		b, err := json.Marshal(Envelope{
			SpecVersion: "1.0", ID: id, Type: "entity." + op,
			Source: "/api/db/" + d.Path(), Subject: ch.DocID, Time: c.Time.UTC().Format(time.RFC3339Nano),
			DataContentType: "application/json", Entity: ch.Class, Operation: op,
			Tenant: d.Org, UserID: c.User, Version: c.VersionOf(ch), Data: data,
		})
		if err != nil {
			return nil, start, fmt.Errorf("encode event %s: %w", id, err)
		}
		out = append(out, sluice.Event{Position: pos, ID: id, Kind: "entity." + op, Data: b})
	}
	return out, start, nil
}

// selects reports whether documents of class are selected.
func (e *Evaluator) selects(class string) bool {
	if len(e.sel.Classes) == 0 {
		return true
	}
	for _, c := range e.sel.Classes {
		if e.rd.Schema.IsA(class, c) {
			return true
		}
	}
	return false
}

// matches reports whether doc (a document's API-form JSON; nil when the
// reader may not see it at all) matches f, evaluated with ctx.
//
// A filter it cannot evaluate (filter.MatchContext's error: ctx's end, or
// past filter.MaxMatchSteps, which a filter without references, as
// CheckFilter requires, never reaches) is its error, not a false or a
// true: false would drop an event the subscriber may have to see, with
// nothing to tell it, and true would deliver one the filter may exclude
// (a filter can hide documents the subscriber must not see). Events
// returns the error: a stream ends with it, and a webhook's delivery loop
// gets it with its position still before the event, which is neither
// skipped nor delivered.
//
// So is a filter whose outcome depends on a field the image left out as
// a value Sluice cannot read (unknown, see sluice.Change.AfterUnknown): a
// read compares the value the row holds, which the image does not carry,
// so the event's filter is neither true nor false (filter.MatchUnknown).
func matches(ctx context.Context, f filter.Expr, doc []byte, unknown []string) (bool, error) {
	if doc == nil {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return false, err
	}
	id, _ := m["@id"].(string)
	typ, _ := m["@type"].(string)
	delete(m, "@id")
	delete(m, "@type")
	ok, known, err := filter.MatchUnknown(ctx, f, &sluice.Document{ID: id, Type: typ, Fields: m}, nil, unknown)
	if err == nil && !known {
		err = filter.UnknownError(filter.TestedAmong(f, unknown))
	}
	return ok, err
}

// CheckFilter returns a CodeInvalid error naming field when f filters
// through a reference: the referenced document would be read when the
// event is delivered, not as it was at the commit, so a replay could
// select other events.
func CheckFilter(field string, f filter.Expr) error {
	switch x := f.(type) {
	case *filter.And:
		for _, s := range x.Exprs {
			if err := CheckFilter(field, s); err != nil {
				return err
			}
		}
	case *filter.Or:
		for _, s := range x.Exprs {
			if err := CheckFilter(field, s); err != nil {
				return err
			}
		}
	case *filter.Not:
		return CheckFilter(field, x.Expr)
	case *filter.Sub:
		return CheckFilter(field, x.Expr)
	case *filter.Quant:
		if x.Field.Type.Kind == sluice.TypeReference {
			return errThroughReference(field, x.Field.Name)
		}
		return CheckFilter(field, x.Elem)
	case *filter.Ref:
		return errThroughReference(field, x.Field.Name)
	}
	return nil
}

func errThroughReference(field, name string) error {
	return sluice.Errorf(sluice.CodeInvalid, "%s.%s: a filter through a reference cannot select events: the referenced document would be read at delivery, not as it was at the commit", field, name)
}
