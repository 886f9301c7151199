package engine

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
)

// farEdgeEntries bounds the databases whose farEdge an Engine keeps, each
// a few dozen bytes.
const farEdgeEntries = 4096

// farEdge is what a subscription's event found too far back to read as
// of (ReadAsOfEvent) learnt about its database's log: the oldest commit
// from whose end the log to its head then held at most most changes,
// seq. The log from the end of any commit before seq held more than most
// then, and holds more ever after: the log only grows at its head. So
// the events of those commits are refused with err without counting the
// log again, each count reading up to most + 2 commits' rows: a stream
// resumed N commits too far back counted N times.
type farEdge struct {
	epoch string
	most  int64
	seq   int64
	err   PastRangeError
}

// farEdges holds the farEdge of each database, by id: the newest one
// found, bounded to farEdgeEntries databases (the least recently used
// forgotten).
type farEdges struct {
	mu  sync.Mutex // makes note's read and write of an entry one step
	lru *lru.Cache[int64, farEdge]
}

func newFarEdges() *farEdges {
	l, err := lru.New[int64, farEdge](farEdgeEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &farEdges{lru: l}
}

// tooFar returns the error of the event at pos, a position of database d,
// under bound most, when a farEdge says that it is too far back, nil when
// none says so (it may be, or not).
func (f *farEdges) tooFar(d *sluice.Database, pos sluice.Position, most int64) *PastRangeError {
	f.mu.Lock()
	edge, ok := f.lru.Get(d.ID)
	f.mu.Unlock()
	if !ok || edge.epoch != d.Epoch || edge.most != most || pos.Seq >= edge.seq {
		return nil
	}
	err := edge.err
	return &err
}

// sawHead forgets d's farEdge when it was found at a head newer than
// head, the head of d's log a reader saw: the log grows only at its head,
// but a Postgres failover to a standby that lacked its last commits, or
// a restore, moves it back, and what was too far back then may no longer
// be.
func (f *farEdges) sawHead(d *sluice.Database, head sluice.Position) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.lru.Peek(d.ID); ok && old.epoch == d.Epoch && old.err.Head.Seq > head.Seq {
		f.lru.Remove(d.ID)
	}
}

// note records that the log of database d, with its head at err.Head,
// holds more than most changes (or commits, as err says) from the end of
// every commit before commit seq. An edge found at an older head (a
// reader's snapshot taken earlier, or on a lagging replica) does not
// replace a newer one.
func (f *farEdges) note(d *sluice.Database, most, seq int64, err PastRangeError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.lru.Peek(d.ID); ok && old.epoch == d.Epoch && old.most == most && old.seq >= seq {
		return
	}
	f.lru.Add(d.ID, farEdge{epoch: d.Epoch, most: most, seq: seq, err: err})
}
