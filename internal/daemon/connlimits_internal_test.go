package daemon

import "testing"

// TestConnLimits: the connection bounds docs/security.md gives
// (Connections) for an open-file limit N, a pool of P and max_streams S:
// N − P − 64 in all, that less S waiting (at least 16), a tenth of those
// per address (at least 4); only the waiting ones, 10,000, when N is
// unknown or unlimited.
func TestConnLimits(t *testing.T) {
	for _, c := range []struct {
		files                      uint64
		streams, pg                int
		total, waiting, perAddress int
	}{
		{400, maxStreams(0, 400), 18, 318, 58, 5},
		{65536, maxStreams(0, 65536), 18, 65454, 6577, 657},
		{400, 1000, 18, 318, 16, 4},
		{0, maxStreams(0, 0), 18, 0, 10000, 1000},
		{1 << 40, maxStreams(0, 1<<40), 18, 0, 10000, 1000},
	} {
		l := connLimits(c.files, c.streams, c.pg, nil)
		if l.Total != c.total || l.Waiting != c.waiting || l.PerAddress != c.perAddress || l.AnonymousIdle != anonymousIdleTimeout {
			t.Errorf("connLimits(%d, %d, %d) = %+v, want total %d, waiting %d, per address %d", c.files, c.streams, c.pg, l, c.total, c.waiting, c.perAddress)
		}
	}
}
