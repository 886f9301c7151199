package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
	"github.com/sluice-dev/sluice/internal/schemacache"
)

// A read of the past shows the state at a position through today's
// schema. The log holds every document as it was, each image in the
// schema of its commit; today's tables hold what was not changed since.
// What neither can give is said, never guessed:
//
//   - a field whose column a schema change after the position dropped and
//     made again (another type, or dropped and added back) lost the
//     values it held then: those values are unknown; so are those of a
//     field of a subdocument class that such a change dropped from the
//     stored subdocuments (conform.go), though the document field holding
//     them kept its column, and those of a reference field (of a document
//     or a subdocument class) from which a schema change after the
//     position dropped the references that no longer fit its type (see
//     leftOut), though its column stayed;
//   - a field of a subdocument class that today's schema lacks is not
//     shown, as one of a document class is not: the log's images may
//     hold its values, which today's schema has no field for;
//   - a class dropped after the position, and so its documents, is lost
//     (a schema change deletes them without commits); and a class or
//     interface that a document class stopped implementing after the
//     position cannot be read as of then, as today's schema no longer
//     says it held that class's documents;
//   - a field protected from the reader's role (@private) in any schema
//     version since the position is hidden, even if today's schema lets
//     the role read it, as history never shows a field the reader could
//     not read at the commit; a field of a subdocument class too, at any
//     depth, as history hides it.
//
// A field that did not exist then (added since) reads as null, which is
// what it was.

// Past is a read of a database as of a position: the position, and what of
// the state then cannot be shown to the reader.
type Past struct {
	Position sluice.Position
	// Unknown holds, by class, the fields whose values as of Position
	// cannot be shown to the reader, each with the reason (a message
	// for the client). Its classes are document classes and subdocument
	// classes: a field of a subdocument is hidden wherever the
	// subdocument is (its protection is its class's).
	Unknown map[string]map[string]string
	// Lost holds the classes whose documents as of Position cannot be
	// shown, with the reason: today's, and those a schema change dropped
	// since (today's schema lacks them).
	Lost map[string]string
	// dropped holds the classes of Lost that today's schema lacks, and
	// then the schema in force at Position, whose class hierarchy says
	// which of them a read of one of today's classes would have covered.
	dropped []string
	then    *sluice.Schema
	// left holds, with the reason, the classes and interfaces of today's
	// schema that a document class of today's schema implemented at
	// Position and implements no longer: a read of one of them through
	// today's schema would leave that class's documents then out.
	left map[string]string
	// cur and role are today's schema and the reader's role, through
	// which Hidden finds the subdocument classes a read shows.
	cur  *sluice.Schema
	role sluice.Role
	// strays says that the log's images read may hold fields of
	// subdocuments that today's schema lacks (versionScan.strays), which
	// dropUnknown then leaves out.
	strays bool
}

// CheckField returns a CodeInvalid error saying why field of class cannot
// be shown as of p's position, nil when it can.
func (p *Past) CheckField(class, field string) error {
	if why, ok := p.Unknown[class][field]; ok {
		return sluice.Errorf(sluice.CodeInvalid, "%s", why)
	}
	return nil
}

// lost reports whether Lost names class (nil p: nothing is lost). Unlike
// CheckClass it looks at no class that held class's documents then: an
// image names its own class.
func (p *Past) lost(class string) bool {
	if p == nil {
		return false
	}
	_, ok := p.Lost[class]
	return ok
}

// CheckClass returns a CodeInvalid error saying why the documents of class
// cannot be shown as of p's position, nil when they can.
func (p *Past) CheckClass(class string) error {
	if why, ok := p.Lost[class]; ok {
		return sluice.Errorf(sluice.CodeInvalid, "%s", why)
	}
	if why, ok := p.left[class]; ok {
		return sluice.Errorf(sluice.CodeInvalid, "%s", why)
	}
	// A class dropped since, that was a subclass of class then: a read of
	// class as of then covers its documents.
	for _, c := range p.dropped {
		if p.then.IsA(c, class) {
			return sluice.Errorf(sluice.CodeInvalid, "%s", p.Lost[c])
		}
	}
	return nil
}

// CheckAll returns the error of CheckClass for the first class (by name)
// whose documents as of p's position cannot be shown, nil when there is
// none: a read of every class checks it.
func (p *Past) CheckAll() error {
	for _, c := range slices.Sorted(maps.Keys(p.Lost)) {
		return p.CheckClass(c)
	}
	return nil
}

// Hidden returns the fields ("Class.field", sorted) whose values as of
// p's position cannot be shown in documents of the given classes: theirs,
// and those of the subdocument classes, at any depth, of the fields shown.
// A subdocument's field is named by its class ("Address.street"), as a
// schema change names it, once however many fields hold that class.
func (p *Past) Hidden(classes []string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(name string)
	walk = func(name string) {
		if seen[name] {
			return // named already, or a subdocument class holding itself
		}
		seen[name] = true
		unknown := p.Unknown[name]
		for f := range unknown {
			out = append(out, name+"."+f)
		}
		c := p.cur.Class(name)
		if c == nil {
			return
		}
		for _, f := range c.Fields {
			// Not through a field the read leaves out: one hidden now,
			// whose subdocument class the reader is not to learn of, or
			// one named above.
			if _, hidden := unknown[f.Name]; f.Type.Kind == sluice.TypeSubdocument && f.ReadRole <= p.role && !hidden {
				walk(f.Type.Name)
			}
		}
	}
	for _, c := range classes {
		walk(c)
	}
	slices.Sort(out)
	return out
}

// ParsePosition parses a position given as the parameter named param, as
// a read of the past takes it, with a CodeInvalid error naming param and
// what is wrong with text (as sluice.ParsePosition says it: an index past
// the largest, a bad tag), which a bare "want <epoch>-<seq>-<index>" did
// not say of a position of that shape.
func ParsePosition(param, text string) (sluice.Position, error) {
	p, err := sluice.ParsePosition(text)
	if err != nil {
		why := strings.TrimPrefix(sluice.ErrorMessage(err), "invalid stream position "+sluice.Echo(text)+": ")
		return p, sluice.Errorf(sluice.CodeInvalid, "%s %s is not a position as a read, a write or an event answers it: %s", param, sluice.Echo(text), why)
	}
	return p, nil
}

