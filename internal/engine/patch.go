package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/mergepatch"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Patch is one document of a partial write: the document's id, its JSON
// Merge Patch (RFC 7396: absent members are kept, null removes a member,
// an object merges into the member it names) as decoded JSON (numbers as
// json.Number), and its precondition. The patch may hold the document's
// own "@id" and "@type" (a document as it was read, changed) but not
// change them; its "@version", when given, is its precondition.
type Patch struct {
	ID     string
	Fields map[string]any
	Expect sluice.Precondition
	// Typed says the patch is typed by the schema (GraphQL's X_update):
	// only a subdocument is merged, and every other field given, a JSON
	// one included, is set whole, so a JSON value with null members or
	// fewer keys than the stored one can be written. Untyped patches are
	// REST's RFC 7396 merge patches, which merge every object they hold,
	// a JSON field's too.
	Typed bool
}

// Patch applies patches to existing documents in one commit. Each document
// is read under its row lock, patched and validated again inside the
// commit's transaction, so concurrent patches of different fields of one
// document both apply. A patch that would make its document invalid (a
// required field removed, a value of the wrong type, an unknown field)
// fails the request with an error naming the document and the field; a
// missing document is NotFound; a document whose precondition does not
// hold fails it with a *sluice.StaleError. opt.Expect applies to a
// request of one patch. Nothing of a failed request is written.
//
// The stored documents the patches rewrite are charged to the write
// budget, on top of opt.Charge (see storedCharge).
func (e *Engine) Patch(ctx context.Context, u *sluice.User, org, name string, patches []Patch, opt WriteOptions) (*WriteResult, error) {
	charge := opt.Charge
	if charge == nil {
		charge = e.ChargeWrite(u)
		defer charge.Release()
	}
	pc := newStoredCharge(charge)
	var res *WriteResult
	err := e.current(ctx, u, org, name, sluice.RoleWrite, func(d *sluice.Database, s *sluice.Schema) error {
		if err := writable(d); err != nil {
			return err
		}
		for {
			var err error
			res, err = e.patchWith(ctx, u, d, s, patches, opt, pc)
			if again, err := pc.wait(ctx, err); !again {
				return err
			}
		}
	})
	return res, err
}

// patchWith is Patch with database d and its schema s, charging the
// stored documents it reads to pc.
func (e *Engine) patchWith(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, patches []Patch, opt WriteOptions, pc *storedCharge) (*WriteResult, error) {
	if !opt.Expect.None() {
		if len(patches) != 1 {
			return e.refused(ctx, u, d, opt, errOnePrecondition)
		}
		patches[0].Expect = opt.Expect
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, err
	}
	ids, expect, err := checkPatches(s, role, patches, !opt.Expect.None())
	if err != nil {
		return e.refused(ctx, u, d, opt, err)
	}
	res := &WriteResult{IDs: ids}
	spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: len(patches) <= groupMax, Stored: pc,
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			return writePatches(ctx, w, s, role, patches, ids, expect)
		}}
	return e.write(ctx, u, d, spec, opt, res)
}

