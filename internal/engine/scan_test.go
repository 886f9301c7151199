package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestScanByDigests: a walk of the versions by their digests (scan) finds
// what a walk of every parsed version finds (scanParsed, the walk before
// digests, kept here as the reference), over random sequences of schema
// versions, each a small change of the one before: a class that comes,
// goes or changes kind, a field that changes type, list-ness or
// protection (of a document or a subdocument class), an enum that gains
// or loses values, a class that starts or stops implementing an
// interface (which references to it fit). Of a subdocument class, it
// checks the fields whose values a change dropped as well as their
// protection, and the versions that had fields today's lacks.
func TestScanByDigests(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 1000 {
		n := 1 + rng.IntN(8)
		var versions []*sluice.Schema
		var sdls []string
		var m schemaModel
		m.randomize(rng)
		for len(versions) < n {
			sdl := m.sdl()
			m.mutate(rng)
			s, err := schema.Parse(sdl)
			if err != nil {
				continue
			}
			versions, sdls = append(versions, s), append(sdls, sdl)
		}
		firsts := make([]int64, n)
		for i := range firsts {
			firsts[i] = int64(1 + 3*i)
		}
		// Today's schema is the last version; the walk also works through
		// another one.
		cur := versions[n-1]
		if rng.IntN(4) == 0 {
			m.randomize(rng)
			if s, err := schema.Parse(m.sdl()); err == nil {
				cur = s
			}
		}
		at := rng.IntN(n)
		role := []sluice.Role{sluice.RoleRead, sluice.RoleWrite, sluice.RoleAdmin}[rng.IntN(3)]
		want, err := scanParsed(firsts, at, func(i int) (*sluice.Schema, error) { return versions[i], nil }, cur, role)
		if err != nil {
			t.Fatal(err)
		}
		got := scanVersionsOf(t, versions, firsts, at, cur, role)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d (at %d, role %v): by digests\n%+v\nparsed\n%+v\nversions:\n%s", run, at, role, *got, *want, strings.Join(sdls, "\n--\n"))
		}
		// A walk cached (compact) is the walk, less the parsed versions
		// a cached walk loads again.
		kept := got.compact()
		kept.then, kept.atThen = got.then, got.atThen
		if !reflect.DeepEqual(kept, got) {
			t.Fatalf("run %d: cached\n%+v\nwalked\n%+v", run, *kept, *got)
		}
	}
}

// schemaModel is a schema a random walk evolves: classes by number (kind
// 0: absent), each with its fields' declarations by number ("": absent),
// and the values of enum E.
type schemaModel struct {
	kinds   [4]int
	fields  [4][4]string
	parents [4]int // the class each implements, when an interface (-1: none)
	enum    []string
}

// randomize makes m a random schema.
func (m *schemaModel) randomize(rng *rand.Rand) {
	m.enum = []string{"A", "B", "C"}
	for c := range m.kinds {
		m.kinds[c] = rng.IntN(5)
		m.parents[c] = rng.IntN(5) - 1
		for f := range m.fields[c] {
			m.fields[c][f] = randomField(rng)
		}
	}
}

// mutate changes one thing of m: a class's kind, a field, or the enum's
// values.
func (m *schemaModel) mutate(rng *rand.Rand) {
	c := rng.IntN(4)
	switch rng.IntN(4) {
	case 0:
		m.kinds[c] = rng.IntN(5)
	case 3:
		m.parents[c] = rng.IntN(5) - 1
	case 1:
		m.fields[c][1+rng.IntN(3)] = randomField(rng)
	case 2:
		var enum []string
		for _, v := range []string{"A", "B", "C"} {
			if rng.IntN(3) > 0 {
				enum = append(enum, v)
			}
		}
		if len(enum) > 0 {
			m.enum = enum
		}
	}
}

// randomField returns a random field declaration ("": none).
func randomField(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	// A class's name: a reference, or a subdocument (as the class is).
	typ := []string{"String", "Int", "E", "C0", "C1", "C2", "C3"}[rng.IntN(7)]
	if rng.IntN(3) == 0 {
		typ = "[" + typ + "]"
	}
	return typ + []string{"", "", " @private", ` @protected(role: "write")`}[rng.IntN(4)]
}