// checkPast checks that pos (given as param) is a position of d that the
// snapshot ctx carries can read the state at: of this incarnation of d,
// not ahead of its log, within its retained history, of the commit the
// log holds (checkCommit). It returns the history the snapshot sees.
func (e *Engine) checkPast(ctx context.Context, d *sluice.Database, param string, pos sluice.Position) (sluice.History, error) {
	if err := checkEpoch(d, param, pos); err != nil {
		return sluice.History{}, err
	}
	h, c, err := e.store.PositionHistory(ctx, d.ID, pos)
	if err != nil {
		return h, err
	}
	return h, checkRetained(d, param, pos, h, c)
}

// checkEpoch checks that pos (given as param) is a position of this
// incarnation of d.
func checkEpoch(d *sluice.Database, param string, pos sluice.Position) error {
	if pos.Epoch != d.Epoch {
		return sluice.Errorf(sluice.CodeInvalid, "%s", sluice.NotOf(d, param, pos))
	}
	return nil
}

// checkRetained checks that pos (given as param), a position of d, is
// not ahead of its log and within its retained history, as history h
// (the snapshot's) says, and names an event of commit c, the commit it
// names as the snapshot reads it (checkCommit).
func checkRetained(d *sluice.Database, param string, pos sluice.Position, h sluice.History, c postgres.PositionCommit) error {
	if pos.Seq > h.LastSeq {
		return sluice.Errorf(sluice.CodeInvalid, "%s %s is ahead of the log of %s, whose newest commit is %d", param, pos, d.Path(), h.LastSeq)
	}
	if !h.Retains(pos) {
		oldest := sluice.Position{Epoch: d.Epoch, Seq: h.PrunedSeq, Index: sluice.WholeCommit}
		return sluice.Errorf(sluice.CodeHistoryGone, "%s %s is older than the history %s retains (log_retention); the oldest position it can read is %s", param, pos, d.Path(), oldest)
	}
	return checkCommit(d, param, pos, c)
}

// checkCommit checks that pos (given as param), a retained position of d
// not ahead of its log, names an event of commit c, the commit of its
// number the log holds (read in a statement the reader runs anyway:
// postgres.PositionCommit). A tagged position of another commit (its
// own was lost in a Postgres failover or a restore, and c took its
// number) is sluice.CheckTag's CodeGone error, as a resumed stream's. A
// position past the last change of its commit names nothing (no read,
// write or event answers it), and is a CodeInvalid error rather than
// read as the end of the commit: sluice.CheckIndex's, which a resumed
// stream gives too.
func checkCommit(d *sluice.Database, param string, pos sluice.Position, c postgres.PositionCommit) error {
	if pos.Seq == 0 && pos.Index != sluice.WholeCommit {
		end := sluice.Position{Epoch: pos.Epoch, Seq: pos.Seq, Index: sluice.WholeCommit}
		return sluice.Errorf(sluice.CodeInvalid, "%s %s names no event of %s: commit 0 is none (the position before the first commit is %s)", param, pos, d.Path(), end)
	}
	if !c.Found {
		return nil // a commit not found was pruned: the read finds out
	}
	if err := sluice.CheckTag(d, param, pos, c.Stamp); err != nil {
		return err
	}
	return sluice.CheckIndex(d, param, pos, c.Changes)
}

// ReadAsOf makes the reads of snap, the snapshot ctx carries, read database
// d (schema s, current) as of position pos, given as the parameter param,
// for a reader with role. It runs the snapshot's first statement, which
// checks pos (checkPast: a CodeInvalid error for a position of another
// database or epoch or ahead of the log, CodeHistoryGone for one older
// than retained history, CodeGone for one whose tag names a commit the
// log no longer holds, another having taken its number) and counts the
// changes from pos to the head of the log, which every statement of the
// read reads and sorts: more than max_past_changes is a CodeInvalid
// error naming the oldest position a read reaches, before anything
// reads them. It returns what of the state
// then the reader can be shown.
func (e *Engine) ReadAsOf(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, snap *Snapshot, param string, pos sluice.Position) (*Past, error) {
	return e.readAsOf(ctx, d, s, role, snap, param, pos, e.maxPastChanges, false)
}

// ReadAsOfEvent is ReadAsOf for what a subscription's event reads beyond
// its commit's images, as of the commit, under the same bound of
// max_past_changes: each event of a stream resumed from far back (or
// lagging behind) read every change from its commit to the head of the
// log, so the stream's work grew with the square of its backlog. Past
// the bound the error is a *PastRangeError, which the event's place
// takes (the stream goes on: its later events come nearer the head),
// read from at most max_past_changes + 2 commits' rows. The first event
// found past it also finds the oldest commit within it (farEdges): the
// events of the commits before that one are refused without a statement,
// so that a stream resumed N commits too far back counts the log twice,
// not N times.
func (e *Engine) ReadAsOfEvent(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, snap *Snapshot, param string, pos sluice.Position) (*Past, error) {
	return e.readAsOf(ctx, d, s, role, snap, param, pos, e.maxPastChanges, true)
}

// PastRangeError is ReadAsOfEvent's error for a commit from whose end
// the log to its head holds more than Most changes (What: "changes", or
// "commits" for commits written without changes), max_past_changes.
type PastRangeError struct {
	Most int64
	What string
	Head sluice.Position
}

func (e *PastRangeError) Error() string {
	return fmt.Sprintf("the log from its commit to the head %s holds more than %d %s, the most a read of the past reads", e.Head, e.Most, e.What)
}

// readAsOf is ReadAsOf with the bound most (0: none); event says that a
// range past it is a *PastRangeError.
func (e *Engine) readAsOf(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, snap *Snapshot, param string, pos sluice.Position, most int64, event bool) (*Past, error) {
	if most <= 0 {
		if _, err := e.checkPast(ctx, d, param, pos); err != nil {
			return nil, err
		}
	} else if err := e.checkPastRange(ctx, d, param, pos, most, event); err != nil {
		return nil, err
	}
	sc, err := e.scanVersions(ctx, d, s, role, pos.Seq, pos.Seq)
	if err != nil {
		return nil, err
	}
	past, drop := pastSchema(sc, 0, s, role, pos)
	snap.SetAsOf(&postgres.AsOf{Pos: pos, Drop: drop})
	return past, nil
}