// checkPatches checks patches by a writer of role against schema s and
// takes their "@id", "@type" and "@version" out of their fields; it
// returns their ids and preconditions. headerExpect says each patch's
// Expect came from the request (If-Match), which its "@version" must then
// agree with.
func checkPatches(s *sluice.Schema, role sluice.Role, patches []Patch, headerExpect bool) ([]string, []sluice.Precondition, error) {
	if len(patches) == 0 {
		return nil, nil, sluice.Errorf(sluice.CodeInvalid, "no documents to patch")
	}
	ids := make([]string, len(patches))
	expect := make([]sluice.Precondition, len(patches))
	seen := make(map[string]bool, len(patches))
	for i := range patches {
		p := &patches[i]
		if err := checkIDClass(s, p.ID); err != nil {
			return nil, nil, err
		}
		class, key, _ := strings.Cut(p.ID, "/")
		c := s.Class(class)
		if err := schema.CheckKey(key); err != nil {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: %s", sluice.Echo(p.ID), sluice.ErrorMessage(err))
		}
		if seen[p.ID] {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "document %s is patched twice in the request", p.ID)
		}
		seen[p.ID] = true
		if v, ok := p.Fields["@id"]; ok {
			if id, _ := v.(string); id != p.ID && id != key {
				return nil, nil, sluice.Errorf(sluice.CodeInvalid, "the patch of %s changes its \"@id\": a patch cannot", p.ID)
			}
		}
		if v, ok := p.Fields["@type"]; ok && v != class {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "the patch of %s changes its \"@type\": a patch cannot", p.ID)
		}
		if v, ok := p.Fields["@version"]; ok && v != nil {
			version, _ := v.(string)
			if version == "" {
				return nil, nil, sluice.Errorf(sluice.CodeInvalid, `the patch of %s: "@version" must be a version string as Sluice gave it (or null)`, p.ID)
			}
			switch {
			case p.Expect.None():
				p.Expect.Version = version
			case !headerExpect || p.Expect.Version != version:
				return nil, nil, errOnePrecondition
			}
		}
		if p.Expect.Absent {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "a patch cannot require that its document does not exist (If-None-Match: *): it patches an existing one")
		}
		fields := make(map[string]any, len(p.Fields))
		for k, v := range p.Fields {
			if k != "@id" && k != "@type" && k != "@version" {
				fields[k] = v
			}
		}
		if err := schema.CheckPatch(s, c, fields); err != nil {
			return nil, nil, sluice.Errorf(sluice.ErrorCode(err), "document %s: the patch is invalid: %s", p.ID, sluice.ErrorMessage(err))
		}
		if name := hiddenMerge(role, s, c, fields, p.Typed, ""); name != "" {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "document %s: the patch merges into field %q, which your role cannot read: a patch may remove such a field (null), not merge into what it cannot see; a replace writes it whole", p.ID, name)
		}
		p.Fields = fields
		ids[i], expect[i] = p.ID, p.Expect
	}
	return ids, expect, nil
}

// writePatches writes patches by a writer of role, checked by
// checkPatches, with w.
func writePatches(ctx context.Context, w *postgres.Writer, s *sluice.Schema, role sluice.Role, patches []Patch, ids []string, expect []sluice.Precondition) error {
	return w.Patch(ctx, ids, expect, func(i int, current []byte) (*sluice.Document, error) {
		return applyPatch(s, role, ids[i], current, patches[i].Fields, patches[i].Typed)
	})
}

// applyPatch returns document id, whose API-form JSON is current, with
// patch by a writer of role merged into it, validated against s.
//
// A merge patch keeps what it does not name, hidden fields included; but
// a list it names replaces the stored one whole. A list of subdocuments
// the patch sends as role reads it (a document as read, changed
// elsewhere) is kept as stored, hidden fields of its items included, as a
// replace keeps it (keep.go).
//
// typed is Patch.Typed: subdocuments are merged and every other field
// given replaces the stored value whole (mergeTyped).
func applyPatch(s *sluice.Schema, role sluice.Role, id string, current []byte, patch map[string]any, typed bool) (*sluice.Document, error) {
	dec := json.NewDecoder(bytes.NewReader(current))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", id, err)
	}
	class, _, _ := strings.Cut(id, "/")
	c := s.Class(class)
	var merged map[string]any
	if c != nil {
		kept := keepInPatch(role, s, c, patch, m)
		if typed {
			merged = mergeTyped(s, c, m, kept)
		} else {
			merged, _ = mergepatch.Apply(m, kept).(map[string]any)
		}
	} else {
		merged, _ = mergepatch.Apply(m, patch).(map[string]any)
	}
	var doc *sluice.Document
	var err error
	if c != nil && merged != nil && hidesFields(role, s) {
		// Errors tell the writer nothing of the stored values it
		// cannot read (schema.ValidateKept).
		keptInPatch(role, s, c, merged, patch)
		doc, err = schema.ValidateKept(s, merged, func(f *sluice.Field) bool { return hiddenFrom(role, s, f) })
	} else {
		doc, err = schema.ValidateDocument(s, merged)
	}
	if err != nil {
		return nil, sluice.Errorf(sluice.ErrorCode(err), "document %s: the patch would make it invalid: %s", id, sluice.ErrorMessage(err))
	}
	return doc, nil
}

