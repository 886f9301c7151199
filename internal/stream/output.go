package stream

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice"
)

// smallOutputBytes: output of fewer bytes (a piece's events, a share's
// entry) is formed and written without the output budget: what small
// pieces hold unsent is bounded by the streams' caps (max_streams) and
// the writers' buffers, and the fan-out of small commits to many streams
// takes no lock for it.
const smallOutputBytes = 64 << 10

// outputBudget bounds the output that streams hold formed and not yet
// written to their clients, for the process (size) and for each user
// (perUser; the super user is held to size only). A stream whose client
// does not read holds the piece it is writing until write_timeout: a
// REST change stream's event of a 64 MiB document, a GraphQL event of
// up to graphql_max_response_bytes, and, parked, its own copy of what
// its socket did not take. Without a budget one user's non-reading
// streams held that once per stream, up to max_streams_per_user times
// the largest piece.
//
// A stream takes a piece's bytes before it forms or takes the piece, and
// gives them back once its client's connection took the piece. A piece
// that does not fit waits, formed by nobody and taken from no share: a
// member leaves its entries in its share's history (from which it may be
// detached, to read the log on its own as any member that fell behind),
// a stream of its own keeps the piece's change images in its queue, and
// neither loses nor reorders anything; writers and other users' streams
// never wait for it (a publish never blocks). Those waiting are retried
// (Stream.retry) whenever bytes are given back, so that a parked stream
// or a connection's member waits without a goroutine. A piece larger
// than a user's share is charged the share, so it is taken once the
// user's other streams hold nothing. A nil budget bounds nothing.
//
// Not counted: a share's history, whose newest entry the share forms
// and keeps for its members whether or not they can take it (bounded by
// historyBytesPerMember but for that one entry), so shares of one member
// each still hold their newest large entry; and what a stream of its
// own holds of the change images it was handed (its subscription's
// queue).
type outputBudget struct {
	size, perUser int64 // 0: no bound
	waitingGauge  prometheus.Gauge

	mu      sync.Mutex
	held    int64
	byUser  map[int64]int64
	waiting map[*Stream]struct{}
}

// newOutputBudget returns the budget of size bytes for the process and
// perUser for a user (0: no bound), nil when neither bounds.
func newOutputBudget(size, perUser int64, waiting prometheus.Gauge) *outputBudget {
	if size <= 0 && perUser <= 0 {
		return nil
	}
	return &outputBudget{size: max(size, 0), perUser: max(perUser, 0), waitingGauge: waiting,
		byUser: map[int64]int64{}, waiting: map[*Stream]struct{}{}}
}

// charge is what n bytes of output of a user (super: the super user)
// are charged: at most a share.
func (b *outputBudget) charge(n int64, super bool) int64 {
	if b.size > 0 {
		n = min(n, b.size)
	}
	if b.perUser > 0 && !super {
		n = min(n, b.perUser)
	}
	return n
}

// take charges n bytes of s's output to the budget and returns what it
// charged, when they fit; otherwise it charges nothing, reports false,
// and retries s once bytes are given back.
func (b *outputBudget) take(s *Stream, n int64) (int64, bool) {
	id, super := s.outputUser()
	c := b.charge(n, super)
	b.mu.Lock()
	defer b.mu.Unlock()
	fits := b.size == 0 || b.held+c <= b.size
	if b.perUser > 0 && !super {
		fits = fits && b.byUser[id]+c <= b.perUser
	}
	if !fits {
		if _, ok := b.waiting[s]; !ok {
			b.waiting[s] = struct{}{}
			b.count(1)
		}
		return 0, false
	}
	if _, ok := b.waiting[s]; ok {
		delete(b.waiting, s)
		b.count(-1)
	}
	b.add(id, c)
	return c, true
}

// grow charges n more bytes of s's output, without waiting: a piece
// that formed more than it was charged before it was formed.
func (b *outputBudget) grow(s *Stream, n int64) {
	id, _ := s.outputUser()
	b.mu.Lock()
	b.add(id, n)
	b.mu.Unlock()
}

// add charges n bytes to user id. The caller holds b.mu.
func (b *outputBudget) add(id, n int64) {
	b.held += n
	b.byUser[id] += n
}

// give gives back n bytes of s's output, and retries the streams
// waiting.
func (b *outputBudget) give(s *Stream, n int64) {
	id, _ := s.outputUser()
	b.mu.Lock()
	b.held -= n
	if b.byUser[id] -= n; b.byUser[id] <= 0 {
		delete(b.byUser, id)
	}
	var retry []*Stream
	if len(b.waiting) > 0 {
		retry = make([]*Stream, 0, len(b.waiting))
		for w := range b.waiting {
			retry = append(retry, w)
		}
	}
	b.mu.Unlock()
	// Outside the lock: a retried stream takes it again. One that does
	// not fit yet stays among those waiting.
	for _, w := range retry {
		w.retry()
	}
}

// forget stops retrying s, which is released.
func (b *outputBudget) forget(s *Stream) {
	b.mu.Lock()
	if _, ok := b.waiting[s]; ok {
		delete(b.waiting, s)
		b.count(-1)
	}
	b.mu.Unlock()
}

// count moves the gauge of streams waiting by d. The caller holds b.mu.
func (b *outputBudget) count(d float64) {
	if b.waitingGauge != nil {
		b.waitingGauge.Add(d)
	}
}

// outputUser returns the id of the user the stream's output is charged
// to, and whether it is the super user (a stream without a grant, in
// tests, is charged as the super user).
func (s *Stream) outputUser() (id int64, super bool) {
	if g := s.spec.Grant; g != nil && g.User != nil {
		return g.User.ID, g.User.Superuser
	}
	return 0, true
}

// takeOutput charges n bytes of output the stream is about to form or
// take (nothing for less than smallOutputBytes, or without a budget); it
// reports false when they do not fit: the stream must wait, forming and
// taking nothing, and is retried once bytes are given back.
func (s *Stream) takeOutput(n int64) bool {
	b := s.e.output
	if b == nil || n < smallOutputBytes {
		return true
	}
	c, ok := b.take(s, n)
	s.outHeld += c
	s.outWaiting = !ok
	return ok
}

// growOutput charges what the stream formed beyond what it was charged,
// when that is smallOutputBytes or more (a piece whose few change images
// made large events), without waiting.
func (s *Stream) growOutput(formed int64) {
	b := s.e.output
	if b == nil || formed < smallOutputBytes || formed <= s.outHeld {
		return
	}
	b.grow(s, formed-s.outHeld)
	s.outHeld = formed
}

// giveOutput gives back what the stream was charged for its output: its
// client's connection took it (or the stream is over).
func (s *Stream) giveOutput() {
	if s.outHeld > 0 {
		s.e.output.give(s, s.outHeld)
		s.outHeld = 0
	}
}

// retry makes whoever serves the stream look at it again: its
// connection's pump, its parker, or its own goroutine.
func (s *Stream) retry() {
	if p := s.pump.Load(); p != nil {
		p.Mark(s)
		return
	}
	s.kick()
}

// formedBytes returns the bytes of evs' payloads and ids.
func formedBytes(evs []sluice.Event) int64 {
	var n int64
	for i := range evs {
		n += int64(len(evs[i].Data) + len(evs[i].ID))
	}
	return n
}