// checkPastRange is checkPast for a read as of pos, which reads every
// change from pos to the head of the log: it also checks that they are
// at most most, counted in the statement that reads the history, and
// refuses the read (CodeInvalid) naming the oldest position within the
// bound; for an event's read, with a *PastRangeError.
func (e *Engine) checkPastRange(ctx context.Context, d *sluice.Database, param string, pos sluice.Position, most int64, event bool) error {
	if err := checkEpoch(d, param, pos); err != nil {
		return err
	}
	if event {
		// An event's position is one of a commit the stream read from
		// the log: not ahead of it, and tagged with that commit. One
		// pruned since is past the bound too.
		if pre := e.farEdges.tooFar(d, pos, most); pre != nil {
			return pre
		}
	}
	h, rg, c, err := e.store.PastRange(ctx, d, pos, most)
	if err != nil {
		return err
	}
	head := sluice.Position{Epoch: d.Epoch, Seq: h.LastSeq, Index: sluice.WholeCommit}
	e.farEdges.sawHead(d, head)
	if err := checkRetained(d, param, pos, h, c); err != nil || !rg.Over {
		return err
	}
	what := "changes"
	if rg.ByCommits {
		what = "commits" // written without changes, each still read
	}
	oldest, byCommits, ok, err := e.store.OldestPast(ctx, d, most)
	if err != nil {
		return err
	}
	if ok { // in the snapshot's log, whose head is head
		edge := PastRangeError{Most: most, What: "changes", Head: head}
		if byCommits {
			edge.What = "commits"
		}
		e.farEdges.note(d, most, oldest.Seq, edge)
	}
	if event {
		return &PastRangeError{Most: most, What: what, Head: head}
	}
	if !ok { // never: pos is retained, and its range is over
		oldest = sluice.Position{Epoch: d.Epoch, Seq: h.PrunedSeq, Index: sluice.WholeCommit}
	}
	return sluice.Errorf(sluice.CodeInvalid, "the log of %s from %s %s to its head %s holds more than %d %s, the most a read of the past reads (max_past_changes): read as of a later position; the oldest one a read reaches now is %s",
		d.Path(), param, pos, head, most, what, oldest)
}

// versionScan is what a walk through the schema versions of a database,
// from the one in force at a position to the current one (oldest first),
// found out about the document classes and fields of today's schema:
// what pastSchema and diffPast need, gathered holding two parsed versions
// at a time however many there are (a version's schema can be as large as
// max_schema_bytes, and a database can have any number of them). Indexes
// below are of the versions walked.
type versionScan struct {
	firsts []int64 // the first commit made under each version
	// at is the version in force at a later position (a diff's to; 0
	// without one); then and atThen are versions 0 and at.
	at           int
	then, atThen *sluice.Schema
	// gone holds, by class, the last version in which it was not a
	// document class.
	gone map[string]int
	// broke holds, by field, the last version i (≥ 1) that stored it in
	// another column than version i-1 did (sameColumn), or, for a
	// reference field (of a subdocument class too), that dropped
	// references from its column (leftOut). A field of a subdocument
	// class has no column of its own; its "column" is its values inside
	// the subdocuments, which a change of its type, list-ness or enum
	// drops as a change of a column does (conform.go).
	broke map[fieldKey]int
	// left holds, by document class and a class or interface it fitted
	// under (fits: itself, or one it implemented), the last version i
	// (≥ 1) in which it no longer did, having in version i-1.
	left map[classPair]int
	// hidden holds, by field, the last version that protected it from the
	// reader's role.
	hidden map[fieldKey]int
	// droppedIn holds, by class, the first version i whose schema change
	// dropped it (a document class in version i-1, not in i); brokeIn,
	// by field, the first version i that broke it (as broke), with its
	// class of today's kind (document or subdocument class) in both.
	droppedIn map[string]int
	brokeIn   map[fieldKey]int
	// lastDoc holds, for the document classes of versions 0 and at that
	// today's schema lacks, the last version in which each was one.
	lastDoc map[string]int
	// strays is the last version in which a subdocument class of today's
	// schema, a subdocument class then too, had a field today's lacks (-1:
	// none): the log's images of that version or later may hold values
	// of that field, which a read through today's schema must not show.
	strays int
	// dropped is the first version i whose schema change dropped a
	// document class of version i-1 that today's schema lacks, and
	// droppedName that class (0 and "": none).
	dropped     int
	droppedName string
	// firstBroke, firstGone and firstLeft hold, by field, by class and
	// by class pair, the first version after version 0 and the first
	// after at ([0] and [1]; 0: none) that dropped values the version
	// before held: that broke the field while the version before had
	// it (as broke records), that made the class no document class (a
	// document class in the version before), and that took the class
	// out (as left records). That is the schema change that dropped what
	// a read as of a position of version 0 or at held, which its error
	// names. broke, gone, left and lastDoc keep the last such version,
	// from which what today's schema shows stood: a field or class
	// dropped and made again has two. Each is recorded where the walk
	// looks (a version whose digest changed the class), as a change is.
	firstBroke map[fieldKey][2]int
	firstGone  map[string][2]int
	firstLeft  map[classPair][2]int
}

// noteFirst records version i in m[k] as the first after version 0 and
// the first after at, when it is: versions are walked oldest first.
func noteFirst[K comparable](m map[K][2]int, k K, i, at int) {
	f := m[k]
	if f[0] == 0 && i > 0 {
		f[0] = i
	}
	if f[1] == 0 && i > at {
		f[1] = i
	}
	m[k] = f
}

// breaks records that version i broke field k (see broke), which the
// version before had when had.
func (sc *versionScan) breaks(k fieldKey, i int, had bool) {
	sc.broke[k] = i
	if had {
		noteFirst(sc.firstBroke, k, i, sc.at)
	}
}

// fieldKey names a field of a class.
type fieldKey struct{ class, field string }

// classPair names a document class and a class or interface it fits
// under.
type classPair struct{ class, under string }

