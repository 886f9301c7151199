package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// fail counts a failed check of user's password from addr.
func fail(t *testing.T, th *Throttle, addr, user string) {
	t.Helper()
	at, err := th.Begin(addr, user)
	if err != nil {
		t.Fatal(err)
	}
	at.Fail()
}

// TestThrottleWindow: max failures of one user from one address are
// allowed per window; the next attempt is refused with the time left in
// the window as its Retry, until the window ends. A success forgets the
// user's failures.
func TestThrottleWindow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(3, time.Minute, func() time.Time { return now })
	const addr = "192.0.2.7:51000"
	for range 3 {
		if err := th.Check(addr, "bea"); err != nil {
			t.Fatal(err)
		}
		fail(t, th, addr, "bea")
		now = now.Add(10 * time.Second)
	}
	err := th.Check(addr, "bea")
	e, ok := err.(*sluice.Error)
	if !ok || e.Code != sluice.CodeTooMany || e.Retry != 30*time.Second {
		t.Fatalf("the fourth attempt: %#v, want TooMany with 30s left", err)
	}
	if r := sluice.RetryAfter(err); r != "30" {
		t.Errorf("Retry-After %q, want 30", r)
	}
	// Another port of the address is the same client; another user is not.
	if th.Check("192.0.2.7:52000", "bea") == nil {
		t.Error("the same address from another port is not throttled")
	}
	if err := th.Check(addr, "otto"); err != nil {
		t.Errorf("another user from the address: %v", err)
	}
	if err := th.Check("192.0.2.8:51000", "bea"); err != nil {
		t.Errorf("the user from another address: %v", err)
	}
	now = now.Add(30 * time.Second)
	if err := th.Check(addr, "bea"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	fail(t, th, addr, "bea")
	fail(t, th, addr, "bea")
	th.Succeed(addr, "bea")
	fail(t, th, addr, "bea")
	fail(t, th, addr, "bea")
	if err := th.Check(addr, "bea"); err != nil {
		t.Fatalf("two failures after a success: %v", err)
	}
}