// sdl returns m's schema.
func (m *schemaModel) sdl() string {
	var b strings.Builder
	fmt.Fprintf(&b, "enum E { %s }\n", strings.Join(m.enum, " "))
	for c, kind := range m.kinds {
		switch kind {
		case 0:
			continue
		case 1, 2:
			fmt.Fprintf(&b, "type C%d%s {", c, m.implements(c))
		case 3:
			fmt.Fprintf(&b, "type C%d @subdocument {", c)
		case 4:
			fmt.Fprintf(&b, "interface C%d%s {", c, m.implements(c))
		}
		b.WriteString(" f0: String")
		for f, decl := range m.fields[c] {
			if f > 0 && decl != "" {
				fmt.Fprintf(&b, " f%d: %s", f, decl)
			}
		}
		b.WriteString(" }\n")
	}
	return b.String()
}

// implements returns the implements clause of class c ("": none): of its
// parent, when that is an interface.
func (m *schemaModel) implements(c int) string {
	if p := m.parents[c]; p >= 0 && p != c && m.kinds[p] == 4 {
		return fmt.Sprintf(" implements C%d", p)
	}
	return ""
}

// scanParsed is scan as it was before digests: it walks the versions
// whose first commits are firsts, oldest first, loading each with load.
func scanParsed(firsts []int64, at int, load func(i int) (*sluice.Schema, error), cur *sluice.Schema, role sluice.Role) (*versionScan, error) {
	sc := &versionScan{firsts: firsts, at: at, gone: map[string]int{}, broke: map[fieldKey]int{}, left: map[classPair]int{}, hidden: map[fieldKey]int{},
		droppedIn: map[string]int{}, brokeIn: map[fieldKey]int{}, lastDoc: map[string]int{}, strays: -1,
		firstBroke: map[fieldKey][2]int{}, firstGone: map[string][2]int{}, firstLeft: map[classPair][2]int{}}
	isDoc := func(c *sluice.Class) bool { return c != nil && c.Kind == sluice.KindDocument }
	isSub := func(c *sluice.Class) bool { return c != nil && c.Kind == sluice.KindSubdocument }
	var prev *sluice.Schema
	for i := range firsts {
		s, err := load(i)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			sc.then = s
		}
		if i == at {
			sc.atThen = s
		}
		// The classes today's schema lacks: only those of versions 0 and
		// at are followed (what a read as of their positions covers),
		// and the first dropped, whatever its version (what a diff's
		// log covers).
		if i == 0 || i == at {
			for _, name := range s.Order {
				if isDoc(s.Class(name)) && !isDoc(cur.Class(name)) {
					sc.lastDoc[name] = i
				}
			}
		}
		for name := range sc.lastDoc {
			if isDoc(s.Class(name)) {
				sc.lastDoc[name] = i
			} else if prev != nil && isDoc(prev.Class(name)) {
				noteFirst(sc.firstGone, name, i, at)
			}
		}
		if prev != nil && sc.dropped == 0 {
			for _, name := range prev.Order {
				if isDoc(prev.Class(name)) && !isDoc(s.Class(name)) && !isDoc(cur.Class(name)) {
					sc.dropped, sc.droppedName = i, name
					break
				}
			}
		}
		for _, name := range cur.Order {
			c := cur.Classes[name]
			if c.Kind == sluice.KindSubdocument {
				// Of a subdocument class, whether it had fields today's
				// lacks, and of its fields whether they were protected
				// and whether their values were dropped.
				if sclass := s.Class(name); isSub(sclass) {
					for _, f := range sclass.Fields {
						if c.Field(f.Name) == nil {
							sc.strays = i
						}
					}
				}
				for _, f := range c.Fields {
					k := fieldKey{name, f.Name}
					if of := fieldOf(s, name, f.Name); of != nil && of.ReadRole > role {
						sc.hidden[k] = i
					}
					if prev == nil || sameColumnParsed(prev, s, name, f.Name) {
						continue
					}
					sc.broke[k] = i
					if fieldOf(prev, name, f.Name) != nil {
						noteFirst(sc.firstBroke, k, i, at)
					}
					if _, ok := sc.brokeIn[k]; !ok && isSub(prev.Class(name)) && isSub(s.Class(name)) && prev.Class(name).Field(f.Name) != nil {
						sc.brokeIn[k] = i
					}
				}
				continue
			}
			if c.Kind != sluice.KindDocument {
				continue
			}
			doc := isDoc(s.Class(name))
			if !doc {
				sc.gone[name] = i
			}
			var pc *sluice.Class
			if prev != nil {
				pc = prev.Class(name)
				if _, ok := sc.droppedIn[name]; !ok && isDoc(pc) && !doc {
					sc.droppedIn[name] = i
				}
				if isDoc(pc) && !doc {
					noteFirst(sc.firstGone, name, i, at)
				}
			}
			for _, f := range c.Fields {
				k := fieldKey{name, f.Name}
				if of := fieldOf(s, name, f.Name); of != nil && of.ReadRole > role {
					sc.hidden[k] = i
				}
				if prev == nil || sameColumnParsed(prev, s, name, f.Name) {
					continue
				}
				sc.broke[k] = i
				if fieldOf(prev, name, f.Name) != nil {
					noteFirst(sc.firstBroke, k, i, at)
				}
				if _, ok := sc.brokeIn[k]; !ok && isDoc(pc) && doc && pc.Field(f.Name) != nil {
					sc.brokeIn[k] = i
				}
			}
		}
		if prev != nil {
			// The classes and interfaces some document class stopped
			// fitting under, and the reference fields typed as them
			// whose columns stayed.
			lost := map[string]bool{}
			for _, name := range prev.Order {
				for _, under := range prev.Order {
					if fits(prev, name, under) && !fits(s, name, under) {
						lost[under] = true
						sc.left[classPair{name, under}] = i
						noteFirst(sc.firstLeft, classPair{name, under}, i, at)
					}
				}
			}
			for _, name := range cur.Order {
				c := cur.Classes[name]
				if c.Kind != sluice.KindDocument && c.Kind != sluice.KindSubdocument {
					continue
				}
				for _, f := range c.Fields {
					of := fieldOf(s, name, f.Name)
					if of == nil || of.Type.Kind != sluice.TypeReference || !lost[of.Type.Name] || !sameColumnParsed(prev, s, name, f.Name) {
						continue
					}
					k := fieldKey{name, f.Name}
					sc.broke[k] = i
					noteFirst(sc.firstBroke, k, i, at)
					if _, ok := sc.brokeIn[k]; !ok && prev.Class(name).Kind == c.Kind && s.Class(name).Kind == c.Kind {
						sc.brokeIn[k] = i
					}
				}
			}
		}
		prev = s
	}
	return sc, nil
}

