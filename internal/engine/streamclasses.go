package engine

import (
	"cmp"
	"context"
	"fmt"

	"github.com/sluice-dev/sluice"
)

// A stream selects a commit's changes by class: those of the classes it
// subscribes to, or of classes implementing them. A stream that keeps up
// does so through the schema the commit was made under (its reader
// follows the schema forward, commit by commit). A stream that reads a
// commit later reads it through a newer schema: one resumed from a
// position (its reader starts at today's schema), a member of a share
// that fell behind and goes on alone (it takes the share's reader as it
// is now), a webhook's delivery loop (its reader is made when the loop
// starts). A forced schema change since the commit may have changed what
// the classes select: a class that no longer implements an interface, a
// class dropped or made an interface or a subdocument type, a class made
// to implement an interface later. Judged by today's schema, the same
// commit would give other events than it gave the streams that kept up:
// an event lost without a word, or one sent that no live stream sent.
//
// So a stream judges a change of a commit made under an older schema
// version by the classes as they were then (SchemaThen, Fits): a change
// not selected then is not selected now; a change selected then is
// selected now too, and when today's schema cannot show it as one of the
// stream's (its class is no longer a document class, or for GraphQL no
// longer implements the type the subscription selects), the stream ends
// with the error naming the change (LeftSince) rather than go on past it.
// That costs nothing for a commit made under the reader's version (every
// commit of a stream that keeps up): the schema then is only looked at
// for a commit of an older version, and the store keeps the parsed
// versions it read.

// SchemaThen returns the schema commit c of d was made under when it is
// an older version than d's (the version the reader reads through), nil
// when it is d's, newer, or not known (a commit made before Sluice kept
// schema versions, judged by today's schema as before).
func (e *Engine) SchemaThen(ctx context.Context, d *sluice.Database, c *sluice.Commit) (*sluice.Schema, error) {
	if c.SchemaVersion <= 0 || c.SchemaVersion >= d.SchemaVersion {
		return nil, nil
	}
	return e.store.SchemaAt(ctx, d.ID, c.SchemaVersion)
}

// SchemaThen is Engine.SchemaThen for the reader's database.
func (r *Reader) SchemaThen(ctx context.Context, c *sluice.Commit) (*sluice.Schema, error) {
	return r.e.SchemaThen(ctx, r.Database, c)
}

// A forced schema change can also change which documents a stream's
// selection covers, with no event for any of them: dropping Cat, making
// it an interface or a subdocument type, or making it stop implementing
// Animal takes every Cat out of a stream of Animal (the first three take
// them out of a stream of every class too), and making a class that has
// documents implement Animal brings them all in. A client that mirrors
// the selection from its events would keep the Cats for good, or never
// learn of the new members. So a stream ends at such a change with the
// error naming it (RegroupedError), as a stream of a class dropped ends
// there: whether a change did so is judged by the version before it and
// the version it made (Regrouped), whatever schema the stream reads
// through, so that a stream open at the change and one resumed from
// before it, or replayed, end at the same change. A class that joins
// with no documents possible (a new class, or one that was an interface
// or a subdocument type) does not end it: nothing was left unsaid. Only
// a schema change's commit is looked at (Commit.NewSchema).

// A Regroup is what a schema change did to the document classes under
// one of a stream's selection: Class left (or joined) those of Under.
type Regroup struct {
	// Under is the class or interface the stream selects ("" for every
	// document class), Class the document class that left or joined it.
	Under, Class string
	// Joined: Class was a document class before the change, and the
	// change made it implement Under. Deleted: the change left Class
	// no document class (its documents are gone).
	Joined, Deleted bool
	// How is the change, as the error says it ("dropped class Cat",
	// "made Cat stop implementing Animal").
	How string
}

// Regrouped returns how commit c of d, when it is a schema change, changed
// the set of document classes under one of under (classes or interfaces,
// each with what implements it; empty: every document class): the first
// class that left or joined it, from the version before c to the version
// c made. Nil for any other commit and for a change that left every set
// as it was. When the version before is not known (a change from before
// Sluice kept versions), only a selected class left no document class
// is judged.
func (e *Engine) Regrouped(ctx context.Context, d *sluice.Database, c *sluice.Commit, under []string) (*Regroup, error) {
	before, after, err := e.SchemaChange(ctx, d, c)
	if err != nil || after == nil {
		return nil, err
	}
	return regrouped(before, after, under), nil
}