// TestThrottleAddress: ten times max failures from one address, over any
// user names, throttle that address for every name.
func TestThrottleAddress(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(2, time.Minute, func() time.Time { return now })
	for i := range 20 {
		fail(t, th, "[2001:db8::1]:4000", "user"+strconv.Itoa(i))
	}
	// Any address of the /64 counts as the same.
	if err := th.Check("[2001:db8::ffff:1]:5000", "someone"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("an address past the limit: %v", err)
	}
	if err := th.Check("[2001:db8:0:1::1]:5000", "someone"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
}

// TestThrottleNetwork: an IPv6 client that hops between the /64s of its
// /56 (or /48) is held to a few /64s' worth of failures over all of them:
// past 4 × an address's limit in one /56 a /64 of it that failed nothing
// is refused, the network named; a /64 of another /56 is not; and past
// 16 × in one /48 a /56 of it that failed nothing is refused too. Found
// by review: only the /64 was counted, so a /56 had 256 /64s' worth of
// bcrypts a window. IPv4 addresses count alone, as before.
func TestThrottleNetwork(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(2, time.Minute, func() time.Time { return now })
	const perAddress = addressFactor * 2 // a /64's limit: 20
	// addr is an address of /64 number s64 of /56 number s56 of
	// 2001:db8::/48.
	addr := func(s56, s64 int) string { return fmt.Sprintf("[2001:db8:0:%02x%02x::1]:4000", s56, s64) }
	// 4 /64s of 2001:db8:0:100::/56, each one failure short of its
	// limit, then 4 more from a fifth: the /56's limit is 80.
	for s64 := range 4 {
		for j := range perAddress - 1 {
			fail(t, th, addr(1, s64), "user"+strconv.Itoa(j))
		}
	}
	for j := range 4 {
		fail(t, th, addr(1, 0xff), "user"+strconv.Itoa(j))
	}
	_, err := th.Begin(addr(1, 0xee), "someone")
	if sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(sluice.ErrorMessage(err), "2001:db8:0:100::/56") {
		t.Fatalf("a fresh /64 of a /56 past its limit: %v, want TooMany naming 2001:db8:0:100::/56", err)
	}
	if err := th.Check(addr(1, 0xee), "someone"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("Check of a fresh /64 of a /56 past its limit: %v", err)
	}
	if err := th.Check(addr(2, 0), "someone"); err != nil {
		t.Fatalf("a /64 of another /56: %v", err)
	}
	// The /48's limit is 320, 80 of them counted above: 4 /64s of 15
	// failures in each of 4 more /56s (60 each, under their limit).
	for s56 := 2; s56 < 6; s56++ {
		for s64 := range 4 {
			for j := range 15 {
				fail(t, th, addr(s56, s64), "user"+strconv.Itoa(j))
			}
		}
	}
	if _, err := th.Begin(addr(0xff, 0), "someone"); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(sluice.ErrorMessage(err), "2001:db8::/48") {
		t.Fatalf("a fresh /56 of a /48 past its limit: %v, want TooMany naming 2001:db8::/48", err)
	}
	if err := th.Check("[2001:db9::1]:4000", "someone"); err != nil {
		t.Fatalf("another /48: %v", err)
	}
	// IPv4: each address its own limit only.
	for j := range perAddress - 1 {
		fail(t, th, "192.0.2.1:4000", "user"+strconv.Itoa(j))
	}
	fail(t, th, "192.0.2.2:4000", "user")
	if err := th.Check("192.0.2.3:4000", "someone"); err != nil {
		t.Fatalf("another IPv4 address: %v", err)
	}
}

func TestAddressKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.1:80":              "192.0.2.1",
		"[::ffff:192.0.2.1]:80":     "192.0.2.1",
		"[2001:db8:1:2:3::4]:443":   "2001:db8:1:2::/64",
		"not an address":            "not an address",
		"[fe80::1%eth0]:80":         "fe80::/64",
		"192.0.2.1":                 "192.0.2.1",
		"[2001:db8:1:2:3::4%x]:443": "2001:db8:1:2::/64",
	} {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// refusingStore refuses every bearer token and stream ticket, counting
// the reads.
type refusingStore struct {
	Store // the methods the test does not use
	reads atomic.Int64
}

func (s *refusingStore) TokenCredential(context.Context, []byte) (*sluice.Credential, error) {
	s.reads.Add(1)
	return nil, sluice.Errorf(sluice.CodeUnauthenticated, "invalid or revoked API token")
}

func (s *refusingStore) RedeemStreamTicket(context.Context, []byte) (*sluice.Credential, string, error) {
	s.reads.Add(1)
	return nil, "", sluice.Errorf(sluice.CodeUnauthenticated, "invalid stream ticket")
}

// TestAnonymousGuessesThrottled: failed bearer tokens and stream tickets
// are counted toward their address's limit (ten times the per-user one);
// past it they are refused with TooMany before any read of the store (a
// Postgres round trip), and another address is not affected.
func TestAnonymousGuessesThrottled(t *testing.T) {
	t.Parallel()
	store := &refusingStore{}
	a := New(store, 4, nil, WithThrottle(NewThrottle(3, time.Hour, time.Now)))
	bearer := func(addr string, i int) error {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		r.Header.Set("Authorization", "Bearer sluice_guess"+strconv.Itoa(i))
		_, err := a.Authenticate(r)
		return err
	}
	ticket := func(addr string) error {
		_, err := a.RedeemTicket(context.Background(), addr, TicketPrefix+strings.Repeat("A", base64.RawURLEncoding.EncodedLen(ticketBytes)), "")
		return err
	}
	for i := range 15 { // 30 failures: the address's limit for a per-user 3
		if err := bearer("192.0.2.1:1000", i); sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Fatalf("guess %d: %v", i, err)
		}
		if err := ticket("192.0.2.1:1000"); sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Fatalf("ticket guess %d: %v", i, err)
		}
	}
	reads := store.reads.Load()
	for i := range 100 {
		if err := bearer("192.0.2.1:1001", 100+i); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "failed sign-ins from this address") {
			t.Fatalf("guess past the limit: %v", err)
		}
		if err := ticket("192.0.2.1:1001"); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "failed sign-ins from this address") {
			t.Fatalf("ticket guess past the limit: %v", err)
		}
	}
	if got := store.reads.Load(); got != reads {
		t.Errorf("throttled guesses read the store %d times, want none", got-reads)
	}
	if err := bearer("192.0.2.2:1000", 0); sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Errorf("another address: %v", err)
	}
}

// heldStore refuses every bearer token and stream ticket, as
// refusingStore does, once release is closed: each read first says so on
// reads, then waits.
type heldStore struct {
	Store          // the methods the test does not use
	reads, release chan struct{}
}

