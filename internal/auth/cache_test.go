package auth

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
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

// revocableStore knows one API token until revoked is set; a lookup reads
// it as it is when the lookup starts (its snapshot), at version, and the
// first one is held until release.
type revocableStore struct {
	Store   // the methods the test does not use
	reads   chan struct{}
	release chan struct{}
	revoked atomic.Bool
	version atomic.Int64
	held    atomic.Bool
}

func (s *revocableStore) TokenCredential(context.Context, []byte) (*sluice.Credential, error) {
	revoked, v := s.revoked.Load(), s.version.Load()
	s.reads <- struct{}{}
	if s.held.CompareAndSwap(false, true) {
		<-s.release
	}
	if revoked {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "invalid or revoked token")
	}
	return &sluice.Credential{User: &sluice.User{ID: 1, Name: "u"}, TokenID: 9, AccessVersion: v}, nil
}

// TestSharedLookupIsNotReusedAfterAnAccessChange: a request with a bearer
// token that arrives once the token's revocation answered is refused,
// even while a lookup of that token from before the revocation is still
// running: it does not take that lookup's answer, read before the change,
// but reads the token itself. Found by review: concurrent checks of one
// token share one lookup, and a request joining one that began before the
// revocation was answered with the credential it read, its user's
// requests (writes among them) accepted after the revocation answered,
// for as long as the lookup took (Postgres slow, the pool busy).
func TestSharedLookupIsNotReusedAfterAnAccessChange(t *testing.T) {
	// Not parallel: flightWaiters counts the process's goroutines.
	store := &revocableStore{reads: make(chan struct{}, 4), release: make(chan struct{})}
	var seen atomic.Int64
	a := New(store, 4, nil, WithCache(seen.Load))
	try := func() error {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1000"
		r.Header.Set("Authorization", "Bearer sluice_leaked")
		_, err := a.Authenticate(r)
		return err
	}
	before := make(chan error, 1)
	go func() { before <- try() }()
	<-store.reads // a lookup that began before the revocation, held
	// The token is revoked (access version 1), and this process forgets
	// what it read before, as the engine has it do before the
	// revocation's request answers.
	store.revoked.Store(true)
	store.version.Store(1)
	a.Invalidate(1)
	after := make(chan error, 1)
	go func() { after <- try() }()
	// It waits on the held lookup, having joined it.
	eventually.True(t, 10*time.Second, "the request after the revocation joins the lookup", func() bool { return flightWaiters() >= 1 })
	close(store.release)
	if err := <-before; err != nil {
		t.Errorf("the request that began before the revocation: %v", err)
	}
	if err := <-after; sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Errorf("a request after the revocation answered: %v, want Unauthenticated", err)
	}
}