// scanVersions walks the schema versions of d, from the one commit seq was
// made under (or the oldest known, when it predates them) to the current
// one, for a reader with role; toSeq, a later commit (a diff's to), picks
// versionScan.at.
func (e *Engine) scanVersions(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, seq, toSeq int64) (*versionScan, error) {
	all, err := e.store.SchemaVersions(ctx, d)
	if err != nil {
		return nil, err
	}
	walk := all[max(postgres.VersionAt(all, seq), 0):]
	for i, v := range walk {
		if v.Version > d.SchemaVersion {
			walk = walk[:i] // newer than the schema this read shows through
			break
		}
	}
	at := max(postgres.VersionAt(walk, toSeq), 0)
	loader := func(ctx context.Context) func(i int) (*sluice.Schema, error) {
		return func(i int) (*sluice.Schema, error) { return e.store.SchemaAt(ctx, d.ID, walk[i].Version) }
	}
	load := loader(ctx)
	if len(walk) == 0 {
		return scan(nil, at, load, nil, cur, role)
	}
	key := walkKey{db: d.ID, from: walk[0].Version, at: walk[at].Version, cur: d.SchemaVersion, role: role}
	found, ok := e.walks.get(key)
	if !ok {
		// The walk is every waiting read's (sharedwalk.go): it runs on
		// wctx, never on this read's ctx.
		v, err := e.shareWalk(ctx, &e.walkRuns, fmt.Sprint(key), func(wctx context.Context) (any, error) {
			if found, ok := e.walks.get(key); ok {
				return found, nil
			}
			firsts := make([]int64, len(walk))
			for i, v := range walk {
				firsts[i] = v.FirstSeq
			}
			digest := func(i int) (*versionDigest, error) {
				return e.versionDigest(wctx, d.ID, walk[i-1].Version, walk[i].Version)
			}
			sc, err := scan(firsts, at, loader(wctx), digest, cur, role)
			if err != nil {
				return nil, err
			}
			found := sc.compact()
			e.walks.add(key, found)
			return found, nil
		})
		if err != nil {
			return nil, err
		}
		found = v.(*versionScan)
	}
	// A walk found cached loads versions 0 and at, as a walk does: at
	// most two parses, when the cache of parsed versions lacks them.
	sc := *found
	if sc.then, err = load(0); err != nil {
		return nil, err
	}
	if sc.atThen, err = load(at); err != nil {
		return nil, err
	}
	return &sc, nil
}

// A walk of many versions costs as much as the digests it applies, and
// when they are larger than the cache of digests (a schema of 900
// classes changed 152 times, each change touching every class: 94 MB of
// digests), every walk computed them again, parsing every version: 2 to
// 7 s for each read of the past, which any reader could repeat. What a
// walk found (a versionScan) is small, of the size of today's schema at
// most, and depends on nothing but the versions walked, the one in
// force at a diff's end, today's schema and the reader's role: it is
// cached by those, so that a read of the past repeated, or another as of
// a position of the same version, walks no version. The first read of a
// walk still walks it; concurrent ones wait for that walk (walkRuns,
// sharedwalk.go), each as long as its own request lasts.

// walkKey keys a walk of the schema versions of a database: the version
// it starts from, the one in force at a diff's end (at; the first for a
// read as of a position), today's (cur, whose schema the walk reads
// through) and the reader's role. Those name the versions walked and
// their first commits too: a database's versions, once stored, never
// change, and each is stored after those before it.
type walkKey struct {
	db            int64
	from, at, cur int
	role          sluice.Role
}

// Cached walks' bounds: in entries, and in the bytes of what they found.
const (
	walkEntries = 1 << 12
	walkBytes   = 16 << 20
)

// newWalkCache returns the cache of walks: what each found, without the
// parsed versions 0 and at (compact).
func newWalkCache() *sizedCache[walkKey, *versionScan] {
	return newSizedCache[walkKey](walkEntries, walkBytes, (*versionScan).size)
}

// compact returns a copy of sc to cache: without the parsed versions 0
// and at (the cache of parsed versions bounds those, SchemaAt), and with
// names in strings of their own, as a digest's (compactClass): today's
// schema's names share the memory of its text, as large as
// max_schema_bytes, which a cached walk must not keep.
func (sc *versionScan) compact() *versionScan {
	names := func(m map[string]int) map[string]int {
		out := make(map[string]int, len(m))
		for k, v := range m {
			out[strings.Clone(k)] = v
		}
		return out
	}
	fields := func(m map[fieldKey]int) map[fieldKey]int {
		out := make(map[fieldKey]int, len(m))
		for k, v := range m {
			out[fieldKey{strings.Clone(k.class), strings.Clone(k.field)}] = v
		}
		return out
	}
	pairs := func(m map[classPair]int) map[classPair]int {
		out := make(map[classPair]int, len(m))
		for k, v := range m {
			out[classPair{strings.Clone(k.class), strings.Clone(k.under)}] = v
		}
		return out
	}
	out := &versionScan{firsts: sc.firsts, at: sc.at, gone: names(sc.gone), broke: fields(sc.broke), left: pairs(sc.left), hidden: fields(sc.hidden),
		droppedIn: names(sc.droppedIn), brokeIn: fields(sc.brokeIn), lastDoc: names(sc.lastDoc), strays: sc.strays,
		dropped: sc.dropped, droppedName: strings.Clone(sc.droppedName),
		firstBroke: make(map[fieldKey][2]int, len(sc.firstBroke)), firstGone: make(map[string][2]int, len(sc.firstGone)),
		firstLeft: make(map[classPair][2]int, len(sc.firstLeft))}
	for k, v := range sc.firstBroke {
		out.firstBroke[fieldKey{strings.Clone(k.class), strings.Clone(k.field)}] = v
	}
	for k, v := range sc.firstGone {
		out.firstGone[strings.Clone(k)] = v
	}
	for k, v := range sc.firstLeft {
		out.firstLeft[classPair{strings.Clone(k.class), strings.Clone(k.under)}] = v
	}
	return out
}

// size is about the bytes sc holds, for the cache's bound.
func (sc *versionScan) size() int {
	n := 256 + 8*len(sc.firsts) + len(sc.droppedName)
	for name := range sc.gone {
		n += 48 + len(name)
	}
	for name := range sc.droppedIn {
		n += 48 + len(name)
	}
	for name := range sc.lastDoc {
		n += 48 + len(name)
	}
	for name := range sc.firstGone {
		n += 56 + len(name)
	}
	for _, m := range []map[fieldKey]int{sc.broke, sc.hidden, sc.brokeIn} {
		for k := range m {
			n += 64 + len(k.class) + len(k.field)
		}
	}
	for k := range sc.firstBroke {
		n += 72 + len(k.class) + len(k.field)
	}
	for k := range sc.left {
		n += 64 + len(k.class) + len(k.under)
	}
	for k := range sc.firstLeft {
		n += 72 + len(k.class) + len(k.under)
	}
	return n
}

// versionDigest returns the digest of schema version v of database dbID,
// what it changed from prev, the version known before it, from the cache
// when it holds it.
func (e *Engine) versionDigest(ctx context.Context, dbID int64, prev, v int) (*versionDigest, error) {
	key := schemacache.Key{DB: dbID, Version: v}
	if dg, ok := e.digests.get(key); ok {
		return dg, nil
	}
	// Two versions parsed at a time (see versionScan).
	ps, err := e.store.SchemaAt(ctx, dbID, prev)
	if err != nil {
		return nil, err
	}
	s, err := e.store.SchemaAt(ctx, dbID, v)
	if err != nil {
		return nil, err
	}
	dg := digestOf(ps, s)
	e.digests.add(key, dg)
	return dg, nil
}