func (s *heldStore) TokenCredential(context.Context, []byte) (*sluice.Credential, error) {
	s.reads <- struct{}{}
	<-s.release
	return nil, sluice.Errorf(sluice.CodeUnauthenticated, "invalid or revoked API token")
}

func (s *heldStore) RedeemStreamTicket(context.Context, []byte) (*sluice.Credential, string, error) {
	s.reads <- struct{}{}
	<-s.release
	return nil, "", sluice.Errorf(sluice.CodeUnauthenticated, "invalid stream ticket")
}

// TestConcurrentAnonymousGuessesThrottled: bearer tokens and stream
// tickets guessed at once from one address are admitted before their
// read of the store (a Postgres round trip) while the address's failures
// and the reads running stay below its limit; the others are answered
// TooMany at once. So 300 guesses sent together with a per-user limit of
// 3 read the store 30 times, the address's limit, and the address is
// then blocked. (Checked only for a block, they all read the store
// before the first failed: 300 reads here; 72 and 144 of 300 over HTTP.)
func TestConcurrentAnonymousGuessesThrottled(t *testing.T) {
	t.Parallel()
	const n, limit = 300, 30
	for _, kind := range []string{"bearer token", "stream ticket"} {
		store := &heldStore{reads: make(chan struct{}, n), release: make(chan struct{})}
		a := New(store, 4, nil, WithThrottle(NewThrottle(3, time.Hour, time.Now)))
		guess := func(i int) error {
			if kind == "stream ticket" {
				secret := fmt.Sprintf("%s%0*d", TicketPrefix, base64.RawURLEncoding.EncodedLen(ticketBytes), i)
				_, err := a.RedeemTicket(context.Background(), "192.0.2.1:1000", secret, "")
				return err
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1000"
			r.Header.Set("Authorization", "Bearer sluice_guess"+strconv.Itoa(i))
			_, err := a.Authenticate(r)
			return err
		}
		answers := make(chan error, n)
		for i := range n {
			go func() { answers <- guess(i) }()
		}
		// Every guess reads the store, where it waits, or is answered
		// (after waiting addressWait for a place, which none frees):
		// once all have done one or the other, every guess was sent
		// while the admitted ones were still waiting.
		reads := 0
		for answered := 0; reads+answered < n; {
			select {
			case <-store.reads:
				reads++
			case err := <-answers:
				if sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "being checked at once") {
					t.Fatalf("%s: a guess answered while %d read the store: %v, want TooMany", kind, reads, err)
				}
				answered++
			}
		}
		close(store.release)
		for range reads {
			if err := <-answers; sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
				t.Errorf("%s: a guess that read the store: %v", kind, err)
			}
		}
		if reads != limit {
			t.Errorf("%s: %d guesses sent at once read the store %d times, want %d (the address's limit)", kind, n, reads, limit)
		}
		if err := guess(n); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "failed sign-ins from this address") {
			t.Errorf("%s: a guess after the limit's failures: %v, want TooMany", kind, err)
		}
	}
}

// userStore holds one user, bea, whose password is hash's.
type userStore struct {
	Store // the methods the test does not use
	hash  string
}

func (s *userStore) PasswordCredential(_ context.Context, name string) (*sluice.Credential, error) {
	if name != "bea" {
		return nil, sluice.Errorf(sluice.CodeNotFound, "no user %s", name)
	}
	return &sluice.Credential{User: &sluice.User{Name: "bea"}, PasswordHash: s.hash}, nil
}

// readsStore is a userStore that tells reads of a password's hash on
// reads.
type readsStore struct {
	userStore
	reads chan string
}

func (s *readsStore) PasswordCredential(ctx context.Context, name string) (*sluice.Credential, error) {
	s.reads <- name
	return s.userStore.PasswordCredential(ctx, name)
}

