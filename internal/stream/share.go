package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
)

// Sharing. Subscribers that would compute the same events from each commit
// (the same GraphQL query, variables and access; the same REST class,
// operations and role) share one: one hub subscription whose pieces are
// evaluated once and framed once, into a bounded history that every member
// takes from at its own pace. Transports only write prepared frames.
// Publishing never blocks on a member: it appends and wakes the members
// with one channel close, instead of one send per member.
//
// A member whose next entry would fall out of the history leaves the share
// (it is detached) and continues from there with a subscription of its own
// (a hub subscription from member.resumeFrom), which replays from the log; meanwhile
// the share holds those commits back from pruning.
//
// A share of results (ShareOptions.Latest: a live query's) publishes
// whole states rather than events: each entry supersedes the ones before,
// so the history keeps only the newest, a member that joins takes it
// first, and a member that falls behind skips to it instead of being
// detached. An entry may carry a delta from the one before (a JSON
// Patch), which a member that took that one gets instead.

// The bounds of a share's history: the events of the pieces some member
// has not taken yet. The bytes scale with the members (each may lag as much
// as one alone), so memory per subscriber stays bounded while a large share
// tolerates long bursts: 10,000 members lagging 500 commits behind read
// shared frames instead of evaluating each commit once per member.
const (
	historyEntries        = 4096
	historyBytesPerMember = 64 << 10
	historyMaxBytes       = 64 << 20
	// eventOverhead is what an event costs beyond its frame (the Event and
	// its share of the entry).
	eventOverhead = 64
)

// takeMax is how many entries a member takes at once (written with one
// flush). A member keeps a slice of that many entries.
const takeMax = 16

// Evaluator computes the events of a share (or of a subscriber of its
// own) from the pieces of commits, in order; one goroutine calls it.
type Evaluator interface {
	// Events returns the events piece c gives, and the position just
	// before the first change they come from (where a reader that has not
	// taken them resumes).
	Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error)
}

// classer is an Evaluator prepared for one schema version that revises
// itself when it meets a commit made under a later one (a GraphQL
// subscription): the classes whose commits it needs follow its version.
type classer interface {
	Classes() (classes []string, version int)
}

// revisedClasses returns the classes ev needs after evaluating piece c,
// when the classes in use were computed for an older schema version
// (version; 0: not known) and ev now is prepared for c's: until then
// every commit of a later version passes the filter
// (changefeed.Options.ClassesVersion), and from then on only those of
// classes do, as for a stream subscribed at the new version.
func revisedClasses(ev Evaluator, c *sluice.Commit, version int) ([]string, int, bool) {
	if version <= 0 || c.SchemaVersion <= version {
		return nil, 0, false
	}
	cl, ok := ev.(classer)
	if !ok {
		return nil, 0, false
	}
	classes, v := cl.Classes()
	if v != c.SchemaVersion {
		return nil, 0, false
	}
	return classes, v, true
}

// closer is an Evaluator that holds something until its share ends (a
// live query's result, charged to a budget): Close is called once the
// share has ended, or did not start.
type closer interface{ Close() }

// follower is an Evaluator that keeps track of its share's members' owners
// (a live query's result, charged to the budget of one of their users):
// Joined is called as a member of owner joins, Left as one leaves while
// the share goes on. An error from Left ends the share with it, for the
// members left (a live query's result that none of their users may
// hold).
type follower interface {
	Joined(owner any)
	Left(owner any) error
}

// closeEvaluator closes ev when it is a closer.
func closeEvaluator(ev Evaluator) {
	if c, ok := ev.(closer); ok {
		c.Close()
	}
}

