package engine

import (
	"slices"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schemacache"
)

// A read of the past walks a database's schema versions from the one in
// force at its position to today's (scan). Walking parsed versions cost a
// parse of each one whose parse was not cached (1.5 ms for 9 KB of SDL:
// 300 ms for a read as of a position 200 versions back, every time, as
// the walk went through more versions than the cache of parsed ones
// holds). The walk needs only what each version changed from the one
// before it: its digest, computed once from the two versions and kept
// (small: a schema change touches a few classes), so that a walk parses
// only its first version and the one in force at a diff's end.

// versionDigest is what a schema version changed from the version before
// it, in what a walk of the versions reads (sameForScan): the classes it
// added, changed or removed, as it has them (nil: removed), and likewise
// its enums.
type versionDigest struct {
	classes []namedClass // in the previous version's order, then the new ones in this one's
	enums   map[string]*sluice.Enum
	size    int // about the bytes it holds, for the cache's bound
}

type namedClass struct {
	name  string
	class *sluice.Class
}

// digestOf returns what s changed from prev.
func digestOf(prev, s *sluice.Schema) *versionDigest {
	d := &versionDigest{enums: map[string]*sluice.Enum{}}
	add := func(name string, c *sluice.Class) {
		c = compactClass(c)
		d.classes = append(d.classes, namedClass{strings.Clone(name), c})
		d.size += 64 + len(name)
		if c != nil {
			for _, p := range c.Parents {
				d.size += 16 + len(p)
			}
			for _, f := range c.Fields {
				d.size += 96 + len(f.Name) + len(f.Type.Name)
			}
		}
	}
	for _, name := range prev.Order {
		if c := s.Class(name); !sameForScan(prev.Class(name), c) {
			add(name, c)
		}
	}
	for _, name := range s.Order {
		if prev.Class(name) == nil {
			add(name, s.Class(name))
		}
	}
	for name, e := range prev.Enums {
		if ne := s.Enums[name]; ne == nil || !slices.Equal(e.Values, ne.Values) {
			d.enums[strings.Clone(name)] = compactEnum(ne)
		}
	}
	for name, ne := range s.Enums {
		if prev.Enums[name] == nil {
			d.enums[strings.Clone(name)] = compactEnum(ne)
		}
	}
	for name, e := range d.enums {
		d.size += 64 + len(name)
		if e != nil {
			for _, v := range e.Values {
				d.size += 16 + len(v)
			}
		}
	}
	return d
}

// compactClass returns a copy of c holding only what a walk reads (see
// sameForScan), in strings of its own: a parsed class's strings share the
// memory of its schema's text (as large as max_schema_bytes), which a
// digest must not keep, and its descriptions need not be kept.
func compactClass(c *sluice.Class) *sluice.Class {
	if c == nil {
		return nil
	}
	out := &sluice.Class{Name: strings.Clone(c.Name), Kind: c.Kind, Fields: make([]*sluice.Field, len(c.Fields))}
	for _, p := range c.Parents {
		out.Parents = append(out.Parents, strings.Clone(p))
	}
	for i, f := range c.Fields {
		out.Fields[i] = &sluice.Field{Name: strings.Clone(f.Name), Type: sluice.FieldType{Kind: f.Type.Kind, Name: strings.Clone(f.Type.Name)},
			List: f.List, ReadRole: f.ReadRole}
	}
	return out
}

// compactEnum returns a copy of e in strings of its own (see compactClass).
func compactEnum(e *sluice.Enum) *sluice.Enum {
	if e == nil {
		return nil
	}
	out := &sluice.Enum{Name: strings.Clone(e.Name), Values: make([]string, len(e.Values))}
	for i, v := range e.Values {
		out.Values[i] = strings.Clone(v)
	}
	return out
}

// sameForScan reports whether classes a and b are alike in all a walk of
// the versions reads of them: kind, parents (which say what references
// fit, see leftOut), and each field's name, type, list-ness and read
// role.
func sameForScan(a, b *sluice.Class) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || !slices.Equal(a.Parents, b.Parents) || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i, f := range a.Fields {
		g := b.Fields[i]
		if f.Name != g.Name || f.Type != g.Type || f.List != g.List || f.ReadRole != g.ReadRole {
			return false
		}
	}
	return true
}

// view is a schema version as a walk sees it: the classes and enums of
// its first version with the digests of the following ones applied.
type view struct {
	classes map[string]*sluice.Class
	enums   map[string]*sluice.Enum
}