// TestSameGuessAtOnceIsOneCheckForAnyName: the same wrong password sent 8
// times at once from one address shares one bcrypt check, answered 401
// to each, whether the user exists (bea) or not (nobody), with the
// throttle's limit 3. Found by review: an unknown name's guesses ran a
// decoy bcrypt each and were throttled apart (3 × 401, 5 × 429, 3
// bcrypts), where an existing user's shared one (8 × 401, 1 bcrypt):
// the answers and the work told which names exist.
func TestSameGuessAtOnceIsOneCheckForAnyName(t *testing.T) {
	// Not parallel: flightWaiters counts the process's goroutines.
	hash, err := bcrypt.GenerateFromPassword([]byte("bea-password"), 4)
	if err != nil {
		t.Fatal(err)
	}
	const guesses, limit = 8, 3
	for _, user := range []string{"bea", "nobody"} {
		store := &readsStore{userStore: userStore{hash: string(hash)}, reads: make(chan string, guesses)}
		var hashes atomic.Int32
		hashing, release := make(chan struct{}, guesses), make(chan struct{})
		a := New(store, 4, func() {
			hashes.Add(1)
			hashing <- struct{}{}
			<-release
		}, WithThrottle(NewThrottle(limit, time.Hour, time.Now)))
		answers := make(chan error, guesses)
		for i := range guesses {
			go func() {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:" + strconv.Itoa(1000+i)
				r.SetBasicAuth(user, "the-same-guess")
				_, err := a.Authenticate(r)
				answers <- err
			}()
		}
		// One check runs (held here): the others have joined it.
		<-hashing
		eventually.True(t, 10*time.Second, "every guess waits for the check", func() bool { return flightWaiters() == guesses-1 })
		close(release)
		codes := map[sluice.Code]int{}
		for range guesses {
			codes[sluice.ErrorCode(<-answers)]++
		}
		if codes[sluice.CodeUnauthenticated] != guesses || hashes.Load() >= limit {
			t.Errorf("%d guesses at once of one password for %s: %v, %d bcrypts; want %d × Unauthenticated and one shared bcrypt, as for any name",
				guesses, user, codes, hashes.Load(), guesses)
		}
	}
}

// TestPasswordChecksAtOnceAreBounded: past its places for bcrypt checks
// running at once, a password check from any address is answered
// TooMany without a check, and is not counted as a failure.
func TestPasswordChecksAtOnceAreBounded(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("bea-password"), 4)
	if err != nil {
		t.Fatal(err)
	}
	running, release := make(chan struct{}), make(chan struct{})
	a := New(&userStore{hash: string(hash)}, 4, func() { running <- struct{}{}; <-release },
		WithThrottle(NewThrottle(3, time.Hour, time.Now)))
	a.hashing = make(chan struct{}, 2)
	try := func(addr, user, password string) error {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		r.SetBasicAuth(user, password)
		_, err := a.Authenticate(r)
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- try("192.0.2.1:1000", "bea", "guess") }()
	go func() { errs <- try("192.0.2.2:1000", "nobody", "guess") }()
	<-running
	<-running
	// Both places taken: the right password, from the guesses' address
	// and from another, waits for its turn; it is not refused (answered
	// 429 at once, checks from many addresses kept a user out).
	rights := make(chan error, 2)
	for _, addr := range []string{"192.0.2.1:1001", "192.0.2.3:1000"} {
		go func() { rights <- try(addr, "bea", "bea-password") }()
	}
	go func() {
		for range running {
		}
	}()
	close(release)
	for range 2 {
		if err := <-errs; sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Errorf("a check that ran: %v", err)
		}
	}
	for range 2 {
		if err := <-rights; err != nil {
			t.Errorf("the right password while the places were taken: %v", err)
		}
	}
	// A check whose request ends while it waits gives up.
	running2, release2 := make(chan struct{}), make(chan struct{})
	b := New(&userStore{hash: string(hash)}, 4, func() { running2 <- struct{}{}; <-release2 }, WithThrottle(NewThrottle(3, time.Hour, time.Now)))
	b.hashing = make(chan struct{}, 1)
	go func() {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.9:1000"
		r.SetBasicAuth("bea", "guess")
		_, _ = b.Authenticate(r)
	}()
	<-running2
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	r.RemoteAddr = "192.0.2.10:1000"
	r.SetBasicAuth("bea", "bea-password")
	if _, err := b.Authenticate(r); !errors.Is(err, context.Canceled) {
		t.Errorf("a check whose request ended while it waited: %v", err)
	}
	close(release2)
}