// ShareOptions describe the share of identical subscribers a stream joins
// (Spec.Share): its database, transport and connection are the stream's.
type ShareOptions struct {
	// Key identifies subscribers with the same events; comparable.
	Key any
	// Classes limits the commits evaluated, and ClassesVersion is the
	// schema version they were computed for (see changefeed.Options).
	Classes        []string
	ClassesVersion int
	// New returns the share's evaluator, when the share starts.
	New func() Evaluator
	// Frame, when set, appends the frame of ev to dst: the share builds
	// every event's frame once for its members. A frame must end with
	// ev.Data followed by two bytes (an SSE data line and the blank line):
	// each Event's Data then points into the frame instead of a copy.
	Frame func(dst []byte, ev sluice.Event) []byte
	// Latest makes the share one of results (see above): its entries
	// supersede each other. It needs a Batcher.
	Latest bool
	// Batcher, when set, evaluates the share with the other shares of
	// its feed that have the same Batcher, together (see Batcher); the
	// evaluator's Events is then not called.
	Batcher Batcher
	// Owner is who the joining stream is for (its user), told to an
	// evaluator that follows its members (see follower).
	Owner any
	// Cohort, when set, groups shares evaluated by one feed: a new share
	// joins the feed of the shares of the same Cohort and database (one
	// hub subscription for them all, its pieces handed to their Batcher
	// together) rather than a feed of its own or its connection's.
	// Shares of one cohort must take the same Classes.
	Cohort any

	// Set by the stream: its database, its transport's label (metrics and
	// listings), and its connection's feed when it has one (Spec.Conn: a
	// new share is evaluated by the feed the connection's other shares
	// of the database use, rather than by a hub subscription of its own).
	database  *sluice.Database
	transport string
	conn      *Feed
}

// Entry is the events of one commit (or piece of one) in a share's
// history, as a member takes them. Nothing in it is modified after it is
// published.
type Entry struct {
	// Start is the position just before the first change the events were
	// evaluated from.
	Start sluice.Position
	// Time is when the commit was made by this process's clock (for the
	// delivery latency metric, sluice.Commit.MadeLocal).
	Time   time.Time
	Events []sluice.Event
	// Frames are the events' frames, one after the other (nil without
	// ShareOptions.Frame).
	Frames []byte
	// Delta and DeltaFrames, in a share of results, are the entry as a
	// change from the entry before it (nil: none); Take gives them, as
	// Events and Frames, to a member that took that entry.
	Delta       []sluice.Event
	DeltaFrames []byte
	// Last is set in what Take gives the member that took the entry last
	// of all its members (for a metric of the share's whole fan-out).
	Last   bool
	size   int
	unread int // members that have not taken it
}

// share is one evaluation of the commits for its members, by its feed
// (feed.go).
type share struct {
	e     *Server
	key   any
	ev    Evaluator
	frame func([]byte, sluice.Event) []byte
	db    *sluice.Database
	// classes and version are what the share's commits are filtered by
	// (ShareOptions.Classes and ClassesVersion, then its evaluator's after
	// a revision); only the feed's drain uses them.
	classes []string
	version int
	latest  bool
	batcher Batcher
	f       *feed // set by attach

	mu sync.Mutex
	// members are the share's members; each knows its index (member.idx).
	members []*member
	closed  bool  // no member may join
	ended   bool  // the share ended on its own (hub, evaluation error)
	err     error // why it ended
	// hist holds the entries not yet taken by every member, oldest first;
	// hist[0] has the index first. Indexes only grow.
	hist  []Entry
	first int64
	bytes int
	// leaving holds the members that fell out of the history and have not
	// yet subscribed on their own, with the commit they replay from (nil
	// until one does).
	leaving map[*member]int64
	// floor is what the share holds in the hub (see holdFloor); -1: none.
	// Written under mu, read by the feed.
	floor atomic.Int64
	// notifyBuf is publish's buffer of notify functions (wakeups).
	notifyBuf []func()
	// wake is closed when the history grows or the share ends; made when
	// a member waits on it (Take), so that members served by notification
	// (Notify) cost no channel.
	wake chan struct{}
}