// scan walks the versions whose first commits are firsts, oldest first,
// and records what versionScan holds about the document classes and
// fields of cur, for a reader with role. It loads versions 0 and at with
// load, and learns the others from their digests (digest, for versions 1
// on): the walk holds a view of one version, applying each digest to it.
func scan(firsts []int64, at int, load func(i int) (*sluice.Schema, error), digest func(i int) (*versionDigest, error), cur *sluice.Schema, role sluice.Role) (*versionScan, error) {
	sc := &versionScan{firsts: firsts, at: at, gone: map[string]int{}, broke: map[fieldKey]int{}, left: map[classPair]int{}, hidden: map[fieldKey]int{},
		droppedIn: map[string]int{}, brokeIn: map[fieldKey]int{}, lastDoc: map[string]int{}, strays: -1,
		firstBroke: map[fieldKey][2]int{}, firstGone: map[string][2]int{}, firstLeft: map[classPair][2]int{}}
	if len(firsts) == 0 {
		return sc, nil
	}
	isDoc := func(c *sluice.Class) bool { return c != nil && c.Kind == sluice.KindDocument }
	isSub := func(c *sluice.Class) bool { return c != nil && c.Kind == sluice.KindSubdocument }
	first, err := load(0)
	if err != nil {
		return nil, err
	}
	sc.then = first
	s := viewOf(first)
	// What holds of a class or field of today's schema lasts until a
	// digest changes its class (or the enum of its field): gone, hidden
	// and broke record the last version something held, so while it holds
	// (open) the versions go by without a look at it, and when it stops
	// holding, or at the end, the last version it held is recorded.
	// A field missing from a version breaks its column in that version
	// and the next (sameColumn): absent holds those missing now.
	goneOpen, hiddenOpen, absent := map[string]bool{}, map[fieldKey]bool{}, map[fieldKey]bool{}
	// strayOpen holds the subdocument classes with fields today's lacks
	// (see versionScan.strays) in the version walked.
	strayOpen := map[string]bool{}
	last := len(firsts) - 1
	// protect records whether version i protects field k of today's
	// schema from the reader's role (of: the field in version i, nil when
	// it has none).
	protect := func(i int, k fieldKey, of *sluice.Field) {
		switch {
		case of != nil && of.ReadRole > role:
			sc.hidden[k], hiddenOpen[k] = i, true
		case hiddenOpen[k]:
			sc.hidden[k] = i - 1
			delete(hiddenOpen, k)
		}
	}
	// lookSub records what version i (the view s; prev, the one before,
	// nil for version 0) holds of subdocument class name of today's
	// schema, and, with fields, of its fields (all of them, or those
	// whose enum changed), as look does for a document class: its
	// subdocuments live in the columns of the document fields holding
	// them, which keep their type when a change drops or retypes a field
	// of the class, but the change drops that field's values from every
	// stored subdocument (conform.go), with no change in the log.
	lookSub := func(i int, prev *before, name string, fields []*sluice.Field) {
		sclass := s.Class(name)
		stray := false
		if isSub(sclass) {
			cc := cur.Class(name)
			for _, f := range sclass.Fields {
				if cc.Field(f.Name) == nil {
					stray = true
					break
				}
			}
		}
		switch {
		case stray:
			sc.strays, strayOpen[name] = i, true
		case strayOpen[name]:
			sc.strays = max(sc.strays, i-1)
			delete(strayOpen, name)
		}
		for _, f := range fields {
			k := fieldKey{name, f.Name}
			var of *sluice.Field
			if sclass != nil {
				of = sclass.Field(f.Name)
			}
			protect(i, k, of)
			if of == nil {
				absent[k] = true
			} else {
				delete(absent, k)
			}
			if prev == nil || sameColumn(prev, s, name, f.Name) {
				continue
			}
			sc.breaks(k, i, fieldOf(prev, name, f.Name) != nil)
			if pc := prev.Class(name); isSub(pc) && isSub(sclass) && pc.Field(f.Name) != nil {
				if _, ok := sc.brokeIn[k]; !ok {
					sc.brokeIn[k] = i
				}
			}
		}
	}
	// look records what version i (the view s; prev, the one before, nil
	// for version 0) holds of class name of today's schema, and, with
	// fields, of its fields (all of them, or those whose enum changed).
	look := func(i int, prev *before, name string, fields []*sluice.Field) {
		sclass := s.Class(name)
		doc := isDoc(sclass)
		switch {
		case !doc:
			sc.gone[name], goneOpen[name] = i, true
		case goneOpen[name]:
			sc.gone[name] = i - 1
			delete(goneOpen, name)
		}
		var pc *sluice.Class
		if prev != nil {
			pc = prev.Class(name)
			if isDoc(pc) && !doc {
				if _, ok := sc.droppedIn[name]; !ok {
					sc.droppedIn[name] = i
				}
				noteFirst(sc.firstGone, name, i, at)
			}
		}
		for _, f := range fields {
			k := fieldKey{name, f.Name}
			var of *sluice.Field
			if sclass != nil {
				of = sclass.Field(f.Name)
			}
			protect(i, k, of)
			if of == nil {
				absent[k] = true
			} else {
				delete(absent, k)
			}
			if prev == nil || sameColumn(prev, s, name, f.Name) {
				continue
			}
			sc.breaks(k, i, fieldOf(prev, name, f.Name) != nil)
			if _, ok := sc.brokeIn[k]; !ok && isDoc(pc) && doc && pc.Field(f.Name) != nil {
				sc.brokeIn[k] = i
			}
		}
	}
	for i := range firsts {
		var prev *before // version i-1, and what version i changed
		var d *versionDigest
		if i > 0 {
			if d, err = digest(i); err != nil {
				return nil, err
			}
			prev = s.apply(d)
		}
		// The classes today's schema lacks: only those of versions 0 and
		// at are followed (what a read as of their positions covers),
		// and the first dropped, whatever its version (what a diff's
		// log covers).
		if i == 0 || i == at {
			full := first
			if i > 0 {
				if full, err = load(i); err != nil {
					return nil, err
				}
			}
			if i == at {
				sc.atThen = full
			}
			for _, name := range full.Order {
				if isDoc(full.Class(name)) && !isDoc(cur.Class(name)) {
					sc.lastDoc[name] = i
				}
			}
		}
		for name, l := range sc.lastDoc {
			switch {
			case isDoc(s.Class(name)):
				sc.lastDoc[name] = i
			case i > 0 && l == i-1:
				noteFirst(sc.firstGone, name, i, at) // dropped now
			}
		}
		if i == 0 {
			for _, name := range cur.Order {
				switch c := cur.Classes[name]; c.Kind {
				case sluice.KindDocument:
					look(0, nil, name, c.Fields)
				case sluice.KindSubdocument:
					lookSub(0, nil, name, c.Fields)
				}
			}
			continue
		}
		// Only a class the digest changed can have stopped being a
		// document class; they come in the previous version's order.
		if sc.dropped == 0 {
			for _, nc := range d.classes {
				if isDoc(prev.Class(nc.name)) && !isDoc(nc.class) && !isDoc(cur.Class(nc.name)) {
					sc.dropped, sc.droppedName = i, nc.name
					break
				}
			}
		}
		for _, nc := range d.classes {
			c := cur.Class(nc.name)
			switch {
			case isDoc(c):
				look(i, prev, nc.name, c.Fields)
			case isSub(c):
				lookSub(i, prev, nc.name, c.Fields)
			}
		}
		// A change that took document classes out of classes or
		// interfaces dropped the references to their documents from the
		// fields typed as those (conform.go), wherever references live:
		// in document fields, lists, and subdocuments at any depth, whose
		// fields are those of their subdocument class. Their columns stay,
		// and the log holds no change for what was dropped, so what those
		// fields held before cannot be shown.
		if lost := sc.leftOut(i, prev, s, d); len(lost) > 0 {
			for _, name := range cur.Order {
				c := cur.Classes[name]
				if c.Kind != sluice.KindDocument && c.Kind != sluice.KindSubdocument {
					continue
				}
				for _, f := range c.Fields {
					of := fieldOf(s, name, f.Name)
					// A field whose column changed broke already (look).
					if of == nil || of.Type.Kind != sluice.TypeReference || !lost[of.Type.Name] || !sameColumn(prev, s, name, f.Name) {
						continue
					}
					k := fieldKey{name, f.Name}
					sc.breaks(k, i, true)
					if _, ok := sc.brokeIn[k]; !ok && prev.Class(name).Kind == c.Kind && s.Class(name).Kind == c.Kind {
						sc.brokeIn[k] = i
					}
				}
			}
		}
		if len(d.enums) > 0 {
			// The fields of the other classes whose enum changed.
			for _, name := range cur.Order {
				c := cur.Classes[name]
				if c.Kind != sluice.KindDocument && c.Kind != sluice.KindSubdocument || prev.changed(name, "") {
					continue
				}
				var fields []*sluice.Field
				for _, f := range c.Fields {
					if of := fieldOf(s, name, f.Name); of != nil && of.Type.Kind == sluice.TypeEnum && prev.changed("", of.Type.Name) {
						fields = append(fields, f)
					}
				}
				switch {
				case len(fields) == 0:
				case c.Kind == sluice.KindDocument:
					look(i, prev, name, fields)
				default:
					lookSub(i, prev, name, fields)
				}
			}
		}
	}
	for name := range goneOpen {
		sc.gone[name] = last
	}
	for k := range hiddenOpen {
		sc.hidden[k] = last
	}
	if len(strayOpen) > 0 {
		sc.strays = last
	}
	// A field missing until the end broke its column in every version
	// from the one that dropped it (when it comes back, the version that
	// adds it records that).
	for k := range absent {
		if last > 0 {
			sc.breaks(k, last, false)
		}
	}
	return sc, nil
}