// TestBlockedAddressesStayBlocked: an address and a user name from it
// past their limits stay blocked for their window however many other
// failures follow, and are not pushed out of the table by them (found by
// review: blocked entries were read without refreshing their recency, so
// the LRU dropped them first once 20,000 newer entries arrived; 200 IPv6
// /64s × 100 failures unblocked a blocked address within its window).
func TestBlockedAddressesStayBlocked(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(3, time.Hour, func() time.Time { return now })
	for range 3 {
		fail(t, th, "192.0.2.1:1000", "bea")
	}
	for i := range 30 {
		fail(t, th, "192.0.2.2:1000", "user"+strconv.Itoa(i))
	}
	// 20,000 failures from 1,000 other addresses, each below its limits:
	// 21,000 entries.
	for a := range 1000 {
		addr := "[2001:db8:" + strconv.FormatInt(int64(a), 16) + "::1]:1000"
		for u := range 20 {
			fail(t, th, addr, "user"+strconv.Itoa(u))
		}
	}
	now = now.Add(59 * time.Minute)
	if err := th.Check("192.0.2.1:1000", "bea"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Errorf("the blocked user name from its address after 20,000 other failures: %v", err)
	}
	if err := th.Check("192.0.2.2:1000", "anyone"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Errorf("the blocked address after 20,000 other failures: %v", err)
	}
	now = now.Add(time.Minute)
	if err := th.Check("192.0.2.1:1000", "bea"); err != nil {
		t.Errorf("the user name once its window ended: %v", err)
	}
}

// TestThrottleMemoryIsBoundedByEntries: the throttle's table holds the
// same whatever the length of the user names tried: 200 addresses × 100
// failures of 12 KB names fill it and take the heap up by a few MiB
// (found by review: keyed by the names themselves, the same loop held
// 234 MiB).
func TestThrottleMemoryIsBoundedByEntries(t *testing.T) {
	th := NewThrottle(10, time.Hour, time.Now)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	long := strings.Repeat("n", 12<<10)
	for a := range 200 {
		addr := "[2001:db8:" + strconv.FormatInt(int64(a), 16) + "::1]:1000"
		for u := range 100 {
			fail(t, th, addr, strconv.Itoa(u)+long)
		}
	}
	grew := int64(heap()) - int64(before)
	runtime.KeepAlive(th)
	t.Logf("20,000 failures with 12 KB names: heap %+.1f MiB", float64(grew)/(1<<20))
	if grew > 16<<20 {
		t.Errorf("the throttle's table holds %.1f MiB, want a few", float64(grew)/(1<<20))
	}
}

// TestPanickingCheckGivesItsPlaceBack: a password check that panics
// (here the test hook; bcrypt or the decoy in principle) still gives back
// its place among the checks running and settles its throttle attempt,
// so the next check runs.
func TestPanickingCheckGivesItsPlaceBack(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("bea-password"), 4)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	a := New(&userStore{hash: string(hash)}, 4, func() {
		if calls.Add(1) == 1 {
			panic("the first check panics")
		}
	}, WithThrottle(NewThrottle(3, time.Hour, time.Now)))
	a.hashing = make(chan struct{}, 1)
	try := func(password string) (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
		r.RemoteAddr = "192.0.2.1:1000"
		r.SetBasicAuth("bea", password)
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("panic: %v", v)
			}
		}()
		_, err = a.Authenticate(r)
		return err
	}
	if err := try("guess"); err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("the first check: %v", err)
	}
	if err := try("bea-password"); err != nil {
		t.Fatalf("the check after one that panicked: %v", err)
	}
}

// validHeldStore knows one API token, whose lookups are held until release.
type validHeldStore struct {
	Store   // the methods the test does not use
	reads   chan struct{}
	release chan struct{}
}

func (s *validHeldStore) TokenCredential(context.Context, []byte) (*sluice.Credential, error) {
	s.reads <- struct{}{}
	<-s.release
	return &sluice.Credential{User: &sluice.User{ID: 7, Name: "app"}, TokenID: 1}, nil
}

// TestConcurrentValidTokenNotThrottled: one valid token not remembered
// (after an access change or credentialTTL), sent by 150 requests at once
// from one address (an app server, a reverse proxy), past the address's
// 100 places: all are answered with its credential, sharing one lookup.
// (Admitted one by one, 100 read the store and 50 were answered 429.)
func TestConcurrentValidTokenNotThrottled(t *testing.T) {
	t.Parallel()
	const n = 150
	store := &validHeldStore{reads: make(chan struct{}, n), release: make(chan struct{})}
	a := New(store, 4, nil, WithThrottle(NewThrottle(10, time.Minute, time.Now)))
	answers := make(chan error, n)
	for range n {
		go func() {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.5:1000"
			r.Header.Set("Authorization", "Bearer sluice_validtoken")
			c, err := a.Authenticate(r)
			if err == nil && c.User.Name != "app" {
				err = fmt.Errorf("credential of %q", c.User.Name)
			}
			answers <- err
		}()
	}
	// The store holds the lookups until nothing happens for a while: every
	// request was sent while the first lookup was held.
	reads, answered := 0, 0
	quiet := time.NewTimer(500 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case <-store.reads:
			reads++
		case err := <-answers:
			t.Errorf("answered while the lookup was held: %v", err)
			answered++
		case <-quiet.C:
			waiting = false
		}
	}
	close(store.release)
	for ; answered < n; answered++ {
		if err := <-answers; err != nil {
			t.Errorf("a request with a valid token: %v", err)
		}
	}
	for len(store.reads) > 0 {
		<-store.reads
		reads++
	}
	if reads < 1 || reads > 3 {
		t.Errorf("%d requests at once with one token read the store %d times, want 1 (a few at most)", n, reads)
	}
}

