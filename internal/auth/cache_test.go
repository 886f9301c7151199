package auth

import (
	"context"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// countingStore answers every token with one credential (user 1, token
// 9) at version version, and counts the reads; its access log holds
// changes.
type countingStore struct {
	Store   // the methods the test does not use
	reads   atomic.Int64
	version atomic.Int64
	mu      sync.Mutex
	changes []sluice.AccessChange
	logged  atomic.Int64 // reads of the access log
}

func (s *countingStore) TokenCredential(context.Context, []byte) (*sluice.Credential, error) {
	s.reads.Add(1)
	return &sluice.Credential{User: &sluice.User{ID: 1, Name: "u"}, TokenID: 9, AccessVersion: s.version.Load()}, nil
}

// change logs c at the next version.
func (s *countingStore) change(c sluice.AccessChange) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Version = s.version.Add(1)
	s.changes = append(s.changes, c)
	return c.Version
}

func (s *countingStore) AccessChanges(_ context.Context, after, upTo int64) ([]sluice.AccessChange, error) {
	s.logged.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sluice.AccessChange
	for _, c := range s.changes {
		if c.Version > after && c.Version <= upTo {
			out = append(out, c)
		}
	}
	return out, nil
}

// TestCredentialCache: a remembered credential saves the read until an
// access change that concerns it is seen (by the change feed, or made
// here), it expires, or its own expiry passes. The changes that do not
// concern it are read once for every remembered credential.
func TestCredentialCache(t *testing.T) {
	t.Parallel()
	store := &countingStore{}
	var seen atomic.Int64
	a := New(store, 4, nil, WithCache(seen.Load))
	now := time.Unix(1000, 0)
	a.cache.now = func() time.Time { return now }
	auth := func() *sluice.Credential {
		t.Helper()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer sluice_x")
		c, err := a.Authenticate(r)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	expect := func(reads int64, why string) *sluice.Credential {
		t.Helper()
		c := auth()
		if got := store.reads.Load(); got != reads {
			t.Fatalf("%s: %d reads, want %d", why, got, reads)
		}
		return c
	}
	expect(1, "first request")
	expect(1, "remembered")
	// The change feed reads changes of others: another token revoked,
	// another user's password and role.
	store.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: 1, TokenID: 7})
	store.change(sluice.AccessChange{Kind: sluice.AccessPassword, UserID: 2})
	seen.Store(store.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 2, DatabaseID: 1, Role: sluice.RoleRead}))
	if c := expect(1, "after changes that concern another credential"); c.AccessVersion != 3 {
		t.Fatalf("vouched for at version %d, want 3: the engine reads roles as of it", c.AccessVersion)
	}
	expect(1, "remembered")
	if n := store.logged.Load(); n != 1 {
		t.Fatalf("%d reads of the access log, want 1", n)
	}
	// Its own token revoked (the fake answers it all the same).
	seen.Store(store.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: 1, TokenID: 9}))
	expect(2, "after its token's revocation")
	expect(2, "remembered again at the new version")
	// A change made by this process, concerning its user.
	a.Invalidate(store.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 1, DatabaseID: 1, Role: sluice.RoleRead}))
	expect(3, "after a local change of its user's role")
	a.Invalidate(store.change(sluice.AccessChange{Kind: sluice.AccessUser, UserID: 2}))
	expect(3, "after a local change of another user")
	seen.Store(store.change(sluice.AccessChange{Kind: sluice.AccessDatabase, DatabaseID: 5}))
	expect(4, "after a database's deletion")
	now = now.Add(credentialTTL + time.Second)
	expect(5, "after the TTL")
	a.Invalidate(1) // an older version does not lower the floor
	expect(5, "remembered")
	// More changes than a catch-up reads: forgotten, the log not read.
	logged := store.logged.Load()
	for range maxCatchUp + 1 {
		store.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: 2, TokenID: 1})
	}
	seen.Store(store.version.Load())
	expect(6, "after more changes than a catch-up reads")
	if n := store.logged.Load(); n != logged {
		t.Fatalf("the access log read %d times for more changes than a catch-up reads", n-logged)
	}
	// Changes pruned before they were read: forgotten.
	store.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: 2, TokenID: 1})
	store.mu.Lock()
	store.changes = store.changes[:len(store.changes)-1]
	store.mu.Unlock()
	seen.Store(store.version.Load())
	expect(7, "after changes pruned before they were read")
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

// AccessChanges holds the revocation of the token at version 1.
func (s *revocableStore) AccessChanges(_ context.Context, after, upTo int64) ([]sluice.AccessChange, error) {
	if s.revoked.Load() && after < 1 && upTo >= 1 {
		return []sluice.AccessChange{{Version: 1, Kind: sluice.AccessToken, UserID: 1, TokenID: 9}}, nil
	}
	return nil, nil
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

// TestForgetRefusesLookupsUnderWay: when an access change's version
// cannot be read, the cache is forgotten (Forget), and a lookup of a
// token that began before the change (its revocation) does not remember
// what it read: the next request reads the token again and is refused.
func TestForgetRefusesLookupsUnderWay(t *testing.T) {
	t.Parallel()
	store := &revocableStore{reads: make(chan struct{}, 4), release: make(chan struct{})}
	var seen atomic.Int64
	a := New(store, 4, nil, WithCache(seen.Load))
	try := func(addr string) error {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		r.Header.Set("Authorization", "Bearer sluice_leaked")
		_, err := a.Authenticate(r)
		return err
	}
	before := make(chan error, 1)
	go func() { before <- try("192.0.2.1:1000") }()
	<-store.reads // a lookup that began before the revocation, held
	store.revoked.Store(true)
	a.Forget() // the revocation's version could not be read
	close(store.release)
	if err := <-before; err != nil {
		t.Fatalf("the request that began before the revocation: %v", err)
	}
	if err := try("192.0.2.2:1000"); sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Fatalf("a request after the revocation: %v, want Unauthenticated", err)
	}
}
