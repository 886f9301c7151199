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

// Dropped reports whether commit c of d, made under an older schema
// version than d's, is the commit of the schema change that took class
// away: a class or interface of the version before (not a subdocument
// type), which the version c's change made has not, or only as a
// subdocument type. A stream of class open at c ended there (the change
// deleted the class's documents without an event); one that reads c
// later through a schema that has class again ends there too. False for
// a commit of d's version or a later one (the reader's schema judges it)
// and for any other commit. When the version before is not known, the
// class is taken to have been there.
func (e *Engine) Dropped(ctx context.Context, d *sluice.Database, c *sluice.Commit, class string) (bool, error) {
	if !c.NewSchema {
		return false, nil
	}
	then, err := e.SchemaThen(ctx, d, c)
	if err != nil || then == nil {
		return false, err
	}
	if cl := then.Class(class); cl != nil && cl.Kind != sluice.KindSubdocument {
		return false, nil
	}
	vs, err := e.store.SchemaVersions(ctx, d)
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		if v.Version == c.SchemaVersion-1 {
			before, err := e.store.SchemaAt(ctx, d.ID, v.Version)
			if err != nil {
				return false, err
			}
			cl := before.Class(class)
			return cl != nil && cl.Kind != sluice.KindSubdocument, nil
		}
	}
	return true, nil
}

// Dropped is Engine.Dropped for the reader's database.
func (r *Reader) Dropped(ctx context.Context, c *sluice.Commit, class string) (bool, error) {
	return r.e.Dropped(ctx, r.Database, c, class)
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
