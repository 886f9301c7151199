package gqltransport

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/stream"
)

// deepResult returns a live query's result whose one document holds 40
// nested objects, each under a key of 500 bytes, the innermost 2,000
// numbers (number i is i+add): 44 KB, each number's path 20 KB.
func deepResult(add int) []byte {
	var b strings.Builder
	b.WriteString(`{"D":[{"_id":"D/a","data":`)
	for i := range 40 {
		b.WriteString(`{"` + strings.Repeat(string(rune('a'+i%26)), 500) + `":`)
	}
	b.WriteByte('{')
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"l%d":%d`, i, i+add)
	}
	b.WriteString(strings.Repeat("}", 41) + "}]}")
	return []byte(b.String())
}

// TestLivePatchCostIsBounded: a live query with patches whose new result
// changes every number of a deep document with long keys publishes the
// whole result (its patch would be 40 MB against 44 KB), and finding that
// out allocates about what decoding the two results does, not the 40 MB
// patch (260 MB of it, before). Not parallel: it counts the process's
// allocations.
func TestLivePatchCostIsBounded(t *testing.T) {
	prev, next := deepResult(0), deepResult(1)
	g := &liveGroup{b: &liveBatcher{}}
	e := &liveEvaluator{patch: true, ran: true, data: prev, revision: 1}
	var out stream.Settled
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g.settle(e, next, nil, sluice.Position{}, &out)
	runtime.ReadMemStats(&after)
	if len(out.Events) != 1 || len(out.Delta) != 0 {
		t.Fatalf("settle published %d results and %d patches, want the whole result alone", len(out.Events), len(out.Delta))
	}
	// Decoding the two results takes about 2.5 MB.
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("settling a %d-byte result allocated %d bytes, more than 8 MiB", len(next), n)
	}
}
