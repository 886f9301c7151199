package changefeed

import (
	"context"

	"github.com/sluice-dev/sluice"
)

// A database's log is rewound when it loses its newest commits (a
// failover to a Postgres standby that had not received them, or a
// restore): it ends at a commit, head, before what readers had read.
// Every subscription that may have received a lost commit, or part of
// one (a large commit is handed on in pieces), ends with a Gone error:
// going on, it would take the commits that reuse the lost sequence
// numbers for the ones it had, and receive their changes after the ones
// it had, silently. The others go on.
//
// A log that lost its newest commits may take new ones before a reader
// looks again, giving them the lost numbers: its end then is not before
// what was read. Every commit has a stamp (sluice.Stamp) no other commit
// of its number shares. The tailer keeps the stamp of the last commit it
// handed on, and each subscription that of the last commit it took
// (Subscription.took): their reads of the log check it in the statement
// that reads the commits (Log.ReadLog's of), and find the commit replaced
// whether commits follow it or not. The tailer then rewinds the hub to
// the commit before (Tailer.replaced), and a catch-up ends its
// subscription. A reader whose commit is still in the log has every
// commit before it as it read them: a log loses its newest commits only.
// A subscription from a client's position knows the commit it names by
// the position's tag (sluice.Position.Tag), if it has one: its catch-up
// reads the log before it goes live, even from the head, the read
// checking the tag, and a commit of that number with another tag ends
// it (replacedError), as a position of a pruned commit would (Gone). A
// position without a tag (made by older versions) is not checked.

// rewind tells the hub that database id's log now ends at commit head,
// before what the tailer had handed on: the subscriptions past the end
// end (lostError). A live one's mark is read under st.mu, which its
// writer, the tailer, holds. A catching-up one's catch-up writes its mark
// without the lock: one whose cursor is past head ends here, any other is
// marked rewound, and its catch-up judges its mark at its next step.
func (h *Hub) rewind(id int64, head int64) {
	st := h.state(id)
	end := sluice.WholeCursor(head)
	st.mu.Lock()
	st.head = end
	h.mu.Lock()
	var victims []*Subscription
	for s := range h.subs {
		if s.db.ID != id {
			continue
		}
		_, live := st.live[s]
		switch {
		case live && end.Less(s.mark()), !live && s.cursor.Load() > head:
			victims = append(victims, s)
		case !live:
			// It may stand inside commit head+1, or be reading the log
			// as it was before.
			if !s.rewound || head < s.rewoundTo {
				s.rewoundTo = head
			}
			s.rewound = true
		}
	}
	h.mu.Unlock()
	for _, s := range victims {
		delete(st.live, s)
		s.live.Store(false)
	}
	st.signal()
	st.mu.Unlock()
	for _, s := range victims {
		s.finish(lostError(s.db, head))
	}
}

// pastRewind reports, when s's log was rewound since its catch-up last
// looked, whether its mark is past the log's end then, and that end. The
// caller is its catch-up, holding st.mu.
func (s *Subscription) pastRewind() (int64, bool) {
	if !s.rewound {
		return 0, false
	}
	s.rewound = false
	return s.rewoundTo, sluice.WholeCursor(s.rewoundTo).Less(s.mark())
}

// rewoundMeanwhile reports whether s's log was rewound since its catch-up
// last looked (pastRewind): what the catch-up read since may be of the log
// before, to be read again once its mark was judged.
func (s *Subscription) rewoundMeanwhile() bool {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.rewound
}

// goneError returns the error s ends with when its catch-up's read of the
// log after mark m answered err, a Gone error: that of a rewind when m
// stands inside a commit that was lost (lostAt), err when it was pruned.
func (h *Hub) goneError(ctx context.Context, s *Subscription, m sluice.Cursor, err error) error {
	hist, herr := h.log.History(ctx, s.db.ID)
	if herr != nil {
		return err
	}
	if head, lost := lostAt(m, hist); lost {
		return lostError(s.db, head)
	}
	return err
}

// lostAt tells, for a read of the log after cursor c answered Gone and
// the log's history h read after it, whether the read found the commit c
// stands inside lost rather than pruned, and the last commit before what
// c has. A read from inside a commit is Gone when the log no longer holds
// that commit; pruning only moves forward, so when h has not pruned it,
// the log lost it, whatever commits it holds now (one may reuse its
// sequence number already).
func lostAt(c sluice.Cursor, h sluice.History) (head int64, lost bool) {
	if c.Part < 0 || h.PrunedSeq > c.Seq {
		return 0, false
	}
	return min(h.LastSeq, c.Seq), true
}

// lostError is the error a subscription of database d ends with when d's
// log was found ending at commit head, before what it may have received,
// or holding other commits after head than it had (Tailer.replaced).
func lostError(d *sluice.Database, head int64) error {
	return sluice.Errorf(sluice.CodeGone, "the commit log of %s now ends at commit %d, before commits this stream may have received, or new commits took their numbers: they were lost (a Postgres failover or a restore); re-read the current state", d.Path(), head)
}

// replacedError is the error a subscription of database d resumed from a
// client's position (its mark m, the tag of its commit in of) ends with
// when the log holds another commit of that number: the client's commit
// was lost, and maybe some before it.
func replacedError(d *sluice.Database, m sluice.Cursor, of sluice.Stamp) error {
	p := m.Position(d.Epoch)
	p.Tag = of.Tag()
	return sluice.ReplacedError(d, "position", p)
}