// member is one subscriber of a share. Its fields are guarded by the
// share's mutex.
type member struct {
	s *share
	// idx is its index in the share's members; -1 once it is not one.
	idx int
	// pos is the index of the next history entry it takes.
	pos int64
	// took is the index of the last entry it took (-1: none), whose
	// delta the next entry may be (a share of results).
	took int64
	// detached is set when its next entry fell out of the history; from is
	// then where it continues on its own.
	detached bool
	from     sluice.Position
	// revoked is set when its stream lost its access (End).
	revoked bool
	label   string
	owner   any // ShareOptions.Owner
	// notify, when set, is called (it must not block) whenever m may have
	// something new to take or must stop.
	notify func()
}

// Notify makes the share call fn whenever m may have something new to
// take, or must stop (detached, ended, revoked), instead of only closing
// the channel Take returns. fn must not block; it may still be called
// (once) after Notify(nil) or Leave. A transport that serves many members from one goroutine
// (a multiplexed connection) needs no goroutine per member this way.
func (m *member) setNotify(fn func()) {
	s := m.s
	s.mu.Lock()
	m.notify = fn
	s.mu.Unlock()
}

// shareSet is a hub's shares, by key, and the feeds of its cohorts.
type shareSet struct {
	e *Server

	// mu guards the fields below. A join holds it while it subscribes, so
	// that subscribers with one key join one share and a cohort has one
	// feed: it is taken before the hub's locks and those of shares and
	// feeds, never while holding one.
	mu      sync.Mutex
	byKey   map[any]*share
	cohorts map[cohortKey]*feed
}

func newShareSet(e *Server) *shareSet {
	return &shareSet{e: e, byKey: map[any]*share{}, cohorts: map[cohortKey]*feed{}}
}

// join adds a subscriber to the share of o.Key, starting the share (from
// now) when there is none. It fails like the hub's Subscribe.
func (set *shareSet) join(ctx context.Context, o ShareOptions) (*member, error) {
	e := set.e
	set.mu.Lock()
	defer set.mu.Unlock()
	if s := set.byKey[o.Key]; s != nil {
		s.mu.Lock()
		if !s.closed {
			m := s.add(o.transport, o.Owner)
			s.mu.Unlock()
			return m, nil
		}
		s.mu.Unlock()
	}
	s := newShare(e, o)
	attached := false
	ck := cohortKey{db: o.database.ID, epoch: o.database.Epoch, key: o.Cohort}
	switch {
	case o.Cohort != nil:
		if f := set.cohorts[ck]; f != nil {
			attached = f.attach(s)
		}
	case o.conn != nil:
		if f := o.conn.current(o.database); f != nil {
			attached = f.attach(s)
		}
	}
	if !attached {
		// A feed of its own or of its cohort, or a new one for the
		// connection: a connection's feed takes every commit, since the
		// shares that join it later may concern any class.
		conn := o.conn != nil && o.Cohort == nil
		var classes []string
		if !conn {
			classes = o.Classes
		}
		f := newFeed(e, o.database, conn)
		sub, err := e.hub.Subscribe(ctx, o.database, nil, changefeed.Options{Classes: classes, ClassesVersion: o.ClassesVersion, Transport: o.transport, Shared: true, Queue: shareQueue, Notify: f.kick, Hold: f.floor})
		if err != nil {
			closeEvaluator(s.ev)
			return nil, err
		}
		f.sub = sub
		f.attach(s)
		switch {
		case o.Cohort != nil:
			f.cohort = &ck
			set.cohorts[ck] = f
		case conn:
			o.conn.set(f)
		}
		defer f.start()
	}
	set.byKey[o.Key] = s
	s.mu.Lock()
	m := s.add(o.transport, o.Owner)
	s.mu.Unlock()
	return m, nil
}

// cohortKey identifies the feed of a cohort (ShareOptions.Cohort).
type cohortKey struct {
	db    int64
	epoch string
	key   any
}

// forgetCohort removes f, which closed, from the cohorts' feeds.
func (set *shareSet) forgetCohort(f *feed) {
	set.mu.Lock()
	if set.cohorts[*f.cohort] == f {
		delete(set.cohorts, *f.cohort)
	}
	set.mu.Unlock()
}

