package sluice

import (
	"encoding/json"
	"strconv"
	"time"
)

// Op is what a change did to a document.
type Op int

// The change operations.
const (
	OpAdded Op = iota + 1
	OpUpdated
	OpDeleted
)

// String returns "added", "updated" or "deleted", the words used in
// subscription field names and in _CommitMetadata._change_type.
func (o Op) String() string {
	switch o {
	case OpAdded:
		return "added"
	case OpUpdated:
		return "updated"
	case OpDeleted:
		return "deleted"
	}
	return "unknown"
}

// ParseOp returns the Op named s ("added", "updated", "deleted").
func ParseOp(s string) (Op, bool) {
	switch s {
	case "added":
		return OpAdded, true
	case "updated":
		return OpUpdated, true
	case "deleted":
		return OpDeleted, true
	}
	return 0, false
}

// Change is one document changed by a commit. Before is absent for an added
// document and After for a deleted one; both are the document's JSON in its
// API form ("@id", "@type", fields).
type Change struct {
	// Index is the change's place within its commit, from 0, in the order of
	// the request that made it.
	Index  int
	Class  string
	DocID  string
	Op     Op
	Before json.RawMessage
	After  json.RawMessage
	// BeforeUnknown and AfterUnknown name the fields of Before and After
	// (root fields, in the class's order) whose stored values Sluice could
	// not read: a Float NaN or infinity, a DateTime outside years 1 to
	// 9999, a list holding null, in a row written in SQL past Sluice's
	// checks. The image leaves such a value out, where it looks missing
	// (null), though the row held a value a read filters and sorts by:
	// whatever judges a change from its images (live queries, event
	// filters) takes such a field as unknown. Never sent to a client.
	// nil when there are none, as almost always.
	BeforeUnknown, AfterUnknown []string
	// Superseded is set when a later change of the same commit changes
	// the same document (two UPDATEs of one SQL transaction, two fields
	// of one GraphQL mutation, a delete and then an insert of the same
	// id): the commit's version is the document's after its last change
	// only, so this change has none (Commit.VersionOf). The storage
	// sets it on every commit read from the log, a piece of a large
	// commit (Commit.Partial) included: the changes after the piece
	// count too.
	Superseded bool
}

// HasUnknown reports whether either image of ch leaves out a value Sluice
// could not read (BeforeUnknown, AfterUnknown).
func (ch *Change) HasUnknown() bool { return len(ch.BeforeUnknown) > 0 || len(ch.AfterUnknown) > 0 }

// Commit is one committed transaction on one database.
type Commit struct {
	DatabaseID int64
	Epoch      string
	// Seq is the database's gapless commit sequence, equal to commit order.
	Seq int64
	// UID is the commit's uid, unique across databases and never reused:
	// the version of every document the commit wrote (VersionOf). 0 on a
	// commit read from a summary listing (the log).
	UID     int64
	Author  string
	Message string
	// User is the name of the user who made the commit.
	User string
	// Time is when the commit was made, by Postgres' clock.
	Time time.Time
	// ReadAt is when the read of the log that returned the commit ran,
	// by Postgres' clock too (zero when not read from the log): ReadAt
	// less Time is how old the commit was when read, whatever the clock
	// of the process reading it says.
	ReadAt time.Time
	// ReadLocal is when that read began by the clock of the process
	// that read the commit, with its monotonic reading: set by the change
	// feed (its tailer, a stream's catch-up), zero otherwise. See
	// MadeLocal.
	ReadLocal time.Time
	// Changes are in request order. A commit read from a summary listing
	// (the log) may leave them out; NumChanges always counts them. A large
	// commit is read and delivered in pieces: several Commits of one Seq,
	// each holding a run of consecutive changes (Change.Index says where
	// they sit), all but the last with Partial set.
	Changes    []Change
	NumChanges int
	// Partial is set on a piece of a commit that more changes follow.
	Partial bool
	// AccessVersion is the access log version visible in the snapshot the
	// commit was read in (see AccessChange): every access change up to it
	// reaches open streams before the commit does. 0 when not read from
	// the log.
	AccessVersion int64
	// SchemaVersion is the version of its database's schema the commit
	// was made under, and NewSchema is set on the first commit of a
	// version: the commit of the schema change that made it (it changes
	// no document), or, for schema changes made before Sluice recorded
	// them as commits, the first commit after it. Both are read with the
	// log (Store.ReadLog); SchemaVersion is 0 when not known (a commit
	// made before Sluice kept schema versions, or not read from the log).
	SchemaVersion int
	NewSchema     bool
	// RowImages is set, inside the storage package only, on a commit read
	// from the log whose images are table rows (a write made in SQL) not
	// yet turned into documents; no commit handed on has it.
	RowImages bool
}