// hiddenMerge returns the path of the first field, in patch (of an object
// of class c whose path is prefix) or in a single subdocument it merges
// into, that role cannot read and whose stored value the patch would
// merge into: a single subdocument given as an object, or a JSON field
// given an object when the patch is not typed (RFC 7396 merges it). The
// result of such a merge depends on what is stored there, which the
// writer never saw, and so would its errors (a subdocument merged into
// when none is stored lacks its required fields): a writer may remove
// such a field or set it whole (replace), not merge into it. "" when
// there is none.
func hiddenMerge(role sluice.Role, s *sluice.Schema, c *sluice.Class, patch map[string]any, typed bool, prefix string) string {
	for _, f := range c.Fields {
		if _, ok := patch[f.Name].(map[string]any); !ok {
			continue
		}
		single := f.Type.Kind == sluice.TypeSubdocument && !f.List
		json := f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON && !f.List
		switch {
		case hiddenFrom(role, s, f):
			if single || json && !typed {
				return prefix + f.Name
			}
		case single:
			if sc := s.Class(f.Type.Name); sc != nil {
				if name := hiddenMerge(role, s, sc, patch[f.Name].(map[string]any), typed, prefix+f.Name+"."); name != "" {
					return name
				}
			}
		}
	}
	return ""
}

// keptInPatch wraps, in place, as schema.Kept each value in m (an object
// of class c, patched with p, the merge patch as sent) that comes from the
// stored document and that role cannot read: the value of a hidden field
// p does not name, and each hidden value inside a subdocument that p
// leaves as stored, or sends as role reads it (keepInPatch put the stored
// one in its place), at any depth. A value p gives is left as it is,
// checked as any value the writer gives. m holds the stored document's
// values, decoded for this write alone, and p's, which are not changed.
func keptInPatch(role sluice.Role, s *sluice.Schema, c *sluice.Class, m, p map[string]any) {
	for _, f := range c.Fields {
		v, ok := m[f.Name]
		if !ok || v == nil {
			continue
		}
		pv, named := p[f.Name]
		switch {
		case hiddenFrom(role, s, f):
			if !named {
				m[f.Name] = schema.Kept{Value: v}
			}
		case f.Type.Kind != sluice.TypeSubdocument:
		case !named || f.List && !sameList(v, pv):
			m[f.Name] = markKept(role, s, f, v)
		case !f.List:
			sub, ok1 := v.(map[string]any)
			psub, ok2 := pv.(map[string]any)
			if sc := subdocumentClass(s, f, sub); ok1 && ok2 && sc != nil {
				keptInPatch(role, s, sc, sub, psub)
			}
		}
	}
}

// sameList reports whether a and b are one list (not equal ones): the
// patched document holds the list the patch sent, not the stored one.
func sameList(a, b any) bool {
	x, ok1 := a.([]any)
	y, ok2 := b.([]any)
	return ok1 && ok2 && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
}

// mergeTyped merges a typed patch of a document or subdocument of class c
// into target, in place: null removes a member, a single subdocument is
// merged into the stored one (of the class the patch or the stored one
// names), and any other value (a list, a JSON value, a scalar) replaces
// the stored one whole. RFC 7396 would merge a JSON field's object too,
// dropping its null members: X_update sets a JSON value as given, as
// X_replace does.
func mergeTyped(s *sluice.Schema, c *sluice.Class, target, patch map[string]any) map[string]any {
	if target == nil {
		target = make(map[string]any, len(patch))
	}
	for k, v := range patch {
		if v == nil {
			delete(target, k)
			continue
		}
		sub, isObject := v.(map[string]any)
		f := c.Field(k)
		if !isObject || f == nil || f.Type.Kind != sluice.TypeSubdocument || f.List {
			target[k] = v
			continue
		}
		stored, _ := target[k].(map[string]any)
		typ, _ := sub["@type"].(string)
		if typ == "" {
			typ, _ = stored["@type"].(string)
		}
		sc := s.Class(typ)
		if sc == nil {
			sc = s.Class(f.Type.Name)
		}
		if sc == nil {
			// Validation names what is wrong with it.
			target[k] = mergepatch.Apply(stored, sub)
			continue
		}
		target[k] = mergeTyped(s, sc, stored, sub)
	}
	return target
}