// leftOut returns the classes and interfaces that version i (the view s;
// prev, the version before, and d, what it changed) took a document
// class out of (unfitted), and records each such pair in sc.left.
func (sc *versionScan) leftOut(i int, prev *before, s *view, d *versionDigest) map[string]bool {
	lost := map[string]bool{}
	for _, p := range unfitted(prev, s, d) {
		lost[p.under] = true
		sc.left[p] = i
		noteFirst(sc.firstLeft, p, i, sc.at)
	}
	return lost
}

// unfitted returns the pairs of a document class of prev and a class or
// interface it fitted under (fits) in prev and no longer does in s (the
// version digest d made of prev): dropped, made another kind, or no
// longer implementing it. Only a change of a class's kind or parents, or
// a class dropped, can take one out: for any other version it returns nil
// without a look at the classes.
func unfitted(prev *before, s *view, d *versionDigest) []classPair {
	changed := false
	for _, nc := range d.classes {
		if pc := prev.Class(nc.name); pc != nil && (nc.class == nil || nc.class.Kind != pc.Kind || !slices.Equal(nc.class.Parents, pc.Parents)) {
			changed = true
			break
		}
	}
	if !changed {
		return nil
	}
	var out []classPair
	check := func(name string) {
		if c := prev.Class(name); c == nil || c.Kind != sluice.KindDocument {
			return
		}
		for _, under := range ancestors(prev, name) {
			if !fitsIn(s, name, under) {
				out = append(out, classPair{name, under})
			}
		}
	}
	// The classes of prev: those of s it had, and those d dropped.
	for name := range s.classes {
		check(name)
	}
	for name, c := range prev.classes {
		if c != nil && s.classes[name] == nil {
			check(name)
		}
	}
	return out
}