// SchemaChange returns, when commit c of d is a schema change, the schema
// version before it (nil when not known: a change from before Sluice kept
// versions) and the version it made; nil and nil for any other commit.
func (e *Engine) SchemaChange(ctx context.Context, d *sluice.Database, c *sluice.Commit) (before, after *sluice.Schema, err error) {
	if !c.NewSchema || c.SchemaVersion <= 1 {
		return nil, nil, nil
	}
	if after, err = e.store.SchemaAt(ctx, d.ID, c.SchemaVersion); err != nil {
		return nil, nil, err
	}
	at := *d
	at.SchemaVersion = max(d.SchemaVersion, c.SchemaVersion)
	vs, err := e.store.SchemaVersions(ctx, &at)
	if err != nil {
		return nil, nil, err
	}
	for _, v := range vs {
		if v.Version == c.SchemaVersion-1 {
			if before, err = e.store.SchemaAt(ctx, d.ID, v.Version); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return before, after, nil
}

// Regrouped is Engine.Regrouped for the reader's database.
func (r *Reader) Regrouped(ctx context.Context, c *sluice.Commit, under []string) (*Regroup, error) {
	return r.e.Regrouped(ctx, r.Database, c, under)
}

// regrouped returns the first class that left or joined the document
// classes under one of under from schema before to schema after (see
// Engine.Regrouped); before is nil when not known.
func regrouped(before, after *sluice.Schema, under []string) *Regroup {
	if before == nil {
		for _, u := range under {
			if c := after.Class(u); c == nil || c.Kind == sluice.KindSubdocument {
				return &Regroup{Under: u, Class: u, Deleted: true, How: leftHow(after, u, u)}
			}
		}
		return nil
	}
	if len(under) == 0 {
		under = []string{""}
	}
	for _, u := range under {
		for _, n := range before.Order {
			if isUnder(before, n, u) && !isUnder(after, n, u) {
				return &Regroup{Under: u, Class: n, Deleted: !isUnder(after, n, ""), How: leftHow(after, n, u)}
			}
		}
		if u == "" {
			continue // every document class was one before: none joins
		}
		for _, n := range after.Order {
			if isUnder(after, n, u) && !isUnder(before, n, u) && isUnder(before, n, "") {
				return &Regroup{Under: u, Class: n, Joined: true, How: "made " + n + " implement " + u}
			}
		}
	}
	return nil
}

// OwnLeft returns how a schema change from before to after (nil: not
// known) took one of classes, each selected for its own documents only
// (a GraphQL field's include_children: false), out of the document
// classes: dropped, made an interface or a subdocument type. A class
// that left or joined those under one of them changes nothing of what
// such a selection covers; nil when none left. An interface without
// documents of its own covers none before and after.
func OwnLeft(before, after *sluice.Schema, classes []string) *Regroup {
	for _, u := range classes {
		if before == nil {
			if c := after.Class(u); c == nil || c.Kind == sluice.KindSubdocument {
				return &Regroup{Under: u, Class: u, Deleted: true, How: leftHow(after, u, u)}
			}
			continue
		}
		if isUnder(before, u, "") && !isUnder(after, u, "") {
			return &Regroup{Under: u, Class: u, Deleted: true, How: leftHow(after, u, u)}
		}
	}
	return nil
}

// isUnder reports whether class is a document class of s that is under
// or implements it ("": any document class).
func isUnder(s *sluice.Schema, class, under string) bool {
	c := s.Class(class)
	return c != nil && c.Kind == sluice.KindDocument && (under == "" || s.IsA(class, under))
}

// leftHow says how schema after took class out of under.
func leftHow(after *sluice.Schema, class, under string) string {
	switch c := after.Class(class); {
	case c == nil:
		return "dropped class " + class
	case c.Kind == sluice.KindAbstract:
		return "made " + class + " an interface"
	case c.Kind == sluice.KindSubdocument:
		return "made " + class + " a subdocument type"
	default:
		return "made " + class + " stop implementing " + under
	}
}

// RegroupedError returns the CodeConflict error that ends a stream of d
// at schema change c, which did rg, ending with outcome: what the
// consumer does and what its client may do (StreamEnds).
func RegroupedError(d *sluice.Database, c *sluice.Commit, rg *Regroup, outcome string) error {
	sel := "every document class"
	if rg.Under != "" {
		sel = rg.Under
	}
	var effect string
	switch {
	case rg.Joined:
		effect = fmt.Sprintf("the documents of %s joined the selection (%s) without an event", rg.Class, sel)
	case rg.Deleted && rg.Class == rg.Under:
		effect = fmt.Sprintf("it deleted the documents of %s, the class selected, without an event", rg.Class)
	case rg.Deleted:
		effect = fmt.Sprintf("it deleted the documents of %s, in the selection (%s), without an event", rg.Class, sel)
	default:
		effect = fmt.Sprintf("the documents of %s left the selection (%s) without an event", rg.Class, sel)
	}
	return sluice.Errorf(sluice.CodeConflict, "the schema of %s changed to version %d (commit %d), which %s: %s; %s",
		d.Path(), c.SchemaVersion, c.Seq, rg.How, effect, outcome)
}

// Fits returns the first of under (classes or interfaces) that class, a
// document class of s, is or implements; "" and false when it is none,
// or no document class of s. An empty under selects every document
// class (returned as "").
func Fits(s *sluice.Schema, class string, under []string) (string, bool) {
	if c := s.Class(class); c == nil || c.Kind != sluice.KindDocument {
		return "", false
	}
	if len(under) == 0 {
		return "", true
	}
	for _, u := range under {
		if s.IsA(class, u) {
			return u, true
		}
	}
	return "", false
}

// LeftSince returns the CodeConflict error that ends a stream of d read
// through cur by role meeting change pos, of a document of class, in a
// commit made under an older schema version in which class was a
// document class fitting under (itself or one it implemented; "": any
// document class), which cur can no longer show as such. It names the
// first schema change since the commit that took class out of under,
// from the walk of the versions a read as of the commit makes
// (scanVersions, cached), and ends with outcome: what the consumer does
// and what its client may do (StreamEnds).
func (e *Engine) LeftSince(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, pos sluice.Position, class, under, outcome string) error {
	from := "a schema change after it"
	sc, err := e.scanVersions(ctx, d, cur, role, pos.Seq, pos.Seq)
	if err != nil {
		return err
	}
	if len(sc.firsts) > 1 {
		i := sc.firstLeft[classPair{class, cmp.Or(under, class)}][0]
		if i <= 0 {
			i = sc.firstGone[class][0]
		}
		if i <= 0 {
			i = 1 // not recorded: the first change after the commit's version
		}
		from = fmt.Sprintf("a schema change after it (in effect from commit %d)", sc.firsts[min(i, len(sc.firsts)-1)])
	}
	var did string
	switch c := cur.Class(class); {
	case c == nil:
		did = "dropped class " + class
	case c.Kind != sluice.KindDocument:
		did = "made " + class + " no document class"
	default:
		did = "made " + class + " stop implementing " + under
	}
	sel := ""
	if under != "" && under != class {
		sel = ", then an implementation of " + under
	}
	return sluice.Errorf(sluice.CodeConflict, "event %s, a change of a document of %s%s, cannot be shown as it was (as streams that kept up were sent it): %s %s (the schema of %s is now at version %d); %s",
		pos, class, sel, from, did, d.Path(), d.SchemaVersion, outcome)
}

// LeftSince is Engine.LeftSince for the reader.
func (r *Reader) LeftSince(ctx context.Context, pos sluice.Position, class, under, outcome string) error {
	return r.e.LeftSince(ctx, r.Database, r.Schema, r.Role, pos, class, under, outcome)
}

// StreamEnds is the outcome (LeftSince) of a stream that ends at an event
// it cannot show as it was.
const StreamEnds = "this stream ends here: re-read the current state, then resume from a later position"