// MadeLocal returns when c was made by the clock of the process that read
// it (ReadLocal's): ReadLocal less c's age at the read by Postgres' clock
// (ReadAt less Time). The time from it to now by that clock (its
// monotonic reading) is c's age measured on one clock at a time, never
// the process's against Postgres': a process whose clock is off from
// Postgres' still tells the age right, as an overestimate by at most the
// read's round trip (the two parts overlap by the start of the read). It
// is zero when c was not read with both times.
func (c *Commit) MadeLocal() time.Time {
	if c.ReadAt.IsZero() || c.ReadLocal.IsZero() {
		return time.Time{}
	}
	// A Postgres clock stepped back between the commit and the read
	// (NTP) makes no commit younger than its read.
	return c.ReadLocal.Add(-max(c.ReadAt.Sub(c.Time), 0))
}

// Stamp returns c's stamp (of any piece of it: they share it).
func (c *Commit) Stamp() Stamp { return Stamp{UID: c.UID, Time: c.Time} }

// ID returns the commit id shown to clients: its sequence number in decimal.
func (c *Commit) ID() string { return strconv.FormatInt(c.Seq, 10) }

// Version returns the version the commit gave every document it wrote
// (for a deleted one, the version of its deletion): each document's
// version after its last change in the commit (see VersionOf).
func (c *Commit) Version() string { return VersionOf(c.UID) }

// VersionOf returns the version change ch of the commit gave its
// document: the commit's, or "" (none) when ch is Superseded. The state
// a superseded change leaves is never the document's as a read answers
// it, and an If-Match of the commit's version made from it would hold
// over the later change, which its writer never saw.
func (c *Commit) VersionOf(ch *Change) string {
	if ch.Superseded {
		return ""
	}
	return c.Version()
}

// End returns the position of the end of the commit: what a read made
// right after it reflects, so that a stream resumed from it receives
// exactly the commits after it.
func (c *Commit) End() Position { return c.Position(WholeCommit) }

// Position returns the stream position of change i of the commit, tagged
// with the commit's stamp when it is known (read with the commit).
func (c *Commit) Position(i int) Position {
	p := Position{Epoch: c.Epoch, Seq: c.Seq, Index: i}
	if c.UID != 0 && !c.Time.IsZero() {
		p.Tag = c.Stamp().Tag()
	}
	return p
}

// History is the retained part of a database's commit log.
type History struct {
	// LastSeq is the newest commit's sequence number (0: none yet).
	LastSeq int64
	// PrunedSeq is the newest pruned sequence number: commits after it are
	// all retained.
	PrunedSeq int64
}

// Retains reports whether everything after p is still in the log, so that
// a client holding p may resume from it. The end of the newest pruned
// commit (or of no commit, Seq 0) qualifies; a position inside it does
// not: the rest of that commit is gone.
func (h History) Retains(p Position) bool {
	if p.Seq == h.PrunedSeq {
		return p.Index == WholeCommit || p.Seq == 0
	}
	return p.Seq > h.PrunedSeq
}

// NotOf returns why position p, given as what (a parameter's name, or
// "position"), is not one of database d, whose epoch p's is not: it is
// another database's, or an earlier database's of d's name. A position
// carries only its database's epoch, and a deleted database's epoch is
// not kept, so the two cannot be told apart; every reader that checks a
// position's epoch words it so.
func NotOf(d *Database, what string, p Position) string {
	return what + " " + p.String() + " is not a position of " + d.Path() + ": it is another database's, or an earlier database's of that name"
}

// Check returns nil when a reader of database d at position p may read
// on from it: a CodeGone error when p is not of d's epoch (NotOf) or older than the retained history (a position inside a pruned
// commit too: whether the reader had all of that commit cannot be known
// any more), a CodeInvalid one when p is past the newest commit (the
// commits after it were lost in a Postgres failover or a restore) or a
// change of commit 0, which is none. Every
// reader that resumes from a client's position checks it so.
func (h History) Check(d *Database, p Position) error {
	if p.Epoch != d.Epoch {
		return Errorf(CodeGone, "%s; re-read the current state", NotOf(d, "position", p))
	}
	if p.Seq == 0 && p.Index != WholeCommit {
		// Not a pruned commit's change, as the read would say: none.
		return Errorf(CodeInvalid, "position %s names no event of %s: commit 0 is none (the position before the first commit is %s)", p, d.Path(), Position{Epoch: p.Epoch, Seq: 0, Index: WholeCommit})
	}
	if !h.Retains(p) {
		return Errorf(CodeGone, "position %s is older than the retained history of %s (commits up to %d were pruned); re-read the current state", p, d.Path(), h.PrunedSeq)
	}
	if p.Seq > h.LastSeq {
		// Positions come from this log; one past its end names commits
		// the log no longer has.
		return Errorf(CodeInvalid, "position %s is ahead of the newest commit %d of %s: the commits after %d are not in the log (lost in a Postgres failover or a restore); re-read the current state", p, h.LastSeq, d.Path(), h.LastSeq)
	}
	return nil
}