// TestAddressCheckWaitsForAPlace: a check of a credential naming no user
// that finds its address's places taken waits for one (BeginAddress),
// is admitted when a check settles, is answered 429 once the address is
// blocked, and after addressWait when no place is freed.
func TestAddressCheckWaitsForAPlace(t *testing.T) {
	t.Parallel()
	th := NewThrottle(1, time.Hour, time.Now) // 10 places per address
	const addr = "192.0.2.9:1000"
	var held []*Attempt
	for range addressFactor {
		at, err := th.BeginAddress(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, at)
	}
	begin := func() chan error {
		done := make(chan error, 1)
		go func() {
			at, err := th.BeginAddress(context.Background(), addr)
			if err == nil {
				held = append(held, at) // read only after done
			}
			done <- err
		}()
		return done
	}
	done := begin()
	select {
	case err := <-done:
		t.Fatalf("admitted with every place taken: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	held[0].Release()
	if err := <-done; err != nil {
		t.Fatalf("a check waiting when a place was freed: %v", err)
	}
	held = held[1:]
	// No place is freed: refused after addressWait.
	start := time.Now()
	if err := <-begin(); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "being checked at once") {
		t.Fatalf("a check with no place freed: %v, want TooMany", err)
	}
	if d := time.Since(start); d < addressWait {
		t.Errorf("refused after %v, want the wait %v", d, addressWait)
	}
	// The checks fail: the address is blocked, and a check waiting (or
	// come after they failed) is answered with the block.
	done = begin()
	for _, at := range held {
		at.Fail()
	}
	if err := <-done; sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "failed sign-ins from this address") {
		t.Fatalf("a check waiting when the address was blocked: %v, want TooMany", err)
	}
	// A check whose request ends stops waiting.
	th2 := NewThrottle(1, time.Hour, time.Now)
	for range addressFactor {
		if _, err := th2.BeginAddress(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := th2.BeginAddress(ctx, addr); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("a check whose request ended: %v, want TooMany", err)
	}
	if d := time.Since(start); d >= addressWait {
		t.Errorf("a check whose request ended waited %v", d)
	}
}

// TestAnonymousAndPasswordFailuresCountApart: an address's failed bearer
// tokens and tickets block its credentials that name no user, not its
// passwords, and its failed passwords block its passwords, not those.
// Counted together (found by review), 101 bogus bearer tokens, which cost
// no bcrypt, got the right password of every user of the address answered
// 429, though docs/security.md says they block the address's bearer tokens
// and tickets.
func TestAnonymousAndPasswordFailuresCountApart(t *testing.T) {
	t.Parallel()
	th := NewThrottle(3, time.Hour, time.Now)
	for range 30 { // the address's limit for a per-user 3
		at, err := th.BeginAddress(context.Background(), "192.0.2.1:1000")
		if err != nil {
			t.Fatal(err)
		}
		at.Fail()
	}
	if err := th.CheckAddress("192.0.2.1:1000"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Errorf("bearer token past the limit: %v", err)
	}
	if err := th.Check("192.0.2.1:1000", "admin"); err != nil {
		t.Errorf("password after the failed bearer tokens: %v", err)
	}
	at, err := th.Begin("192.0.2.1:1000", "admin")
	if err != nil {
		t.Fatalf("password check after the failed bearer tokens: %v", err)
	}
	at.Release()

	for i := range 30 {
		fail(t, th, "192.0.2.2:1000", "user"+strconv.Itoa(i))
	}
	if err := th.Check("192.0.2.2:1000", "admin"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Errorf("password past the address's limit: %v", err)
	}
	if err := th.CheckAddress("192.0.2.2:1000"); err != nil {
		t.Errorf("bearer token after the failed passwords: %v", err)
	}
	if _, err := th.BeginAddress(context.Background(), "192.0.2.2:1000"); err != nil {
		t.Errorf("bearer check after the failed passwords: %v", err)
	}
}

// TestPasswordGuessesPastTheChecksRunningReadNothing: once the password
// checks running of a user name from an address, or of the address, take
// every place the throttle admits, another guess of them is answered
// TooMany before its user is read (a Postgres round trip), as a bearer
// token past its address's places is. Found by review: the user was read
// first and the guess refused only after, so guesses sent while the
// admitted ones ran their bcrypt, a second or more, each cost a round
// trip, however many were sent.
func TestPasswordGuessesPastTheChecksRunningReadNothing(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("bea-password"), 4)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 3 // a user name's; the address's is ten times that
	store := &readsStore{userStore: userStore{hash: string(hash)}, reads: make(chan string, 100)}
	running, release := make(chan struct{}, 10*limit), make(chan struct{})
	a := New(store, 4, func() { running <- struct{}{}; <-release }, WithThrottle(NewThrottle(limit, time.Hour, time.Now)))
	a.hashing = make(chan struct{}, 10*limit)
	try := func(user, password string) error {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1000"
		r.SetBasicAuth(user, password)
		_, err := a.Authenticate(r)
		return err
	}
	answers := make(chan error, 10*limit)
	start := func(user, password string) {
		go func() { answers <- try(user, password) }()
		<-running // admitted, and held in its bcrypt
		<-store.reads
	}
	guess := func(user, password, want string) {
		t.Helper()
		if err := try(user, password); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), want) {
			t.Fatalf("guess %s:%s: %v, want TooMany (%s)", user, password, err, want)
		}
		select {
		case name := <-store.reads:
			t.Errorf("guess %s:%s, refused, read user %s", user, password, name)
		default:
		}
	}
	// bea's places are taken: her next guesses read nothing.
	for i := range limit {
		start("bea", fmt.Sprintf("guess-%d", i))
	}
	for i := range 5 {
		guess("bea", fmt.Sprintf("more-%d", i), "as user bea from this address are being checked at once")
	}
	// The address's places are taken: so do guesses of any name.
	for i := range 9 * limit {
		start(fmt.Sprintf("user-%d", i), "guess")
	}
	for i := range 5 {
		guess(fmt.Sprintf("other-%d", i), "guess", "from this address are being checked at once")
	}
	close(release)
	for range 10 * limit {
		if err := <-answers; sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Errorf("a guess that was checked: %v", err)
		}
	}
}

