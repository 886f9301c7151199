package postgres

import "testing"

// TestSupersededCacheIsBounded: the cache of large commits' superseded
// changes holds at most supersededBytes of bitsets, dropping the oldest
// commits first, and keeps none larger than that on its own.
func TestSupersededCacheIsBounded(t *testing.T) {
	var sc supersededCache
	quarter := make(bitset, supersededBytes/8/4)
	for uid := range int64(6) {
		sc.put(uid, quarter)
		if sc.bytes > supersededBytes {
			t.Fatalf("after commit %d the cache holds %d bytes, more than %d", uid, sc.bytes, supersededBytes)
		}
	}
	for uid, want := range []bool{false, false, true, true, true, true} {
		if _, ok := sc.get(int64(uid)); ok != want {
			t.Errorf("commit %d kept: %v, want %v (the oldest go first)", uid, ok, want)
		}
	}
	sc.put(100, make(bitset, supersededBytes/8+1))
	if _, ok := sc.get(100); ok {
		t.Error("a bitset larger than the whole cache was kept")
	}
	var b bitset
	b.add(3)
	b.add(130)
	if !b.has(3) || !b.has(130) || b.has(4) || b.has(129) || b.has(1000) || b.has(-1) {
		t.Errorf("bitset %b", b)
	}
}