// shareQueue is how many pieces a share's subscription may have waiting.
// A share only evaluates and appends to its history, so it keeps up
// unless the machine is saturated; when it does not, it catches up from
// the log like any subscriber. Smaller than the hub's default queue: a
// connection may hold thousands of distinct shares.
const shareQueue = 16

func newShare(e *Server, o ShareOptions) *share {
	var ev Evaluator
	if o.New != nil {
		ev = o.New()
	}
	s := &share{e: e, key: o.Key, ev: ev, frame: o.Frame, db: o.database, classes: o.Classes, version: o.ClassesVersion, latest: o.Latest, batcher: o.Batcher}
	s.floor.Store(-1)
	return s
}

// add adds a member of owner that takes what is published from now on;
// the caller holds s.mu.
func (s *share) add(label string, owner any) *member {
	m := &member{s: s, pos: s.first + int64(len(s.hist)), took: -1, label: label, owner: owner}
	if f, ok := s.ev.(follower); ok {
		f.Joined(owner)
	}
	if s.latest {
		m.pos = s.first // the newest result first: the current state
	}
	m.idx = len(s.members)
	s.members = append(s.members, m)
	s.count(m, 1)
	for i := m.pos - s.first; i < int64(len(s.hist)); i++ {
		s.hist[i].unread++ // a share of results: the newest, which it takes
	}
	return m
}

// count moves the subscribers gauge of m's transport by d: the share's
// own hub subscription is not counted, its members are.
func (s *share) count(m *member, d float64) {
	if mt := s.e.metrics; mt != nil && s.f != nil {
		mt.Subscribers.WithLabelValues(m.label, dbLabel(s.db.ID)).Add(d)
	}
}

// remove takes m out of the members; the caller holds s.mu.
func (s *share) remove(m *member) {
	last := len(s.members) - 1
	s.members[m.idx] = s.members[last]
	s.members[m.idx].idx = m.idx
	s.members[last] = nil
	s.members = s.members[:last]
	m.idx = -1
	s.count(m, -1)
}

// SubscriptionID returns the id of the hub subscription of the share's
// feed, for logs and /api/admin/subscriptions.
func (m *member) subscriptionID() uint64 { return m.s.f.sub.ID() }

// Evaluator returns the share's evaluator, so that a transport can take
// from it what a detached member needs to evaluate by itself; it must not
// call its Events, which only the share does.
func (m *member) evaluator() Evaluator { return m.s.ev }

// From returns where a detached member continues on its own.
func (m *member) resumeFrom() sluice.Position {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.from
}

// Untake says that m did not use the last entry it took (its stream left
// it out): the next entry it takes is whole, not a delta from that one.
func (m *member) untake() {
	s := m.s
	s.mu.Lock()
	m.took = -1
	s.mu.Unlock()
}

// ownErrs is an Evaluator that tells each member why its share ended in
// terms of the member's owner (a live query's budget: a bound of the user
// the result was charged to is told to another user's member as its own
// user's, never naming the first).
type ownErrs interface {
	EndErr(owner any, err error) error
}

// Err returns why the share ended (after Take said takeEnded).
func (m *member) endErr() error {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ev.(ownErrs); ok && s.err != nil && m.owner != nil {
		return e.EndErr(m.owner, s.err)
	}
	return s.err
}

// End stops m taking anything more: its stream lost its access (see
// Guard). It wakes the members waiting, m among them.
func (m *member) End(error) {
	s := m.s
	s.mu.Lock()
	if m.revoked {
		s.mu.Unlock()
		return
	}
	m.revoked = true
	w, fns := s.wakeups(nil)
	s.mu.Unlock()
	wake(w, fns)
}