// TestDigestsKeepNoSchemaText: a digest holds strings of its own, not
// parts of its schema's text (as large as max_schema_bytes): the cache of
// digests is bounded by what they hold, and 400 digests of schemas of
// 900 KB kept 330 MB alive.
func TestDigestsKeepNoSchemaText(t *testing.T) {
	t.Parallel()
	prev, err := schema.Parse(`enum E { A B } type C { f: String }`)
	if err != nil {
		t.Fatal(err)
	}
	sdl := `"""` + strings.Repeat("a long description ", 1000) + `"""
		enum E { A } type C { f: String g: E } type D { h: Int }`
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	d := digestOf(prev, s)
	if len(d.classes) != 2 || len(d.enums) != 1 {
		t.Fatalf("digest: %d classes, %d enums, want 2 and 1", len(d.classes), len(d.enums))
	}
	lo := uintptr(unsafe.Pointer(unsafe.StringData(s.SDL)))
	hi := lo + uintptr(len(s.SDL))
	check := func(what, str string) {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(str))); str != "" && p >= lo && p < hi {
			t.Errorf("%s %q shares the schema's text", what, str)
		}
	}
	for _, nc := range d.classes {
		check("class name", nc.name)
		check("class", nc.class.Name)
		if nc.class.Description != "" {
			t.Errorf("class %s keeps its description", nc.name)
		}
		for _, f := range nc.class.Fields {
			check("field", f.Name)
			check("type", f.Type.Name)
		}
	}
	for name, e := range d.enums {
		check("enum name", name)
		for _, v := range e.Values {
			check("enum value", v)
		}
	}
}

// sameColumnParsed is sameColumn for parsed versions, as the schema
// change decides it (schema.Widens for a reference of another type).
func sameColumnParsed(prev, s *sluice.Schema, class, field string) bool {
	af, bf := fieldOf(prev, class, field), fieldOf(s, class, field)
	if af == nil || bf == nil {
		return false
	}
	if af.Type != bf.Type || af.List != bf.List {
		return schema.Widens(prev, s, af, bf)
	}
	if af.Type.Kind == sluice.TypeEnum {
		ae, be := prev.Enum(af.Type.Name), s.Enum(bf.Type.Name)
		if ae == nil || be == nil {
			return false
		}
		for _, v := range ae.Values {
			if !be.Has(v) {
				return false
			}
		}
	}
	return true
}
