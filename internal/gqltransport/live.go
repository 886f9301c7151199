package gqltransport

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/jsonpatch"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/stream"
)

// Live queries (graph/live.go) are streams like the subscriptions,
// served by the stream server (guard, share, readiness, heartbeats,
// access end, caps). What differs is the share:
//
//   - identical live queries (the same executable schema, query,
//     operation, variables and patch mode) share one evaluation and one
//     framed result; the share is one of results (the stream server's Latest):
//     each entry is a whole result that supersedes the one before, so a
//     member that joins takes the current result first and one that
//     falls behind skips to the newest;
//   - live queries that differ only in their variables are a cohort:
//     their shares are evaluated by one feed (one hub subscription) and
//     batched (liveGroup): each commit piece is judged once for all of
//     them (its images decoded once), and the results it may have
//     changed are read again together, in one snapshot, once the queued
//     pieces are judged: commits that queue meanwhile cost no read of
//     their own (coalescing without a delay);
//   - a result is published only when its bytes changed, with the
//     position of the snapshot it was read in: results never go
//     backwards.

// patchMode is the value of extensions.patch that asks for JSON Patches.
const patchMode = "json-patch"

// liveKey is the share key of a live query: its subscription's, and
// whether it sends patches (framed otherwise).
type liveKey struct {
	shareKey
	patch bool
}

// liveCohort is the cohort of a live query: the live queries of one
// executable schema and operation, whatever their variables, that read
// the same classes (variables may change them: include_children, a
// filter through a reference), so that their feed takes the commits each
// needs.
type liveCohort struct {
	es        *graph.ExecutableSchema
	query     string
	operation string
	classes   string
}

// liveBatcher evaluates the live queries of a feed together; one per
// Server, so that every live share has the same Batcher.
type liveBatcher struct {
	streams *stream.Server
	metrics *metrics.Stream
	budget  *liveBudget
	reads   *liveReads
	// scanned, set by tests only, is called as a resumed live query of
	// user judges a piece of the log (readSince), under that user's read
	// token: what a test needs to see the scan bounded by it.
	scanned func(user *sluice.User)
}

// newLiveBatcher returns the Server's liveBatcher.
func newLiveBatcher(streams *stream.Server, m *metrics.Stream, b LiveBudget) *liveBatcher {
	return &liveBatcher{streams: streams, metrics: m, budget: newLiveBudget(b), reads: newLiveReads(max(runtime.GOMAXPROCS(0)/2, 1))}
}

// liveReads bounds the live reads (a settle's, a resumed query's) one
// user runs at once to half the cores: however many live queries a user
// holds, other users' requests, and live queries, keep the rest. A
// user's reads that wait coalesce the commits made meanwhile. The super
// user is not bounded.
type liveReads struct {
	per   int
	mu    sync.Mutex
	users map[int64]*userReads
}

type userReads struct {
	id     int64
	tokens chan struct{}
	refs   int
	// freed is closed, and replaced, whenever a token is given back
	// (guarded by liveReads.mu): what try's caller waits on.
	freed chan struct{}
}

func newLiveReads(per int) *liveReads {
	return &liveReads{per: per, users: map[int64]*userReads{}}
}

// user returns u's reads, counting a reference; the caller holds r.mu.
func (r *liveReads) user(id int64) *userReads {
	u := r.users[id]
	if u == nil {
		u = &userReads{id: id, tokens: make(chan struct{}, r.per), freed: make(chan struct{})}
		r.users[id] = u
	}
	u.refs++
	return u
}

// give gives a token of u back; the caller holds r.mu.
func (u *userReads) give() {
	<-u.tokens
	close(u.freed)
	u.freed = make(chan struct{})
}

// try takes a token of user without waiting: it returns the function
// that gives it back or, when none is free, a channel closed once one is.
// A settle reads the shares of the users who may read now and leaves the
// others for later, so that one user's reads, however many, never hold
// up another user's results read in the same batch.
func (r *liveReads) try(user *sluice.User) (func(), <-chan struct{}) {
	if user.Superuser {
		return func() {}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.user(user.ID)
	select {
	case u.tokens <- struct{}{}:
	default:
		freed := u.freed
		r.unref([]*userReads{u})
		return nil, freed
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			u.give()
			r.unref([]*userReads{u})
		})
	}, nil
}