// pastSchema compares the schema versions of sc from start (0, or sc.at:
// the one in force at pos) to today's with today's schema cur, and
// returns what of the state at pos a reader with role cannot be shown,
// and the fields each class's images must lose (see postgres.AsOf.Drop).
func pastSchema(sc *versionScan, start int, cur *sluice.Schema, role sluice.Role, pos sluice.Position) (*Past, map[string][]string) {
	past := &Past{Position: pos, Unknown: map[string]map[string]string{}, Lost: map[string]string{}, cur: cur, role: role}
	drop := map[string][]string{}
	if len(sc.firsts) == 0 {
		// No known versions: today's schema alone.
		return past, drop
	}
	then := sc.then
	if start > 0 {
		then = sc.atThen
	}
	past.then = then
	// The images of the changes after pos are of the versions from start
	// on.
	past.strays = sc.strays >= start
	if pos.Seq == 0 {
		// Before the first commit nothing existed: nothing of it is
		// lost. (A diff from there still reads the log's images, with
		// then for CheckClass and strays for dropUnknown; diffPast names
		// what those images lose.)
		return past, drop
	}
	// since returns the first commit of version i, from which the
	// schema change that made it is in effect: the change's own commit,
	// or, for a change made before Sluice recorded schema changes as
	// commits, the first commit after it, so an error says "in effect
	// from", true of both (a guard keeps it in range).
	since := func(i int) int64 { return sc.firsts[min(i, len(sc.firsts)-1)] }
	// first returns the version an error names of those f records (the
	// first after version 0, and after at; see versionScan.firstBroke):
	// the first after start, the change that dropped what pos held, not
	// a later one that made it again; fallback when none is recorded.
	first := func(f [2]int, fallback int) int {
		w := 0
		if start > 0 {
			w = 1
		}
		if f[w] > 0 {
			return f[w]
		}
		return fallback
	}
	unknown := func(class, field, why string) {
		if past.Unknown[class] == nil {
			past.Unknown[class] = map[string]string{}
		}
		past.Unknown[class][field] = why
	}
	// protected makes field f of class unknown when a version since pos
	// protected it from the reader's role, though today's schema lets
	// the role read it. (A field protected now is hidden from any read,
	// its name too; an admin reads every field.)
	protected := func(class string, f *sluice.Field) {
		if hiddenFrom(role, cur, f) || role >= sluice.RoleAdmin {
			return
		}
		if h, ok := sc.hidden[fieldKey{class, f.Name}]; ok && h >= start {
			unknown(class, f.Name, fmt.Sprintf("%s.%s as of %s cannot be shown: it was protected from your role at that position or since", class, f.Name, pos))
		}
	}
	// broken makes field f of class unknown when a schema change since
	// pos dropped its values (b, the last version that did; 0: none),
	// and it had values then.
	broken := func(class string, f *sluice.Field, b int) {
		if b > 0 && !hiddenFrom(role, cur, f) && fieldOf(then, class, f.Name) != nil {
			b = first(sc.firstBroke[fieldKey{class, f.Name}], b)
			unknown(class, f.Name, fmt.Sprintf("%s.%s as of %s cannot be shown: a schema change after that position (in effect from commit %d) dropped its values", class, f.Name, pos, since(b)))
		}
	}
	for _, name := range cur.Order {
		c := cur.Classes[name]
		if c.Kind == sluice.KindSubdocument {
			for _, f := range c.Fields {
				// Its values are in the column of the document field
				// holding it, which has no drop: dropUnknown leaves the
				// field out of every subdocument of the class.
				if b := sc.broke[fieldKey{name, f.Name}]; b > start {
					broken(name, f, b)
				}
				protected(name, f)
			}
			continue
		}
		if c.Kind != sluice.KindDocument {
			continue
		}
		// The class's table stood unbroken up to today only from the
		// version after the last that lacked it.
		if g, ok := sc.gone[name]; ok && g >= start {
			if oc := then.Class(name); oc != nil && oc.Kind == sluice.KindDocument {
				past.Lost[name] = fmt.Sprintf("the documents of %s as of %s cannot be shown: a schema change after that position (in effect from commit %d) dropped the class and them with it", name, pos, since(first(sc.firstGone[name], g+1)))
			}
			continue // it had no documents then
		}
		for _, f := range c.Fields {
			k := fieldKey{name, f.Name}
			made := 0 // the first version from which the column stood unbroken
			if b := sc.broke[k]; b > start {
				made = b
			}
			if made > 0 {
				drop[name] = append(drop[name], f.Name)
			}
			if hiddenFrom(role, cur, f) {
				continue // hidden now, as from any read (its name too)
			}
			broken(name, f, made)
			protected(name, f)
		}
	}
	// The document classes then that today's schema lacks: a schema
	// change since dropped them, and their documents with them.
	for _, name := range then.Order {
		if c := then.Class(name); c.Kind != sluice.KindDocument {
			continue
		}
		if c := cur.Class(name); c != nil && c.Kind == sluice.KindDocument {
			continue
		}
		past.Lost[name] = fmt.Sprintf("the documents of %s as of %s cannot be shown: a schema change after that position (in effect from commit %d) dropped the class and them with it", name, pos, since(first(sc.firstGone[name], sc.lastDoc[name]+1)))
		past.dropped = append(past.dropped, name)
	}
	// The document classes then and today that implemented a class or
	// interface then and no longer do: a read of it through today's
	// schema would leave their documents then out.
	for _, name := range then.Order {
		if c := then.Class(name); c.Kind != sluice.KindDocument {
			continue
		}
		if c := cur.Class(name); c == nil || c.Kind != sluice.KindDocument {
			continue // lost (above)
		}
		for _, under := range ancestors(then, name) {
			if _, ok := past.left[under]; ok || cur.Class(under) == nil || cur.IsA(name, under) {
				continue
			}
			if past.left == nil {
				past.left = map[string]string{}
			}
			pair := classPair{name, under}
			past.left[under] = fmt.Sprintf("the documents of %s as of %s cannot be shown: they included those of %s, which a schema change after that position (in effect from commit %d) made stop implementing it", under, pos, name, since(first(sc.firstLeft[pair], sc.left[pair])))
		}
	}
	return past, drop
}