// TestSameGuessAtOnceReadsTheUserOnce: one wrong password sent many times
// at once from one address reads its user once, as one bearer token sent
// so is looked up once, and shares one bcrypt. Found by review: they
// shared the bcrypt alone, each reading the user first, so a burst of one
// guess cost as many Postgres round trips as requests and counted one
// failure; bursts of other names, as many as the address's limit of
// failures allowed.
func TestSameGuessAtOnceReadsTheUserOnce(t *testing.T) {
	// Not parallel: flightWaiters counts the process's goroutines.
	hash, err := bcrypt.GenerateFromPassword([]byte("bea-password"), 4)
	if err != nil {
		t.Fatal(err)
	}
	const guesses = 20
	store := &readsStore{userStore: userStore{hash: string(hash)}, reads: make(chan string, guesses)}
	hashing, release := make(chan struct{}, guesses), make(chan struct{})
	a := New(store, 4, func() {
		hashing <- struct{}{}
		<-release
	}, WithThrottle(NewThrottle(3, time.Hour, time.Now)))
	answers := make(chan error, guesses)
	for range guesses {
		go func() {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1000"
			r.SetBasicAuth("bea", "the-same-guess")
			_, err := a.Authenticate(r)
			answers <- err
		}()
	}
	<-hashing // one check runs, held
	// Every guess has joined it, or read the user for a check of its own.
	eventually.True(t, 10*time.Second, "every guess waits for the check", func() bool { return flightWaiters() == guesses-1 })
	close(release)
	for range guesses {
		if err := <-answers; sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Errorf("a guess: %v", err)
		}
	}
	if reads := len(store.reads); reads != 1 {
		t.Errorf("%d guesses at once of one password read the user %d times, want once", guesses, reads)
	}
}

