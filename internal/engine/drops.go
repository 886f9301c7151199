package engine

import (
	"context"
	"fmt"
	"maps"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schemacache"
)

// A schema change that drops stored values (conform.go: a field dropped
// or retyped, inside subdocuments too, references that no longer fit,
// enum values) rewrites the documents in place and leaves their versions
// alone: reads of the past go by the commit each row names. So the
// version alone cannot tag the whole document once such a change took
// something from it: a client holding the body from before, revalidating
// with the bare version, would be told it is current. The tag of a whole
// document of a class whose documents such a change could lose values of
// names the last version that did (sluice.ViewName of RoleAdmin with it,
// which sluice.VersionOfTag reads back as the version for a write): it
// changes once per such change and never for a change that only adds.

// Bounds of the cache of what dropsOf finds: in entries (one per database
// and schema version read), and in the bytes they hold.
const (
	dropEntries = 4096
	dropBytes   = 8 << 20
)

// newDropCache returns the cache of dropsOf's answers.
func newDropCache() *sizedCache[schemacache.Key, map[string]int] {
	return newSizedCache[schemacache.Key](dropEntries, dropBytes, func(m map[string]int) int {
		n := 64
		for name := range m {
			n += 32 + len(name)
		}
		return n
	})
}

// wholeView returns the view name of a document of class, read whole
// from database d at its schema version: "" (the bare version) unless a
// schema change dropped stored values of class's documents, and then the
// whole view as of the last version that did.
func (e *Engine) wholeView(ctx context.Context, d *sluice.Database, class string) (string, error) {
	drops, err := e.dropsOf(ctx, d)
	if err != nil {
		return "", err
	}
	if v := drops[class]; v > 0 {
		return sluice.ViewName(sluice.RoleAdmin, v), nil
	}
	return "", nil
}

// dropsOf returns, by document class, the last schema version of d (up to
// d.SchemaVersion) whose change dropped stored values of its documents.
// The answer is cached per database and schema version (a new version is
// a new entry, on every replica; the map is shared: callers only read
// it), and made from the newest cached answer of an older version and the
// digests of the versions since: after a schema change, one digest. Until
// then, concurrent reads that miss wait for one walk, each as long as its
// own ctx lasts.
func (e *Engine) dropsOf(ctx context.Context, d *sluice.Database) (map[string]int, error) {
	key := schemacache.Key{DB: d.ID, Version: d.SchemaVersion}
	if m, ok := e.drops.get(key); ok {
		return m, nil
	}
	// The walk is every waiting read's (sharedwalk.go): it runs on wctx,
	// never on this read's ctx.
	v, err := e.shareWalk(ctx, &e.dropWalks, fmt.Sprintf("%d/%d", d.ID, d.SchemaVersion), func(wctx context.Context) (any, error) {
		if m, ok := e.drops.get(key); ok {
			return m, nil
		}
		return e.walkDrops(wctx, d, key)
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]int), nil
}

// walkDrops is dropsOf's walk of d's versions, from the newest one whose
// answer is cached (or the first), and caches the answer under key.
func (e *Engine) walkDrops(ctx context.Context, d *sluice.Database, key schemacache.Key) (map[string]int, error) {
	all, err := e.store.SchemaVersions(ctx, d)
	if err != nil {
		return nil, err
	}
	walk := all
	for i, v := range all {
		if v.Version > d.SchemaVersion {
			walk = all[:i] // newer than the schema this read shows through
			break
		}
	}
	out := map[string]int{}
	if len(walk) > 1 {
		from := 0
		for j := len(walk) - 2; j > 0; j-- {
			if m, ok := e.drops.get(schemacache.Key{DB: d.ID, Version: walk[j].Version}); ok {
				from, out = j, maps.Clone(m)
				break
			}
		}
		first, err := e.store.SchemaAt(ctx, d.ID, walk[from].Version)
		if err != nil {
			return nil, err
		}
		// One version held at a time, made the next by its digest, as a
		// read of the past walks them (versionScan).
		s := viewOf(first)
		for i := from + 1; i < len(walk); i++ {
			dg, err := e.versionDigest(ctx, d.ID, walk[i-1].Version, walk[i].Version)
			if err != nil {
				return nil, err
			}
			prev := s.apply(dg)
			for _, name := range valuesDropped(prev, s, dg) {
				out[name] = walk[i].Version
			}
		}
	}
	e.drops.add(key, out)
	return out, nil
}

// valuesDropped returns the document classes of prev whose stored
// documents the change to s (d, its digest) could take values from: a
// field of theirs, or of a subdocument class they hold at any depth,
// that the change stores elsewhere or not at all (sameColumn: dropped,
// retyped, made a list or not, its enum losing values), or a reference
// field of either whose type a document class no longer fits (unfitted).
// Fields added, made optional or required, or protected drop nothing.
func valuesDropped(prev *before, s *view, d *versionDigest) []string {
	isField := func(c *sluice.Class) bool {
		return c != nil && (c.Kind == sluice.KindDocument || c.Kind == sluice.KindSubdocument)
	}
	// lossy holds the document and subdocument classes of prev with a
	// field whose stored values the change drops.
	lossy := map[string]bool{}
	check := func(name string, fits map[string]bool) {
		c := prev.Class(name)
		if !isField(c) {
			return
		}
		for _, f := range c.Fields {
			if !sameColumn(prev, s, name, f.Name) || f.Type.Kind == sluice.TypeReference && fits[f.Type.Name] {
				lossy[name] = true
				return
			}
		}
	}
	// A class only loses a field's values when the digest changed it, its
	// enum lost values, or a class left what its references point to.
	lost := map[string]bool{}
	for _, p := range unfitted(prev, s, d) {
		lost[p.under] = true
	}
	enumLost := false
	for name := range d.enums {
		if pe := prev.Enum(name); pe != nil {
			for _, v := range pe.Values {
				if ne := s.Enum(name); ne == nil || !ne.Has(v) {
					enumLost = true
				}
			}
		}
	}
	if len(lost) > 0 || enumLost {
		for name := range classesOf(prev, s) {
			check(name, lost)
		}
	} else {
		for _, nc := range d.classes {
			check(nc.name, nil)
		}
	}
	if len(lossy) == 0 {
		return nil
	}
	// The document classes whose documents hold a lossy class: itself, or
	// through subdocument fields at any depth, as prev stored them.
	var out []string
	for name := range classesOf(prev, s) {
		c := prev.Class(name)
		if c == nil || c.Kind != sluice.KindDocument {
			continue
		}
		seen := map[string]bool{}
		stack := []string{name}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[n] {
				continue
			}
			seen[n] = true
			if lossy[n] {
				out = append(out, name)
				break
			}
			if nc := prev.Class(n); nc != nil {
				for _, f := range nc.Fields {
					if f.Type.Kind == sluice.TypeSubdocument {
						stack = append(stack, f.Type.Name)
					}
				}
			}
		}
	}
	return out
}

// classesOf returns the names of the classes of prev, the version before
// s: those of s it had, and those the change dropped.
func classesOf(prev *before, s *view) map[string]bool {
	out := map[string]bool{}
	for name := range s.classes {
		if prev.Class(name) != nil {
			out[name] = true
		}
	}
	for name, c := range prev.classes {
		if c != nil {
			out[name] = true
		}
	}
	return out
}