// diffPast returns what of the states at from and to (not before from) a
// diff cannot show a reader with role, given sc, the scan of the versions
// since from with sc.at the one in force at to. A diff is the state as of
// from against the state as of to, so it cannot show what either read
// cannot (pastSchema: as of from, which loses at least what as of to
// does, and as of to). And as it reads the change between them from the
// log, it cannot show a class or a field whose values a schema change
// dropped between them, even one made after from: the log holds no
// change for what the schema change dropped, so the log would show a
// document added since from as still there, or a field as still holding
// its value, when both are gone.
func diffPast(sc *versionScan, cur *sluice.Schema, role sluice.Role, from, to sluice.Position) *Past {
	past, _ := pastSchema(sc, 0, cur, role, from)
	later, _ := pastSchema(sc, sc.at, cur, role, to)
	for name, why := range later.Lost {
		if _, ok := past.Lost[name]; !ok {
			past.Lost[name] = why
			if slices.Contains(later.dropped, name) {
				past.dropped = append(past.dropped, name)
			}
		}
	}
	for name, why := range later.left {
		if _, ok := past.left[name]; !ok {
			if past.left == nil {
				past.left = map[string]string{}
			}
			past.left[name] = why
		}
	}
	unknown := func(class, field, why string) {
		if _, ok := past.Unknown[class][field]; ok {
			return
		}
		if past.Unknown[class] == nil {
			past.Unknown[class] = map[string]string{}
		}
		past.Unknown[class][field] = why
	}
	for class, fields := range later.Unknown {
		for f, why := range fields {
			unknown(class, f, why)
		}
	}
	// A field protected from the reader's role in any version since from
	// is left out of the images of the commits made before that version
	// ended (RedactCommit: through the commit's schema, less what a schema
	// version since it protected), so the diff names it: pastSchema names
	// such a field of a class that held documents at from, but not one
	// of a class made after from, nor any before the first commit (a
	// state of no documents), whose images still lose it.
	if role < sluice.RoleAdmin {
		for _, name := range cur.Order {
			c := cur.Classes[name]
			if c.Kind != sluice.KindDocument && c.Kind != sluice.KindSubdocument {
				continue
			}
			for _, f := range c.Fields {
				if _, ok := sc.hidden[fieldKey{name, f.Name}]; ok && !hiddenFrom(role, cur, f) {
					unknown(name, f.Name, fmt.Sprintf("%s.%s as of %s cannot be shown: it was protected from your role at that position or since", name, f.Name, from))
				}
			}
		}
	}
	// A schema change between them: after a version in force up to to.
	between := func(i int) bool { return sc.firsts[i-1] <= to.Seq }
	if name := sc.droppedName; name != "" && between(sc.dropped) {
		if _, ok := past.Lost[name]; !ok {
			past.Lost[name] = fmt.Sprintf("the documents of %s between %s and %s cannot be shown: a schema change between them (in effect from commit %d) dropped the class and them with it", name, from, to, sc.firsts[sc.dropped])
			past.dropped = append(past.dropped, name)
		}
	}
	for _, name := range cur.Order {
		c := cur.Classes[name]
		if c.Kind == sluice.KindSubdocument {
			for _, f := range c.Fields {
				if i, ok := sc.brokeIn[fieldKey{name, f.Name}]; ok && !hiddenFrom(role, cur, f) && between(i) {
					unknown(name, f.Name, fmt.Sprintf("%s.%s between %s and %s cannot be shown: a schema change between them (in effect from commit %d) dropped its values", name, f.Name, from, to, sc.firsts[i]))
				}
			}
			continue
		}
		if c.Kind != sluice.KindDocument {
			continue
		}
		if i, ok := sc.droppedIn[name]; ok && between(i) {
			if _, ok := past.Lost[name]; !ok {
				past.Lost[name] = fmt.Sprintf("the documents of %s between %s and %s cannot be shown: a schema change between them (in effect from commit %d) dropped the class and them with it", name, from, to, sc.firsts[i])
			}
		}
		for _, f := range c.Fields {
			if i, ok := sc.brokeIn[fieldKey{name, f.Name}]; ok && !hiddenFrom(role, cur, f) && between(i) {
				unknown(name, f.Name, fmt.Sprintf("%s.%s between %s and %s cannot be shown: a schema change between them (in effect from commit %d) dropped its values", name, f.Name, from, to, sc.firsts[i]))
			}
		}
	}
	return past
}

// sameColumn reports whether field of class is stored in the same column
// in schema b as in a, its previous version, with the values a allowed
// still valid: a schema change keeps a column when the field keeps its
// type and list-ness, or is a reference widened to a type its references
// all fit (postgres syncTables), and an enum field's values stay valid
// while the enum drops none.
func sameColumn(a *before, b *view, class, field string) bool {
	af, bf := fieldOf(a, class, field), fieldOf(b, class, field)
	if af == nil || bf == nil {
		return false
	}
	if af.Type != bf.Type || af.List != bf.List {
		return widened(a, b, af, bf)
	}
	if af.Type.Kind == sluice.TypeEnum {
		ae, be := a.Enum(af.Type.Name), b.Enum(bf.Type.Name)
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

// widened reports whether field af of prev, changed to bf in s, is a
// reference that the change widened (schema.Widens, for a walk's views):
// every document class its references could point to in prev, one of
// bf's type may point to in s. Its stored references stay.
func widened(prev *before, s *view, af, bf *sluice.Field) bool {
	if af.List != bf.List || af.Type.Kind != sluice.TypeReference || bf.Type.Kind != sluice.TypeReference {
		return false
	}
	for name := range classesOf(prev, s) {
		if fitsIn(prev, name, af.Type.Name) && !fitsIn(s, name, bf.Type.Name) {
			return false
		}
	}
	return true
}

// fieldOf returns field of class in s, nil when either is missing.
func fieldOf(s schemaView, class, field string) *sluice.Field {
	if c := s.Class(class); c != nil {
		return c.Field(field)
	}
	return nil
}

// dropUnknown returns doc (a document's API-form JSON) without the fields
// whose values as of past's position cannot be shown: of its class, and
// of its subdocuments at any depth, and the fields of its subdocuments
// that today's schema lacks. A document without any is returned
// unchanged.
func dropUnknown(s *sluice.Schema, past *Past, doc []byte) ([]byte, error) {
	if doc == nil || len(past.Unknown) == 0 && !past.strays {
		return doc, nil
	}
	m, err := schema.DecodeImage(doc)
	if err != nil {
		return nil, fmt.Errorf("past document: %w", err)
	}
	typ, _ := m["@type"].(string)
	c := s.Class(typ)
	if c == nil || !dropUnknownIn(s, past, c, m) {
		return doc, nil
	}
	id, _ := m["@id"].(string)
	version, _ := m["@version"].(string)
	fields := make(map[string]any, len(m))
	for k, v := range m {
		if k != "@id" && k != "@type" && k != "@version" {
			fields[k] = v
		}
	}
	return postgres.DocumentJSON(c, &sluice.Document{ID: id, Type: typ, Version: version, Fields: fields})
}

// dropUnknownIn deletes from m (an object of class c of s: a document, or
// a subdocument at any depth) the fields whose values as of past's
// position cannot be shown, and those c lacks, and reports whether it
// deleted any.
func dropUnknownIn(s *sluice.Schema, past *Past, c *sluice.Class, m map[string]any) bool {
	changed := false
	if past.strays {
		for k := range m {
			// "@type" and a document's "@id" and "@version" are no fields.
			if !strings.HasPrefix(k, "@") && c.Field(k) == nil {
				delete(m, k)
				changed = true
			}
		}
	}
	unknown := past.Unknown[c.Name]
	for _, f := range c.Fields {
		v, ok := m[f.Name]
		if !ok {
			continue
		}
		if _, hidden := unknown[f.Name]; hidden {
			delete(m, f.Name)
			changed = true
			continue
		}
		// A subdocument is of its field's class (subdocument classes
		// implement no interfaces), whose fields Unknown names.
		sc := s.Class(f.Type.Name)
		for _, sub := range subdocuments(f, v) {
			if sc != nil && dropUnknownIn(s, past, sc, sub) {
				changed = true
			}
		}
	}
	return changed
}