// Leave removes m from its share (a client that left, or a member that
// finished); the last member out closes the share, and the feed if it
// was its last share (waiting for its drain).
func (m *member) leave() {
	s := m.s
	s.mu.Lock()
	if m.idx >= 0 {
		s.remove(m)
		for i := max(m.pos-s.first, 0); i < int64(len(s.hist)); i++ {
			s.hist[i].unread--
		}
		s.trim()
	}
	delete(s.leaving, m)
	m.notify = nil
	s.holdFloor()
	last := len(s.members) == 0 && !s.closed
	var endErr error
	if last {
		s.closed = true
	} else if f, ok := s.ev.(follower); ok && m.idx < 0 && m.owner != nil {
		endErr = f.Left(m.owner)
		m.owner = nil // once
		// Closed to joiners now, not at finish: one joining in between
		// would end at once with an error about its own user's budget,
		// which was never weighed (it gets a share of its own instead).
		if endErr != nil {
			s.closed = true
		}
	}
	s.mu.Unlock()
	if endErr != nil {
		s.finish(endErr, false)
		return
	}
	if !last {
		return
	}
	s.e.shares.forget(s)
	s.f.detach(s, false)
}

// Left says that m, which was detached, has its own hub subscription now
// (or gave up): the share stops holding its commits.
func (m *member) left() {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leaving[m]; ok {
		delete(s.leaving, m)
		s.holdFloor()
	}
}

// forget removes s, which closed, from the shares a subscriber may join.
func (set *shareSet) forget(s *share) {
	set.mu.Lock()
	if set.byKey[s.key] == s {
		delete(set.byKey, s.key)
	}
	set.mu.Unlock()
}

// deliver evaluates c and publishes its events; an error ends the share
// (its feed goes on for the others). Only the feed's drain calls it.
func (s *share) deliver(c *sluice.Commit) {
	ctx := s.f.ctx
	evs, start, err := s.f.e.images.events(ctx, s.ev, c)
	if err != nil {
		if ctx.Err() == nil {
			s.end(err)
		}
		return
	}
	if len(evs) > 0 {
		s.publish(start, c.MadeLocal(), evs)
	}
	if classes, v, ok := revisedClasses(s.ev, c, s.version); ok {
		s.classes, s.version = classes, v
		if !s.f.batch && s.f.cohort == nil {
			s.f.sub.SetClasses(classes, v) // its feed is the share's own
		}
	}
}

// Settled is what a Batcher's evaluation of one share gives.
type Settled struct {
	// Events are published (none: nothing changed), with Delta, in a
	// share of results, as their change from the share's previous entry.
	Events []sluice.Event
	Delta  []sluice.Event
	// Start is the position just before the first change they come from.
	Start sluice.Position
	// Time is when the commit they reflect first was made, by this
	// process's clock (zero: none, a first result), for the delivery
	// latency metric (sluice.Commit.MadeLocal).
	Time time.Time
	// Err, when set, ends the share with it.
	Err error
	// Retry, when set, says the share was not settled now (a live
	// query whose user's reads are all running): the feed settles its
	// group again once Retry is closed, whether or not a commit comes.
	Retry <-chan struct{}
}

// publishResult publishes a share of results' new entry r, which
// supersedes every entry before it.
func (s *share) publishResult(r *Settled) {
	var frames, deltaFrames []byte
	size := (len(r.Events) + len(r.Delta)) * eventOverhead
	if s.frame != nil {
		frames = s.frameAll(nil, r.Events)
		deltaFrames = s.frameAll(nil, r.Delta)
		size += len(frames) + len(deltaFrames)
	} else {
		for _, evs := range [][]sluice.Event{r.Events, r.Delta} {
			for i := range evs {
				size += len(evs[i].ID) + len(evs[i].Data)
			}
		}
	}
	s.mu.Lock()
	// Kept even with no member: a share's first result may be settled
	// before the member that made the share is added (its feed runs
	// already), and that member then takes it. The older entries go,
	// untaken or not: a member that did not take them skips to this one
	// (Take).
	clear(s.hist)
	s.first += int64(len(s.hist))
	s.hist = append(s.hist[:0], Entry{Start: r.Start, Time: r.Time, Events: r.Events, Frames: frames,
		Delta: r.Delta, DeltaFrames: deltaFrames, size: size, unread: len(s.members)})
	s.bytes = size
	w, fns := s.wakeups(s.notifyBuf[:0])
	s.mu.Unlock()
	wake(w, fns)
	clear(fns)
	s.notifyBuf = fns
}

