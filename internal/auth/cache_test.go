package auth

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// countingStore answers every token with one credential at version
// version, and counts the reads.
type countingStore struct {
	Store   // the methods the test does not use
	reads   atomic.Int64
	version atomic.Int64
}

func (s *countingStore) TokenCredential(context.Context, []byte) (*sluice.Credential, error) {
	s.reads.Add(1)
	return &sluice.Credential{User: &sluice.User{ID: 1, Name: "u"}, TokenID: 9, AccessVersion: s.version.Load()}, nil
}

// TestCredentialCache: a remembered credential saves the read until an
// access change is seen (by the change feed, or made here), it expires,
// or its own expiry passes.
func TestCredentialCache(t *testing.T) {
	t.Parallel()
	store := &countingStore{}
	var seen atomic.Int64
	a := New(store, 4, nil, WithCache(seen.Load))
	now := time.Unix(1000, 0)
	a.cache.now = func() time.Time { return now }
	auth := func() {
		t.Helper()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer sluice_x")
		if _, err := a.Authenticate(r); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(reads int64, why string) {
		t.Helper()
		auth()
		if got := store.reads.Load(); got != reads {
			t.Fatalf("%s: %d reads, want %d", why, got, reads)
		}
	}
	expect(1, "first request")
	expect(1, "remembered")
	store.version.Store(1)
	seen.Store(1) // the change feed read an access change
	expect(2, "after the change feed saw a change")
	expect(2, "remembered again at the new version")
	a.Invalidate(2) // a change made by this process
	store.version.Store(2)
	expect(3, "after a local change")
	now = now.Add(credentialTTL + time.Second)
	expect(4, "after the TTL")
	a.Invalidate(1) // an older version does not lower the floor
	expect(4, "remembered")
}