func viewOf(s *sluice.Schema) *view {
	v := &view{classes: make(map[string]*sluice.Class, len(s.Classes)), enums: make(map[string]*sluice.Enum, len(s.Enums))}
	for name, c := range s.Classes {
		v.classes[name] = c
	}
	for name, e := range s.Enums {
		v.enums[name] = e
	}
	return v
}

func (v *view) Class(name string) *sluice.Class { return v.classes[name] }
func (v *view) Enum(name string) *sluice.Enum   { return v.enums[name] }

// apply makes v the version digest d describes, and returns the version v
// was (a view over v holding what d changed as it was).
func (v *view) apply(d *versionDigest) *before {
	b := &before{now: v, classes: make(map[string]*sluice.Class, len(d.classes)), enums: make(map[string]*sluice.Enum, len(d.enums))}
	for _, nc := range d.classes {
		b.classes[nc.name] = v.classes[nc.name]
		if nc.class == nil {
			delete(v.classes, nc.name)
		} else {
			v.classes[nc.name] = nc.class
		}
	}
	for name, e := range d.enums {
		b.enums[name] = v.enums[name]
		if e == nil {
			delete(v.enums, name)
		} else {
			v.enums[name] = e
		}
	}
	return b
}

// before is the version before a digest was applied to now: what the
// digest changed, as it was, and everything else as now has it.
type before struct {
	now     *view
	classes map[string]*sluice.Class
	enums   map[string]*sluice.Enum
}

func (b *before) Class(name string) *sluice.Class {
	if c, ok := b.classes[name]; ok {
		return c
	}
	return b.now.Class(name)
}

func (b *before) Enum(name string) *sluice.Enum {
	if e, ok := b.enums[name]; ok {
		return e
	}
	return b.now.Enum(name)
}

// changed reports whether the digest changed class or enum name.
func (b *before) changed(class, enum string) bool {
	_, c := b.classes[class]
	_, e := b.enums[enum]
	return c || e
}

// schemaView is what fieldOf, ancestors and fitsIn read of a version: a parsed
// schema, or a view of one.
type schemaView interface {
	Class(name string) *sluice.Class
	Enum(name string) *sluice.Enum
}

// ancestors returns class name of s and every class it inherits from,
// directly or not, each once.
func ancestors(s schemaView, name string) []string {
	var out []string
	seen := map[string]bool{}
	stack := []string{name}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		if c := s.Class(n); c != nil {
			stack = append(stack, c.Parents...)
		}
	}
	return out
}

// fitsIn reports whether, in s, a reference to class may point to a
// document of class doc (fits, for a view).
func fitsIn(s schemaView, doc, class string) bool {
	if dc := s.Class(doc); dc == nil || dc.Kind != sluice.KindDocument {
		return false
	}
	return slices.Contains(ancestors(s, doc), class)
}

// Digests bounds: in entries, and in the bytes digests hold (a digest of
// a schema change that rewrote every class is as large as the schema).
const (
	digestEntries = 1 << 16
	digestBytes   = 32 << 20
)

// sizedCache keeps values by key (a schema version, mostly), bounded in
// entries and in the bytes they hold (size). It is safe for concurrent
// use.
type sizedCache[K comparable, V any] struct {
	mu       sync.Mutex // guards bytes, and the evictions that keep it bounded
	lru      *lru.Cache[K, V]
	size     func(V) int
	bytes    int
	maxBytes int
}

func newSizedCache[K comparable, V any](entries, maxBytes int, size func(V) int) *sizedCache[K, V] {
	c := &sizedCache[K, V]{size: size, maxBytes: maxBytes}
	l, err := lru.NewWithEvict(entries, func(_ K, v V) { c.bytes -= size(v) })
	if err != nil {
		panic(err) // only for entries <= 0
	}
	c.lru = l
	return c
}

// newDigestCache returns the cache of version digests.
func newDigestCache() *sizedCache[schemacache.Key, *versionDigest] {
	return newSizedCache[schemacache.Key](digestEntries, digestBytes, func(d *versionDigest) int { return d.size })
}

func (c *sizedCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(k)
}

func (c *sizedCache[K, V]) add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(k) {
		return
	}
	c.lru.Add(k, v)
	c.bytes += c.size(v)
	for c.bytes > c.maxBytes && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}