// frameAll appends the frames of evs to dst, pointing each event's Data
// into its frame (see ShareOptions.Frame).
func (s *share) frameAll(dst []byte, evs []sluice.Event) []byte {
	ends := make([]int, len(evs))
	for i := range evs {
		dst = s.frame(dst, evs[i])
		ends[i] = len(dst) - 2 // the payload ends before the frame's "\n\n"
	}
	for i := range evs {
		evs[i].Data = dst[ends[i]-len(evs[i].Data) : ends[i] : ends[i]]
	}
	return dst
}

// publish appends events to the history and wakes the members. Over the
// history's bounds, the oldest entries go, and the members that had not
// taken them are detached.
func (s *share) publish(start sluice.Position, at time.Time, evs []sluice.Event) {
	var frames []byte
	size := len(evs) * eventOverhead
	if s.frame != nil {
		for i := range evs {
			frames = s.frame(frames, evs[i])
			// The payload is the frame's bytes before its closing "\n\n".
			end := len(frames) - 2
			evs[i].Data = frames[end-len(evs[i].Data) : end : end]
		}
		size += len(frames)
	} else {
		for i := range evs {
			size += len(evs[i].ID) + len(evs[i].Data)
		}
	}
	s.mu.Lock()
	if len(s.members) == 0 {
		s.mu.Unlock()
		return
	}
	s.hist = append(s.hist, Entry{Start: start, Time: at, Events: evs, Frames: frames, size: size, unread: len(s.members)})
	s.bytes += size
	budget := min(historyBytesPerMember*len(s.members), historyMaxBytes)
	for len(s.hist) > 1 && (len(s.hist) > historyEntries || s.bytes > budget) {
		s.evictOldest()
	}
	s.holdFloor()
	w, fns := s.wakeups(s.notifyBuf[:0])
	s.mu.Unlock()
	wake(w, fns)
	clear(fns)
	s.notifyBuf = fns
}

// holdFloor keeps the commits members still need from being pruned: the
// share's hub subscription moves on as soon as a piece is evaluated, but
// members take it later, and one that was detached replays from the log.
// The caller holds s.mu.
func (s *share) holdFloor() {
	floor := int64(-1)
	if s.latest {
		// Nobody replays a share of results from the log: a member takes
		// the newest result, whenever.
		s.floor.Store(floor)
		return
	}
	if len(s.hist) > 0 {
		floor = s.hist[0].Start.Seq - 1
	}
	for _, seq := range s.leaving {
		if floor < 0 || seq-1 < floor {
			floor = seq - 1
		}
	}
	s.floor.Store(floor) // read by the feed (feed.floor)
}

// evictOldest drops the oldest entry, detaching the members that had not
// taken it: they continue from just before its first change, read from
// the log. The caller holds s.mu.
func (s *share) evictOldest() {
	e := s.hist[0]
	// Backwards: remove moves the last member into the removed one's
	// place, one visited already.
	for i := len(s.members) - 1; i >= 0; i-- {
		m := s.members[i]
		if m.pos != s.first {
			continue
		}
		m.detached, m.from = true, e.Start
		m.from.Epoch = s.db.Epoch
		s.remove(m)
		if s.leaving == nil {
			s.leaving = map[*member]int64{}
		}
		s.leaving[m] = e.Start.Seq
		for i := 1; i < len(s.hist); i++ {
			s.hist[i].unread--
		}
		if mt := s.e.metrics; mt != nil && s.f != nil {
			mt.CatchUps.WithLabelValues(dbLabel(s.db.ID)).Inc()
		}
	}
	s.bytes -= e.size
	s.hist[0] = Entry{}
	s.hist = s.hist[1:]
	s.first++
	s.trim()
}