// CheckIndex returns nil when position p of database d, given as param
// (the parameter or header that carried it), names an event of its
// commit, which has n changes: the end of the commit, or one of its
// changes. Otherwise it is a CodeInvalid error naming the commit's
// changes and its end. No read, write or event answers a position past
// the last change of its commit, so a client giving one made it up or
// mangled it: taken as the end of the commit, a read or a resumed stream
// would go on from a point the client never had, and hide the mistake.
// Every reader of a client's position inside a retained commit (reads of
// the past, /api/changes, resumed streams) checks it so, with the same
// error.
func CheckIndex(d *Database, param string, p Position, n int) error {
	if p.Index == WholeCommit || p.Index < n {
		return nil
	}
	end := Position{Epoch: p.Epoch, Seq: p.Seq, Index: WholeCommit}
	if n == 0 {
		return Errorf(CodeInvalid, "%s %s names no event of %s: commit %d has no changes (the position of its end is %s)", param, p, d.Path(), p.Seq, end)
	}
	return Errorf(CodeInvalid, "%s %s names no event of %s: commit %d has %d changes, at indexes 0 to %d (the position of its end is %s)", param, p, d.Path(), p.Seq, n, n-1, end)
}

// CheckTag returns nil when position p of database d, given as param
// (the parameter or header that carried it), has no tag, or the tag of
// stamp s, that of the commit of number p.Seq the log holds (zero when
// it holds none: pruned, or past its end, which History.Check judges).
// Otherwise the commit p was made from was lost (a Postgres failover or
// a restore) and a new commit took its number: ReplacedError. Every
// reader of a client's position checks it so, in a statement it runs
// anyway: a read from it would go on from a state the log never had.
func CheckTag(d *Database, param string, p Position, s Stamp) error {
	if p.Tag == "" || s.IsZero() || TaggedStamp(p.Tag).Is(s) {
		return nil
	}
	return ReplacedError(d, param, p)
}

// ReplacedError returns the CodeGone error of a read of database d from
// position p, given as param, whose commit the log no longer holds,
// another commit having its number (CheckTag).
func ReplacedError(d *Database, param string, p Position) error {
	return Errorf(CodeGone, "%s %s names a commit the log of %s no longer holds: commit %d of the log is another commit, the one the position was in having been lost (a Postgres failover or a restore) and a new commit having taken its number; re-read the current state", param, p, d.Path(), p.Seq)
}

// Taken returns the cursor of a reader that has taken piece c: at the end
// of its commit, or at its last change when more of the commit follow
// (Partial).
func (c *Commit) Taken() Cursor {
	if c.Partial && len(c.Changes) > 0 {
		return Cursor{Seq: c.Seq - 1, Part: c.Changes[len(c.Changes)-1].Index}
	}
	return Cursor{Seq: c.Seq, Part: -1}
}

// Since returns what of piece c comes after cursor cur: c itself, or a
// copy holding only its changes after cur; nil when none of its changes
// does. A commit without changes has nothing to deliver, unless it starts
// a schema version (NewSchema): every reader must see that one, to
// evaluate what follows through the new schema.
func (c *Commit) Since(cur Cursor) *Commit {
	if c.Seq <= cur.Seq {
		return nil
	}
	if len(c.Changes) == 0 {
		if c.NewSchema {
			return c
		}
		return nil
	}
	if c.Seq > cur.Seq+1 || cur.Part < 0 || c.Changes[0].Index > cur.Part {
		return c
	}
	i := 0
	for i < len(c.Changes) && c.Changes[i].Index <= cur.Part {
		i++
	}
	if i == len(c.Changes) {
		return nil
	}
	cp := *c
	cp.Changes = c.Changes[i:]
	return &cp
}

// Head is where one database's commit log stands.
type Head struct {
	DatabaseID int64
	Epoch      string
	History
}

// Event is one event of a subscription, as a transport sends it: its
// position in the log (the stream's event id) and its payload, one line
// of JSON (a GraphQL ExecutionResult, a REST change stream envelope).
type Event struct {
	Position Position
	// ID is Position's text form, computed once per event rather than once
	// per subscriber.
	ID string
	// Kind names the event where the transport does (the REST change
	// stream's SSE event: entity.create, …); empty otherwise.
	Kind string
	Data []byte
}

// ChangePage is one page of a database's change log.
type ChangePage struct {
	// Commits are in commit order, with their changes in order. The first
	// and the last may be partial: Changes is then a run of consecutive
	// changes, and NumChanges counts all of the commit's.
	Commits []*Commit
	// Next is the position to read the next page after: the last change
	// returned, or the whole last commit (Index WholeCommit) when the
	// page ends with it. It is the zero Position when Commits is empty.
	Next Position
	// More reports whether the log held more after Next when it was read.
	More bool
}

// LogPage is one page of a database's commits, newest first, without
// their changes.
type LogPage struct {
	Commits []*Commit
	// More reports whether older commits were left out.
	More bool
}