// batchReads are the read tokens one settle holds: one of each user
// whose shares it reads, taken without waiting (liveReads.try).
type batchReads struct {
	r        *liveReads
	taken    map[int64]bool
	busy     map[int64]<-chan struct{}
	releases []func()
}

func (r *liveReads) batch() *batchReads {
	return &batchReads{r: r, taken: map[int64]bool{}, busy: map[int64]<-chan struct{}{}}
}

// take reports whether a read of user may run now: the batch holds a
// token of user, or took one that was free; otherwise it returns the
// channel closed once one is.
func (b *batchReads) take(user *sluice.User) (bool, <-chan struct{}) {
	if b.taken[user.ID] {
		return true, nil
	}
	if freed, waits := b.busy[user.ID]; waits {
		return false, freed
	}
	release, freed := b.r.try(user)
	if release == nil {
		b.busy[user.ID] = freed
		return false, freed
	}
	b.taken[user.ID] = true
	b.releases = append(b.releases, release)
	return true, nil
}

// release gives back the tokens the batch took.
func (b *batchReads) release() {
	for _, release := range b.releases {
		release()
	}
	b.releases = nil
	clear(b.taken)
}

// acquire waits until each of users (sorted by id, so that two reads
// never wait for each other) may run one more read, and returns the
// function that gives the tokens back; an error when ctx ended first.
func (r *liveReads) acquire(ctx context.Context, users []*sluice.User) (func(), error) {
	var held []*userReads
	release := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, u := range held {
			u.give()
		}
		r.unref(held)
	}
	var ids []int64
	for _, u := range users {
		if !u.Superuser && !slices.Contains(ids, u.ID) {
			ids = append(ids, u.ID)
		}
	}
	slices.Sort(ids)
	r.mu.Lock()
	var want []*userReads
	for _, id := range ids {
		want = append(want, r.user(id))
	}
	r.mu.Unlock()
	for i, u := range want {
		select {
		case u.tokens <- struct{}{}:
			held = want[:i+1]
		case <-ctx.Done():
			r.mu.Lock()
			for _, h := range held {
				h.give()
			}
			r.unref(want)
			r.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	held = want
	return release, nil
}

// unref drops the references of us, forgetting a user nobody waits on;
// the caller holds r.mu.
func (r *liveReads) unref(us []*userReads) {
	for _, u := range us {
		if u.refs--; u.refs == 0 {
			delete(r.users, u.id)
		}
	}
}

func (b *liveBatcher) NewGroup() stream.BatchGroup { return &liveGroup{b: b} }

// liveEvaluator is the evaluation state of one live share. The feed's
// drain goroutine uses it (through its liveGroup).
type liveEvaluator struct {
	lq    *graph.LiveQuery
	patch bool
	// hold is what its result holds of the live query budget.
	hold *liveHold

	ran bool // a result was read
	// seen is the last commit the result reflects: the head of the
	// snapshot it was read in. A piece of a commit up to it changes
	// nothing the result does not show.
	seen int64
	// dirty: a piece judged since the read may have changed the result;
	// since is the time of the first such commit, by this process's
	// clock (sluice.Commit.MadeLocal).
	dirty bool
	since time.Time
	// data and errs are the last result published (errs: the errors it
	// carries, nil when none); revision counts them. bound is the
	// boundary of the last result read (graph.Boundary: its last row's
	// sort keys, charged to hold with it, holdResult): changes past it
	// need no read.
	data     []byte
	errs     []byte
	revision int64
	bound    *graph.Boundary
	// stale: a commit made under a later schema version than lq's was
	// judged; lq is revised before it is read again.
	stale bool
}

// Joined and Left tell the result's budget charge who holds it (see
// liveHold.joined).
func (ev *liveEvaluator) Joined(owner any)     { ev.hold.joined(owner.(*sluice.User)) }
func (ev *liveEvaluator) Left(owner any) error { return ev.hold.left(owner.(*sluice.User)) }

// EndErr tells a member of owner why the share ended in terms of its own
// user (liveHold.ownError).
func (ev *liveEvaluator) EndErr(owner any, err error) error {
	return ev.hold.ownError(owner.(*sluice.User), err)
}

// revise prepares e's live query for the current schema version
// (graph.LiveQuery.Revise); an error, naming the change that invalidated
// it, ends its share.
func (e *liveEvaluator) revise(ctx context.Context) error {
	lq, err := e.lq.Revise(ctx)
	if err != nil {
		return err
	}
	e.lq, e.stale = lq, false
	return nil
}

// Classes returns the classes the live query, as last prepared, needs
// the commits of, and the schema version it was prepared for: the stream
// server narrows its cohort feed's class filter to them once every live
// query of the cohort was revised to the version of the commits it met
// (a commit of a later version passes it until then). The feed's drain
// calls it, as it calls the group.
func (e *liveEvaluator) Classes() ([]string, int) { return e.lq.Classes(), e.lq.Version() }

// Close releases what the share's result holds of the budget, once the
// share ended (the stream server calls it).
func (e *liveEvaluator) Close() { e.hold.Close() }

// Events is not called: a live share is settled by its group.
func (e *liveEvaluator) Events(context.Context, *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return nil, sluice.Position{}, nil
}

// liveGroup is the live shares of one feed (stream.BatchGroup).
type liveGroup struct {
	b   *liveBatcher
	chs []graph.Change
	// version is the newest schema version of the commits noted: a
	// later one makes every share's live query revise (Note). One that
	// joins prepared for an older version finds it out when it reads.
	version int
	// due and lqs are the shares a settle reads (their indexes in the
	// batch) and their live queries.
	due []int
	lqs []*graph.LiveQuery
	// idx finds the shares a change may affect; built for evs.
	idx *liveIndex
	evs []stream.Evaluator
}

// liveIndex finds the live shares of a feed a change may affect without
// judging every one: a cohort's live queries usually differ only in the
// value one field must equal (`filter: {owner: {eq: $u}}`), so the
// shares keyed by that field (graph.LiveQuery.Key) are looked up by the
// change's values of it, before and after; the others are judged
// whatever the change.
type liveIndex struct {
	field   string
	byValue map[string][]*liveEvaluator
	rest    []*liveEvaluator
	all     []*liveEvaluator
}

// index returns the index of evs. The feed replaces its slice of
// evaluators when a share attaches or detaches (the stream server's group), and
// g keeps the slice it indexed, whose array therefore cannot be reused:
// the same first element and length mean the same evaluators.
func (g *liveGroup) index(evs []stream.Evaluator) *liveIndex {
	if g.idx != nil && len(evs) == len(g.evs) && (len(evs) == 0 || &evs[0] == &g.evs[0]) {
		return g.idx
	}
	x := &liveIndex{byValue: map[string][]*liveEvaluator{}}
	for _, ev := range evs {
		e := ev.(*liveEvaluator)
		x.all = append(x.all, e)
		field, value, ok := e.lq.Key()
		if ok && x.field == "" {
			x.field = field
		}
		if !ok || field != x.field {
			x.rest = append(x.rest, e)
			continue
		}
		x.byValue[value] = append(x.byValue[value], e)
	}
	g.idx, g.evs = x, evs
	return x
}

// Note judges piece c for every live share of the feed that might need
// it: one that read its result, reflects no later commit and is not
// already due a read, and that the change may affect by the index.
func (g *liveGroup) Note(_ context.Context, c *sluice.Commit, evs []stream.Evaluator) {
	x := g.index(evs)
	if c.SchemaVersion > g.version {
		g.version = c.SchemaVersion
		// A schema change may change any result (a forced change drops
		// values), and its commit changes no document: every live
		// query prepared for an older version reads its result again,
		// revised.
		for _, e := range x.all {
			if v := e.lq.Version(); v > 0 && c.SchemaVersion > v {
				e.stale = true
				if e.ran && !e.dirty {
					e.dirty, e.since = true, c.MadeLocal()
				}
			}
		}
	}
	g.chs = g.chs[:0]
	for i := range c.Changes {
		g.chs = append(g.chs, graph.NewChange(&c.Changes[i]))
	}
	judge := func(e *liveEvaluator, ch *graph.Change) {
		if !e.ran || e.dirty || c.Seq <= e.seen {
			return
		}
		if e.lq.AffectsResult(ch, e.bound) {
			e.dirty, e.since = true, c.MadeLocal()
		}
	}
	for i := range g.chs {
		ch := &g.chs[i]
		if x.field == "" {
			for _, e := range x.all {
				judge(e, ch)
			}
			continue
		}
		before, okBefore, bad := ch.Value(false, x.field)
		if bad {
			for _, e := range x.all {
				judge(e, ch)
			}
			continue
		}
		after, okAfter, _ := ch.Value(true, x.field)
		if okBefore {
			for _, e := range x.byValue[before] {
				judge(e, ch)
			}
		}
		if okAfter && (!okBefore || after != before) {
			for _, e := range x.byValue[after] {
				judge(e, ch)
			}
		}
		for _, e := range x.rest {
			judge(e, ch)
		}
	}
	clear(g.chs) // hold no images between pieces
}

// Settle reads again the results that are due (a new share's first, or
// one a noted piece may have changed), all in one snapshot with one
// statement for their documents (graph.RunEach), and gives each that
// changed.
func (g *liveGroup) Settle(ctx context.Context, evs []stream.Evaluator, out []stream.Settled) {
	g.due, g.lqs = g.due[:0], g.lqs[:0]
	for i, ev := range evs {
		e := ev.(*liveEvaluator)
		if e.ran && !e.dirty {
			continue
		}
		if e.stale {
			if err := e.revise(ctx); err != nil {
				out[i].Err = err
				continue
			}
		}
		g.due, g.lqs = append(g.due, i), append(g.lqs, e.lq)
	}
	// Read the shares of the owners who may read now (a token each,
	// liveReads.try); the others stay due, and their group is settled
	// again once a token of their owner is free (Settled.Retry): one
	// user whose reads take its half of the cores stalls neither the
	// other users' results of this batch nor the feed.
	tokens := g.b.reads.batch()
	n := 0
	for j, i := range g.due {
		if ok, freed := tokens.take(evs[i].(*liveEvaluator).hold.user()); !ok {
			out[i].Retry = freed
			continue
		}
		g.due[n], g.lqs[n] = i, g.lqs[j]
		n++
	}
	clear(g.lqs[n:])
	g.due, g.lqs = g.due[:n], g.lqs[:n]
	if n == 0 {
		return
	}
	res, retry := g.read(ctx, evs, tokens)
	tokens.release()
	// What the reads saw may have been written after access changes that
	// end some members: apply those first, so that an ended member never
	// takes these results.
	var access int64
	for _, r := range res {
		access = max(access, r.Access)
	}
	if err := g.b.streams.SyncAccess(ctx, access); err != nil {
		for _, i := range g.due {
			out[i].Err = err
		}
		clear(g.lqs)
		return
	}
	for j, i := range g.due {
		if retry[j] != nil {
			out[i].Retry = retry[j] // still due, read by its new owner
			continue
		}
		if res[j].Err != nil {
			out[i].Err = res[j].Err
			continue
		}
		e := evs[i].(*liveEvaluator)
		e.bound = res[j].Boundary
		g.settle(e, res[j].Data, res[j].Errors, res[j].Position, &out[i])
	}
	clear(g.lqs) // hold no live query between batches
}

// liveEstimate names the bound of a read estimated from the result
// before it (a result that passes it is read again alone, see read).
const liveEstimate = "live_estimate"

// read reads the results of the due shares (g.due, g.lqs) of evs, each
// within what the live query budget leaves its owner and the process
// (liveHold.bounds), and charges them to it, under tokens, which hold a
// read token of each of their owners.
//
// A share whose charge a read moved to another user (handedOver) is
// read again as that user's read, under a token of theirs: its CPU
// counts against the user its result is charged to, not the one it was
// charged to before (who may hold no member of it any more, or have
// read tokens to spare that its new owner has not). When none of that
// user's tokens is free, the share is not read now: retry[j] is the
// channel closed once one is, and the share stays due.
//
// The budget left is shared by the owner's results, so reading them all
// at once, each bounded by all of it, could take many times what is left
// before any is charged: a share's read is first bounded by an estimate,
// twice its last result and some more, and together those stay within a
// few times what the budget allows. A result past its estimate is read
// again, alone, after the others were charged, within what is left then.
func (g *liveGroup) read(ctx context.Context, evs []stream.Evaluator, tokens *batchReads) (res []graph.LiveResult, retry []<-chan struct{}) {
	rows, bytes := g.lqs[0].Limits()
	bs := make([]graph.Bounds, len(g.due))
	full := make([]graph.Bounds, len(g.due))
	for j, i := range g.due {
		e := evs[i].(*liveEvaluator)
		full[j] = e.hold.bounds(rows, bytes)
		bs[j] = estimate(full[j], rows, bytes, e.hold)
	}
	rctx, statements := engine.CountStatements(ctx)
	res = graph.RunEach(rctx, g.lqs, bs)
	retry = make([]<-chan struct{}, len(g.due))
	for j, i := range g.due {
		if !errors.Is(res[j].Err, engine.ErrSchemaChanged) {
			continue
		}
		// Read through a schema version that moved on meanwhile:
		// revised, it reads again.
		e := evs[i].(*liveEvaluator)
		if err := e.revise(ctx); err != nil {
			res[j] = graph.LiveResult{Err: err}
			continue
		}
		g.lqs[j] = e.lq
		res[j] = e.lq.Run(rctx, bs[j])
	}
	g.b.count(g.lqs[0], statements())
	var again []int
	for j, i := range g.due {
		e := evs[i].(*liveEvaluator)
		switch {
		case graph.IsBoundError(res[j].Err, liveEstimate) || handedOver(res[j].Err, e.hold):
			again = append(again, j)
		case res[j].Err == nil:
			res[j].Err = holdResult(e.hold, &res[j])
		}
	}
	for _, j := range again {
		e := evs[g.due[j]].(*liveEvaluator)
		// Twice at most: a read past its estimate may then find its
		// owner's budget too small, and hand the charge over.
		for range 2 {
			if ok, freed := tokens.take(e.hold.user()); !ok {
				res[j], retry[j] = graph.LiveResult{}, freed
				break
			}
			b := e.hold.bounds(rows, bytes)
			if err := b.Spent(); err != nil {
				res[j] = graph.LiveResult{Err: err}
			} else {
				rctx, statements := engine.CountStatements(ctx)
				res[j] = e.lq.Run(rctx, b)
				g.b.count(e.lq, statements())
			}
			if !handedOver(res[j].Err, e.hold) {
				break
			}
		}
		if retry[j] == nil && res[j].Err == nil {
			res[j].Err = holdResult(e.hold, &res[j])
		}
	}
	for j := range res {
		if res[j].Err != nil {
			res[j].Data, res[j].Errors = nil, nil // what it read is not kept
		}
	}
	return res, retry
}

// holdResult charges r, a share's new result, to h: its documents, and
// its JSON and the boundary the share keeps with it (graph.Boundary,
// whose keys are at most a few KiB). A boundary only saves reads: when
// the budget has no room for it, r is held without it (r.Boundary is
// dropped), and the share reads its result again at every change of a
// document its filter takes.
func holdResult(h *liveHold, r *graph.LiveResult) error {
	rows, bytes := int64(r.Rows), int64(len(r.Data)+len(r.Errors))
	if r.Boundary != nil {
		if h.set(rows, bytes+r.Boundary.Bytes()) == nil {
			return nil
		}
		r.Boundary = nil
	}
	return h.set(rows, bytes)
}

// handedOver reports whether err is a read's going past a per-user bound
// of h's owner and h's charge moved to another user of the share, with
// more room (liveHold.handOver): the result is then read again.
func handedOver(err error, h *liveHold) bool {
	for _, key := range []string{keyLiveRowsPerUser, keyLiveBytesPerUser} {
		if graph.IsBoundError(err, key) {
			return h.handOver(key)
		}
	}
	return false
}

// estimate returns the bounds of a first read of h's next result: full
// (what the budget leaves it), tightened to twice what h holds plus 256
// documents and 64 KiB, named liveEstimate when that is tighter.
func estimate(full graph.Bounds, rows, bytes int, h *liveHold) graph.Bounds {
	if full.Rows < 0 || full.Bytes < 0 {
		return full // spent: RunEach answers its error without reading
	}
	b := full
	if b.Rows == 0 {
		b.Rows = rows
	}
	if b.Bytes == 0 {
		b.Bytes = bytes
	}
	tighter := false
	heldRows, heldBytes := h.held()
	if est := 2*heldRows + 256; rows > 0 && est < int64(b.Rows) {
		b.Rows, b.RowsKey, tighter = int(est), liveEstimate, true
	}
	if est := 2*heldBytes + 64<<10; bytes > 0 && est < int64(b.Bytes) {
		b.Bytes, b.BytesKey, tighter = int(est), liveEstimate, true
	}
	if !tighter {
		return full
	}
	return b
}

// settle takes e's result, its data and the errors it carries (nil:
// none), read at pos, and sets out to what it publishes: nothing when the
// result is unchanged, its data and its errors alike.
func (g *liveGroup) settle(e *liveEvaluator, data, errs []byte, pos sluice.Position, out *stream.Settled) {
	first := !e.ran
	since := e.since
	e.ran, e.dirty, e.since = true, false, time.Time{}
	e.seen = max(e.seen, pos.Seq)
	if !first && bytes.Equal(data, e.data) && bytes.Equal(errs, e.errs) {
		return
	}
	prev, prevErrs := e.data, e.errs
	e.data, e.errs = data, errs
	e.revision++
	id := ""
	if pos.Epoch != "" {
		id = pos.String()
	}
	out.Start, out.Time = pos, since
	out.Events = []sluice.Event{{Position: pos, ID: id, Data: liveResult(data, errs, id, e.revision, e.patch)}}
	// A patch is of data alone: a result with errors, or the first after
	// one, is sent whole, with its errors (or without any).
	if e.patch && !first && errs == nil && prevErrs == nil {
		// A patch as large as the result is no saving: members then get
		// the result. Diff stops at that budget, returning the whole
		// replace (larger than the result), so a patch that would be
		// many times the result (deep documents with long keys) costs
		// no more than the result to find out.
		if p, err := jsonpatch.Diff(prev, data, len(data)-1); err == nil && len(p) < len(data) {
			out.Delta = []sluice.Event{{Position: pos, ID: id, Data: livePatch(p, id, e.revision)}}
		}
	}
	if m := g.b.metrics; m != nil {
		m.LiveResults.WithLabelValues(strconv.FormatInt(e.lq.Database().ID, 10)).Inc()
	}
}

// liveResult returns the message of a whole result: the errors it
// carries (errs, nil for none), first as a query's answer has them, its
// data, and as extensions its position (also as lastEventId, which every
// transport's clients resume with) and, with patches, its revision.
//
//	{"data":{…},"extensions":{"position":"<p>","lastEventId":"<p>"}}
//	{"errors":[…],"data":{…},"extensions":{"position":"<p>","revision":3,"lastEventId":"<p>"}}
func liveResult(data, errs []byte, id string, revision int64, patch bool) []byte {
	b := make([]byte, 0, len(data)+len(errs)+len(id)*2+64)
	b = append(b, '{')
	b = appendLiveBody(b, data, errs)
	if id == "" && !patch {
		return append(b, '}')
	}
	b = append(b, `,"extensions":{`...)
	b = appendLiveExtensions(b, id, revision, patch, nil)
	return append(b, "}}"...)
}

// livePatch returns the message of a patch: the JSON Patch from the
// previous result (revision-1) to this one, with the position.
//
//	{"extensions":{"position":"<p>","revision":4,"patch":[…],"lastEventId":"<p>"}}
func livePatch(patch []byte, id string, revision int64) []byte {
	b := make([]byte, 0, len(patch)+len(id)*2+80)
	b = append(b, `{"extensions":{`...)
	b = appendLiveExtensions(b, id, revision, true, patch)
	return append(b, "}}"...)
}

func appendLiveExtensions(b []byte, id string, revision int64, withRevision bool, patch []byte) []byte {
	sep := ""
	if id != "" {
		b = append(b, `"position":"`...)
		b = append(b, id...) // positions are [a-z0-9-]
		b = append(b, '"')
		sep = ","
	}
	if withRevision {
		b = append(b, sep+`"revision":`...)
		b = strconv.AppendInt(b, revision, 10)
		sep = ","
	}
	if patch != nil {
		b = append(b, sep+`"patch":`...)
		b = append(b, patch...)
		sep = ","
	}
	if id != "" {
		b = append(b, sep+`"lastEventId":"`...)
		b = append(b, id...)
		b = append(b, '"')
	}
	return b
}

// appendLiveBody appends what a result message holds of the result: its
// errors (errs, nil for none) and its data.
func appendLiveBody(b, data, errs []byte) []byte {
	if errs != nil {
		b = append(b, `"errors":`...)
		b = append(b, errs...)
		b = append(b, ',')
	}
	b = append(b, `"data":`...)
	return append(b, data...)
}

// liveBody returns the body (appendLiveBody) of a whole result message
// without patches (liveResult), nil when msg is not one.
func liveBody(msg []byte, id string) []byte {
	tail := len(`,"extensions":{"position":"","lastEventId":""}}`) + 2*len(id)
	if id == "" {
		tail = 1
	}
	if len(msg) < 1+tail || msg[0] != '{' {
		return nil
	}
	return msg[1 : len(msg)-tail]
}