// trim drops the oldest entries every member has taken. The caller holds
// s.mu.
func (s *share) trim() {
	keep := 0
	if s.latest {
		keep = 1 // the current result, for members that join
	}
	for len(s.hist) > keep && s.hist[0].unread <= 0 {
		s.bytes -= s.hist[0].size
		s.hist[0] = Entry{}
		s.hist = s.hist[1:]
		s.first++
	}
	if len(s.hist) == 0 {
		s.hist = nil // release the backing array
	}
}

// wakeups takes what wakes the members: the channel they wait on and the
// functions of those that asked to be notified (Notify), detached ones
// too, appended to fns. The caller holds s.mu, and calls wake with them
// once it released it: members woken while the lock is held would only
// queue on it (thousands at once, for a large share).
func (s *share) wakeups(fns []func()) (chan struct{}, []func()) {
	w := s.wake
	s.wake = nil
	for _, m := range s.members {
		if m.notify != nil {
			fns = append(fns, m.notify)
		}
	}
	for m := range s.leaving {
		if m.notify != nil {
			fns = append(fns, m.notify)
		}
	}
	return w, fns
}

// wake wakes what wakeups took.
func wake(w chan struct{}, fns []func()) {
	if w != nil {
		close(w)
	}
	for _, fn := range fns {
		fn()
	}
}

// end closes the share with err; its members finish with it once they
// have taken what it published.
func (s *share) end(err error) {
	s.finish(err, true) // by the drain: it does not wait for itself
}

// finish ends s with err, once (the first error is the one its members
// are told): by its feed's drain (inDrain), or by a member that left
// (leave), which waits for a running drain when s was its feed's last
// share, as the last member out does.
func (s *share) finish(err error, inDrain bool) {
	s.e.shares.forget(s)
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.ended = true
	s.err = err
	w, fns := s.wakeups(nil)
	s.mu.Unlock()
	wake(w, fns)
	s.f.detach(s, inDrain)
}

// takeState says what a member does once Take gave it nothing more.
type takeState int

// The states Take reports.
const (
	takeWait     takeState = iota // wait on the returned channel
	takeDetached                  // continue on its own from From
	takeEnded                     // the share ended: finish with Err
	takeRevoked                   // the member lost its access: finish
)

// Take appends to buf the next entries (at most 16) m has not taken. When
// that leaves nothing to take, it also returns the channel that is closed
// when that changes (nil when more can be taken now), or the reason m must
// not wait.
func (m *member) take(buf []Entry) ([]Entry, <-chan struct{}, takeState) {
	return m.takeWithin(buf, nil)
}

// takeWithin is take, asking room (nil: nobody) before it takes an entry
// of smallOutputBytes or more: one room refuses stays in the history,
// and neither it nor what follows it is taken now (take then reports
// that more can be taken, and the member's stream waits until room
// retries it: see outputBudget).
func (m *member) takeWithin(buf []Entry, room func(int64) bool) ([]Entry, <-chan struct{}, takeState) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.revoked {
		return buf, nil, takeRevoked
	}
	if m.detached {
		return buf, nil, takeDetached
	}
	// A member of a share of results that did not take the entries
	// before the oldest kept skips to it.
	i := int(max(m.pos-s.first, 0))
	n := min(len(s.hist)-i, takeMax)
	for k := i; k < i+n; k++ {
		if room != nil && s.hist[k].size >= smallOutputBytes && !room(int64(s.hist[k].size)) {
			n = k - i
			break
		}
		s.hist[k].unread--
		e := s.hist[k]
		idx := s.first + int64(k)
		if e.Delta != nil && m.took == idx-1 {
			e.Events, e.Frames = e.Delta, e.DeltaFrames
		}
		e.Delta, e.DeltaFrames = nil, nil
		m.took = idx
		e.Last = e.unread == 0
		buf = append(buf, e)
	}
	m.pos = s.first + int64(i+n)
	more := i+n < len(s.hist) // before trim moves the indexes
	if n > 0 {
		first := s.first
		s.trim()
		if s.first != first {
			s.holdFloor()
		}
	}
	switch {
	case more:
		return buf, nil, takeWait
	case s.ended:
		return buf, nil, takeEnded
	}
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return buf, s.wake, takeWait
}