// flightWaiters counts the goroutines of the process waiting for a check
// that another runs (singleflight): those of the test calling it, which
// runs no other check of its own meanwhile.
func flightWaiters() int {
	buf := make([]byte, 1<<20)
	waiting := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "singleflight.(*Group).Do(") && strings.Contains(g, "sync.(*WaitGroup).Wait(") {
			waiting++
		}
	}
	return waiting
}

// A network past its limit does not lock out a user name that signed in
// from its own /64 before: the client failing across the network, without
// that password, cannot hold back the network's known clients, only the
// ones it may be.
func TestThrottleNetworkSparesKnownClients(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(2, time.Minute, func() time.Time { return now })
	addr := func(s56, s64 int) string { return fmt.Sprintf("[2001:db8:0:%02x%02x::1]:4000", s56, s64) }
	known := addr(1, 0x10)
	th.Succeed(known, "ann")
	// 5 /64s of the /56 2001:db8:0:100::/56 fail 16 times each: its
	// limit of 80.
	blockNetwork := func() {
		for s64 := range 5 {
			for j := range 16 {
				fail(t, th, addr(1, s64), "user"+strconv.Itoa(j))
			}
		}
	}
	blockNetwork()
	if _, err := th.Begin(addr(1, 0xee), "ann"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("ann from a fresh /64 of the blocked /56: %v, want TooMany", err)
	}
	if err := th.Check(known, "bob"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("bob, who never signed in there, from ann's /64: %v, want TooMany", err)
	}
	if err := th.Check(known, "ann"); err != nil {
		t.Fatalf("ann from the /64 she signed in from: %v", err)
	}
	at, err := th.Begin(known, "ann")
	if err != nil {
		t.Fatalf("ann's check from her /64: %v", err)
	}
	at.Release()
	// Her /64's own limits still hold: ann mistyping from there is
	// counted and refused past max.
	for range 2 {
		fail(t, th, known, "ann")
	}
	if err := th.Check(known, "ann"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("ann past her own limit: %v, want TooMany", err)
	}
	// Past knownFor, her sign-in no longer spares her.
	th.Succeed(addr(1, 0x11), "cyd")
	now = now.Add(knownFor)
	blockNetwork()
	if err := th.Check(addr(1, 0x11), "cyd"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("cyd a week after her sign-in: %v, want TooMany", err)
	}
}

// TestThrottleKnownClientsOutlastOneNamesSignIns: the sign-ins that spare
// a client the limits of its network are remembered for at most
// knownPerName /64s of one user name, its least recent going first, so
// that one account signing in from as many /64s as the table holds (a
// client holding a /48 has 65,536) cannot push out the others' and, with
// the network past its limit, lock them out again. Without the bound,
// mallory's 20,000 sign-ins forgot ann's.
func TestThrottleKnownClientsOutlastOneNamesSignIns(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(2, time.Minute, func() time.Time { return now })
	addr := func(s48, s64 int) string { return fmt.Sprintf("[2001:db8:%x:%x::1]:4000", s48, s64) }
	ann := addr(1, 0x10)
	th.Succeed(ann, "ann")
	for i := range throttleEntries {
		now = now.Add(time.Millisecond)
		th.Succeed(addr(2+i/65536, i%65536), "mallory")
	}
	// 4 /64s of each of 8 /56s of a /48 fail 10 times each: its limit
	// of 320, below its /56s' (80) and /64s' (20).
	blockNetwork := func(s48, s56 int) {
		for i := range 32 {
			for j := range 10 {
				fail(t, th, addr(s48, (s56+i/4)<<8|i%4), "user"+strconv.Itoa(j))
			}
		}
	}
	blockNetwork(1, 0x10)
	if err := th.Check(addr(1, 0x11), "ann"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("ann from another /64 of the blocked /48: %v, want TooMany", err)
	}
	if err := th.Check(ann, "ann"); err != nil {
		t.Fatalf("ann from the /64 she signed in from, after mallory signed in from %d others: %v", throttleEntries, err)
	}
	// mallory's sign-ins are remembered too, her most recent ones.
	last := throttleEntries - 1
	blockNetwork(2, 0x80)
	if err := th.Check(addr(2+last/65536, last%65536), "mallory"); err != nil {
		t.Fatalf("mallory from the /64 she last signed in from: %v", err)
	}
	if err := th.Check(addr(2, 0), "mallory"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("mallory from the /64 she first signed in from: %v, want TooMany", err)
	}
	if n := th.known.Len(); n != 1+knownPerName {
		t.Fatalf("%d sign-ins remembered, want %d", n, 1+knownPerName)
	}
}
