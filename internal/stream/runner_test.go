package stream

import (
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestRunnerServesALongQueueOnce marks many streams at once, as a commit
// to every parked stream does, some of them again while they are served:
// each is served, none is lost or served twice for one mark, and the
// queue is empty (and its storage reused) once they are done.
func TestRunnerServesALongQueueOnce(t *testing.T) {
	const n = 5000
	streams := make([]*Stream, n)
	index := map[*Stream]int{}
	for i := range streams {
		streams[i] = &Stream{}
		index[streams[i]] = i
	}
	var mu sync.Mutex
	served := make([]int, n)
	total := 0
	var r runner
	r.start(3, func(s *Stream, _ *[]Entry) bool {
		mu.Lock()
		defer mu.Unlock()
		served[index[s]]++
		total++
		return true
	})
	defer r.stop()
	for _, s := range streams {
		r.mark(s)
	}
	eventually.True(t, wait, "every stream served", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total == n
	})
	// A second round: every stream idle again, each mark served once.
	eventually.True(t, wait, "every stream idle", func() bool {
		for _, s := range streams {
			if s.state.Load() != stateIdle {
				return false
			}
		}
		return true
	})
	for _, s := range streams {
		r.mark(s)
	}
	eventually.True(t, wait, "every stream served again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total == 2*n
	})
	for i, k := range served {
		if k != 2 {
			t.Fatalf("stream %d served %d times, want 2", i, k)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head != 0 || len(r.ready) != 0 {
		t.Fatalf("queue after: head %d, %d queued; want empty", r.head, len(r.ready))
	}
}
