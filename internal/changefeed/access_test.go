package changefeed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// change appends an access change to the log; commits added after it
// carry its version, as commits read after it committed would.
func (l *memLog) change(c sluice.AccessChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Version = int64(len(l.access)) + 1
	l.access = append(l.access, c)
}

// feedCommit hands c to the hub as the tailer does: access changes first.
func feedCommit(t *testing.T, h *Hub, c *sluice.Commit) {
	t.Helper()
	if err := h.guards.sync(context.Background(), c.AccessVersion); err != nil {
		t.Fatal(err)
	}
	h.publish(c)
}

var (
	ulla     = &sluice.User{ID: 7, Name: "ulla", Org: "o"}
	ullaRead = &sluice.Grant{Credential: sluice.Credential{User: ulla, TokenID: 3}, Database: testDB, Role: sluice.RoleRead}
)

// guarded subscribes from position from with a guard for grant, as a
// stream does.
func guarded(t *testing.T, h *Hub, grant *sluice.Grant, from *sluice.Position) *Subscription {
	t.Helper()
	// The guard ends the subscription made after it (the stream server's
	// Ender does this for a stream).
	var mu sync.Mutex
	var s *Subscription
	var endErr error
	g, err := h.Guard(context.Background(), grant, 0, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if s != nil {
			s.End(err)
		} else {
			endErr = err
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Release)
	sub := subscribe(t, h, from, Options{})
	mu.Lock()
	s = sub
	if endErr != nil {
		sub.End(endErr)
	}
	mu.Unlock()
	return sub
}

// ended waits for s to end and returns its error.
func ended(t *testing.T, s *Subscription) error {
	t.Helper()
	select {
	case <-s.Done():
		return s.Err()
	case <-time.After(wait):
		t.Fatal("the subscription did not end")
	}
	return nil
}

func TestAccessChangeEndsStreamBeforeLaterCommits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		change sluice.AccessChange
		code   sluice.Code
	}{
		{"token revoked", sluice.AccessChange{Kind: sluice.AccessToken, UserID: 7, TokenID: 3}, sluice.CodeUnauthenticated},
		{"user deleted", sluice.AccessChange{Kind: sluice.AccessUser, UserID: 7}, sluice.CodeUnauthenticated},
		{"role revoked", sluice.AccessChange{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 1, Role: sluice.RoleNone}, sluice.CodeForbidden},
		{"database deleted", sluice.AccessChange{Kind: sluice.AccessDatabase, DatabaseID: 1}, sluice.CodeNotFound},
		{"organization deleted", sluice.AccessChange{Kind: sluice.AccessOrganization, Org: "o"}, sluice.CodeNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, l := newHub(t, HubOptions{})
			h.track(1, 0)
			s := guarded(t, h, ullaRead, nil)
			feedCommit(t, h, l.add())
			l.change(c.change)
			feedCommit(t, h, l.add()) // read after the change: must not reach s
			err := ended(t, s)
			if !IsRevoked(err) || sluice.ErrorCode(err) != c.code {
				t.Fatalf("ended with %v (code %s), want a revocation with %s", err, sluice.ErrorCode(err), c.code)
			}
			var got []int64
			for len(s.Commits()) > 0 {
				got = append(got, (<-s.Commits()).Seq)
			}
			if !equal(got, []int64{1}) {
				t.Fatalf("queued %v, want only commit 1", got)
			}
		})
	}
}

func TestAccessChangesThatLeaveTheGrantAlone(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	h.track(1, 0)
	s := guarded(t, h, ullaRead, nil)
	for _, c := range []sluice.AccessChange{
		{Kind: sluice.AccessToken, UserID: 7, TokenID: 4},                           // another token
		{Kind: sluice.AccessPassword, UserID: 7},                                    // the stream uses a token
		{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 1, Role: sluice.RoleWrite}, // widened
		{Kind: sluice.AccessRole, UserID: 8, DatabaseID: 1, Role: sluice.RoleNone},  // someone else
		{Kind: sluice.AccessDatabase, DatabaseID: 2},                                // another database
		{Kind: sluice.AccessOrganization, Org: "other"},                             // another organization
		{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 2, Role: sluice.RoleNone},  // another database
		{Kind: sluice.AccessUser, UserID: 8},                                        // someone else
		{Kind: sluice.AccessToken, UserID: 8, TokenID: 5},                           // someone else's
		{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 1, Role: sluice.RoleRead},  // the same role
		{Kind: sluice.AccessPassword, UserID: 8},                                    // someone else's
		{Kind: sluice.AccessDatabase, DatabaseID: 3, Org: "o"},                      // a sibling database
		{Kind: sluice.AccessOrganization, Org: "p"},                                 // another organization
		{Kind: sluice.AccessUser, UserID: 9},                                        // someone else
		{Kind: sluice.AccessToken, UserID: 7, TokenID: 0},                           // no token (never written)
		{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 1, Role: sluice.RoleAdmin}, // widened
		{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 1, Role: sluice.RoleRead},  // back
		{Kind: sluice.AccessDatabase, DatabaseID: 4},                                // another database
		{Kind: sluice.AccessOrganization, Org: "q"},                                 // another organization
		{Kind: sluice.AccessPassword, UserID: 10},                                   // someone else's
	} {
		l.change(c)
	}
	feedCommit(t, h, l.add())
	if got := receive(t, s, 1); got[0] != 1 {
		t.Fatalf("got %v", got)
	}
	if s.Err() != nil {
		t.Fatalf("ended: %v", s.Err())
	}
}

// A grant read at or after a change already reflects it: a stream opened
// with a password set by a change the hub had not applied yet goes on.
func TestAccessChangeOlderThanTheGrant(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	l.change(sluice.AccessChange{Kind: sluice.AccessPassword, UserID: 7})
	grant := *ullaRead
	grant.TokenID, grant.AccessVersion = 0, 1
	s := guarded(t, h, &grant, nil)
	feedCommit(t, h, l.add())
	if got := receive(t, s, 1); got[0] != 1 || s.Err() != nil {
		t.Fatalf("got %v, err %v", got, s.Err())
	}
}

// A subscription reading the log itself (a resume) applies the access
// changes visible where it read, before it hands anything on.
func TestCatchUpAppliesAccessChanges(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	l.add()
	l.add()
	l.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 1, Role: sluice.RoleNone})
	l.add()       // commit 3, after the change
	h.track(1, 3) // the tailer is past them: a resume reads the log
	s := guarded(t, h, ullaRead, &sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: 0})
	err := ended(t, s)
	if !IsRevoked(err) || sluice.ErrorCode(err) != sluice.CodeForbidden {
		t.Fatalf("ended with %v", err)
	}
	for len(s.Commits()) > 0 {
		if c := <-s.Commits(); c.Seq == 3 {
			t.Fatal("commit 3, made after the change, was handed on")
		}
	}
}

// A guard registered after the hub applied access changes newer than its
// grant is checked again at once.
func TestGuardChecksAStaleGrant(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	denied := sluice.Errorf(sluice.CodeForbidden, "no")
	h, l := newHub(t, HubOptions{Check: func(context.Context, *sluice.Grant) error { checks.Add(1); return denied }})
	h.track(1, 0)
	l.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 8, DatabaseID: 1})
	if err := h.guards.sync(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Guard(context.Background(), ullaRead, 0, func(error) {}); !errors.Is(err, denied) || checks.Load() != 1 {
		t.Fatalf("Guard of a grant read before the applied version: %v, %d checks", err, checks.Load())
	}
	fresh := *ullaRead
	fresh.AccessVersion = 1
	g, err := h.Guard(context.Background(), &fresh, 0, func(error) {})
	if err != nil || checks.Load() != 1 {
		t.Fatalf("Guard of a current grant: %v, %d checks", err, checks.Load())
	}
	g.Release()
}

// Access changes pruned before they were applied, wherever in the range
// they were (its start, its end, the middle of a page, either side of a
// page's edge): every guard is checked again.
func TestPrunedAccessChangesRecheckEveryStream(t *testing.T) {
	t.Parallel()
	const n = 2*accessPage + accessPage/2
	for _, c := range []struct {
		changes, pruned int64
	}{
		{2, 1}, {n, 1}, {n, accessPage / 2}, {n, accessPage}, {n, accessPage + 1}, {n, accessPage + accessPage/2}, {n, n},
	} {
		t.Run(fmt.Sprintf("%d of %d", c.pruned, c.changes), func(t *testing.T) {
			t.Parallel()
			h, l := newHub(t, HubOptions{Check: func(context.Context, *sluice.Grant) error {
				return sluice.Errorf(sluice.CodeUnauthenticated, "gone")
			}})
			h.track(1, 0)
			if err := h.guards.sync(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			s := guarded(t, h, ullaRead, nil)
			for range c.changes {
				l.change(sluice.AccessChange{Kind: sluice.AccessUser, UserID: 99})
			}
			l.pruneAccess(c.pruned, c.pruned)
			feedCommit(t, h, &sluice.Commit{DatabaseID: 1, Epoch: testDB.Epoch, Seq: 1, AccessVersion: c.changes})
			if err := ended(t, s); !IsRevoked(err) || sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
				t.Fatalf("ended with %v", err)
			}
		})
	}
}

// pruneAccess drops the access changes of versions from..to.
func (l *memLog) pruneAccess(from, to int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.access = slices.DeleteFunc(l.access, func(c sluice.AccessChange) bool { return c.Version >= from && c.Version <= to })
}

// unrelatedChanges appends n access changes that concern no stream of
// the tests (tokens of user 99), but at the versions in at: those
// changes.
func (l *memLog) unrelatedChanges(n int64, at map[int64]sluice.AccessChange) {
	for i := range n {
		c, ok := at[i+1]
		if !ok {
			c = sluice.AccessChange{Kind: sluice.AccessToken, UserID: 99, TokenID: 1000 + i}
		}
		l.change(c)
	}
}

// TestAccessChangesAreReadInPages: a sync over more access changes than a
// page (a process back after being cut off from Postgres, a burst of
// tokens made and revoked) reads them a page of accessPage versions at a
// time, each applied (its streams ended) before the next is read, so what
// it holds of them and how long it holds the guards' lock are bounded by
// the page, not by the changes; a stream a change of a later page takes
// away is ended, one no change concerns goes on, and a range that is
// whole is never taken for pruned (no stream is checked again). Before,
// the whole range was read at once, then applied under the lock.
func TestAccessChangesAreReadInPages(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	h, l := newHub(t, HubOptions{Check: func(context.Context, *sluice.Grant) error { checks.Add(1); return nil }})
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	vera := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 9, Name: "vera"}, TokenID: 9}, Database: testDB, Role: sluice.RoleRead}
	otto := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 8, Name: "otto"}, TokenID: 8}, Database: testDB, Role: sluice.RoleRead}
	sUlla, sVera, sOtto := guarded(t, h, ullaRead, nil), guarded(t, h, vera, nil), guarded(t, h, otto, nil)
	const n = 2*accessPage + accessPage/2
	l.unrelatedChanges(n, map[int64]sluice.AccessChange{
		5:                 {Kind: sluice.AccessToken, UserID: 9, TokenID: 9},       // vera's, in the first page
		2*accessPage + 10: {Kind: sluice.AccessToken, UserID: ulla.ID, TokenID: 3}, // ulla's, in the third
	})
	type read struct {
		after, upTo, applied int64
		veraEnded            bool
	}
	var mu sync.Mutex
	var reads []read
	l.readingAccess = func(after, upTo int64) {
		mu.Lock()
		defer mu.Unlock()
		veraEnded := false
		select {
		case <-sVera.Done():
			veraEnded = true
		default:
		}
		reads = append(reads, read{after, upTo, h.guards.applied.Load(), veraEnded})
	}
	feedCommit(t, h, l.add())

	mu.Lock()
	want := []read{{0, accessPage, 0, false}, {accessPage, 2 * accessPage, accessPage, true}, {2 * accessPage, n, 2 * accessPage, true}}
	if !slices.Equal(reads, want) {
		t.Errorf("read the access changes as %+v, want %+v (after, upTo, the version applied then, whether vera's stream had ended)", reads, want)
	}
	mu.Unlock()
	for name, s := range map[string]*Subscription{"vera": sVera, "ulla": sUlla} {
		if err := ended(t, s); !IsRevoked(err) || sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Errorf("%s's stream ended with %v, want a revocation", name, err)
		}
	}
	if got := receive(t, sOtto, 1); got[0] != 1 || sOtto.Err() != nil {
		t.Errorf("otto's stream received %v, ended with %v", got, sOtto.Err())
	}
	if checks.Load() != 0 {
		t.Errorf("%d streams were checked again: a whole range was taken for pruned", checks.Load())
	}
}

// TestConcurrentSyncsShareThePages: while one sync waits for a page of
// access changes, another applies that page and the ones after it; the
// first then finds its page applied and returns, not taking it for pruned
// even when its rows were pruned since (they were applied), and moving
// nothing back.
func TestConcurrentSyncsShareThePages(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	h, l := newHub(t, HubOptions{Check: func(context.Context, *sluice.Grant) error { checks.Add(1); return nil }})
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	s := guarded(t, h, ullaRead, nil)
	const n = 2*accessPage + accessPage/2
	l.unrelatedChanges(n, map[int64]sluice.AccessChange{accessPage + 10: {Kind: sluice.AccessToken, UserID: ulla.ID, TokenID: 3}})
	waiting, unblock := make(chan struct{}), make(chan struct{})
	unblocked := sync.OnceFunc(func() { close(unblock) })
	defer unblocked()
	var first atomic.Bool
	l.readingAccess = func(after, _ int64) {
		if after == accessPage && first.CompareAndSwap(false, true) {
			close(waiting)
			<-unblock
		}
	}
	synced := make(chan error, 1)
	go func() { synced <- h.guards.sync(context.Background(), n) }()
	select {
	case <-waiting:
	case <-time.After(wait):
		t.Fatal("the first sync did not read its second page alone")
	}
	if err := h.guards.sync(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, s); !IsRevoked(err) {
		t.Fatalf("ulla's stream ended with %v, want a revocation", err)
	}
	l.pruneAccess(accessPage+1, 2*accessPage)
	unblocked()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("the first sync did not return")
	}
	if got := h.guards.applied.Load(); got != n || checks.Load() != 0 {
		t.Fatalf("applied %d, %d streams checked again; want %d, none", got, checks.Load(), n)
	}
}

// A stream opened with a credential that expires (a JWT's exp) ends then.
func TestGuardEndsAtExpiry(t *testing.T) {
	t.Parallel()
	h, _ := newHub(t, HubOptions{})
	h.track(1, 0)
	grant := *ullaRead
	// Long enough to be guarded before it: Guard refuses an expired grant.
	grant.ExpiresAt = time.Now().Add(time.Second)
	s := guarded(t, h, &grant, nil)
	if err := ended(t, s); !IsRevoked(err) || sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Fatalf("ended with %v", err)
	}
	grant.ExpiresAt = time.Now().Add(-time.Second)
	if _, err := h.Guard(context.Background(), &grant, 0, func(error) {}); sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Fatalf("an expired grant: %v", err)
	}
}

// A stream opened with a JWT ends when the JWT's key leaves the key set
// (JWTKeysChanged), and one of another key, or of no JWT, does not; a
// grant whose key is already gone is refused. A key the set never held
// (ES256:c, which another replica learnt first) is not removed.
func TestJWTKeysChangedEndsStreamsOfRemovedKeys(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	removed := map[string]bool{}
	h, l := newHub(t, HubOptions{JWTKeyRemoved: func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return removed[id]
	}})
	h.track(1, 0)
	grant := func(key string) *sluice.Grant {
		g := *ullaRead
		g.TokenID, g.JWTKey = 0, key
		return &g
	}
	a, b, c, none := guarded(t, h, grant("ES256:a"), nil), guarded(t, h, grant("ES256:b"), nil), guarded(t, h, grant("ES256:c"), nil), guarded(t, h, grant(""), nil)

	h.JWTKeysChanged() // nothing removed
	mu.Lock()
	removed["ES256:a"] = true
	mu.Unlock()
	h.JWTKeysChanged()
	if err := ended(t, a); !IsRevoked(err) || sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Fatalf("the stream of the removed key ended with %v", err)
	}
	feedCommit(t, h, l.add())
	for _, s := range []*Subscription{b, c, none} {
		if got := receive(t, s, 1); got[0] != 1 {
			t.Fatalf("received %v", got)
		}
	}
	if _, err := h.Guard(context.Background(), grant("ES256:a"), 0, func(error) {}); sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
		t.Fatalf("a grant of the removed key: %v", err)
	}
}

// TestGuardChargesStreamVariables: a guard charges its stream's variables
// to its user's budget (StreamVariablesBytesPerUser, the super user
// exempt) and the process's (StreamVariablesBytes) until it is released,
// once however many times Release is called; past either, Guard refuses
// with TooMany or Unavailable naming the setting; a stream of no
// variables is never refused by them.
func TestGuardChargesStreamVariables(t *testing.T) {
	t.Parallel()
	super := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 1, Name: "admin", Superuser: true}}, Database: testDB, Role: sluice.RoleAdmin}
	other := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 8, Name: "otto", Org: "o"}}, Database: testDB, Role: sluice.RoleRead}
	guard := func(h *Hub, grant *sluice.Grant, varBytes int64) (*Guard, error) {
		t.Helper()
		g, err := h.Guard(context.Background(), grant, varBytes, func(error) {})
		if g != nil {
			t.Cleanup(g.Release)
		}
		return g, err
	}
	refused := func(err error, code sluice.Code, key string) bool {
		return sluice.ErrorCode(err) == code && strings.Contains(sluice.ErrorMessage(err), "(config "+key+")")
	}

	h, _ := newHub(t, HubOptions{StreamVariablesBytesPerUser: 100, StreamVariablesBytes: 1000})
	first, err := guard(h, ullaRead, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := guard(h, ullaRead, 41); !refused(err, sluice.CodeTooMany, "stream_variables_bytes_per_user") {
		t.Fatalf("past the user's budget: %v", err)
	}
	for _, c := range []struct {
		name     string
		grant    *sluice.Grant
		varBytes int64
	}{{"within the user's budget", ullaRead, 40}, {"no variables", ullaRead, 0}, {"another user", other, 100}, {"the super user", super, 300}} {
		if _, err := guard(h, c.grant, c.varBytes); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	first.Release()
	first.Release()
	if _, err := guard(h, ullaRead, 60); err != nil {
		t.Fatalf("once a guard was released: %v", err)
	}
	if _, err := guard(h, ullaRead, 1); !refused(err, sluice.CodeTooMany, "stream_variables_bytes_per_user") {
		t.Fatalf("a guard released twice gave back twice: %v", err)
	}

	h, _ = newHub(t, HubOptions{StreamVariablesBytes: 100})
	if _, err := guard(h, ullaRead, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := guard(h, super, 41); !refused(err, sluice.CodeUnavailable, "stream_variables_bytes") {
		t.Fatalf("past the process's budget: %v", err)
	}
	if _, err := guard(h, super, 0); err != nil {
		t.Fatalf("no variables: %v", err)
	}
}

// A stale grant is checked against Postgres (Check: three or four round
// trips, as long as Postgres takes to answer, or its pool to give a
// connection) without the guards' lock, which every stream opening, every
// Release and the application of every access change need: while the
// check waits, a revocation of another user's token is applied and ends
// that user's stream, and another stream gives back its place.
func TestStaleGrantCheckHoldsNoLock(t *testing.T) {
	t.Parallel()
	var h *Hub
	locked := make(chan bool, 1)
	unblock := make(chan struct{})
	h, l := newHub(t, HubOptions{Check: func(ctx context.Context, g *sluice.Grant) error {
		if g.User.ID != 8 {
			return nil
		}
		// Nothing else takes the lock now: it is free unless the check
		// runs under it.
		free := h.guards.mu.TryLock()
		if free {
			h.guards.mu.Unlock()
		}
		locked <- !free
		select { // a round trip that takes as long as Postgres does
		case <-unblock:
		case <-ctx.Done():
		}
		return nil
	}})
	unblocked := sync.OnceFunc(func() { close(unblock) })
	defer unblocked()
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	s := guarded(t, h, ullaRead, nil) // ulla's token 3, current at version 0
	vera := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 9, Name: "vera"}}, Database: testDB, Role: sluice.RoleRead}
	other, err := h.Guard(context.Background(), vera, 0, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	// An unrelated access change moves the applied version to 1.
	l.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 99, DatabaseID: 1})
	if err := h.guards.sync(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	// bob opens a stream with a credential read at version 0: checked.
	bob := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 8, Name: "bob"}}, Database: testDB, Role: sluice.RoleRead}
	type result struct {
		g   *Guard
		err error
	}
	bobs := make(chan result, 1)
	go func() {
		g, err := h.Guard(context.Background(), bob, 0, func(error) {})
		bobs <- result{g, err}
	}()
	if <-locked {
		t.Fatal("bob's stale grant is checked against Postgres under the guards' lock: every stream opening, release and access change waits for it")
	}

	// ulla's token is revoked: her stream ends before the next commit.
	l.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: ulla.ID, TokenID: 3})
	synced := make(chan error, 1)
	go func() { synced <- h.guards.sync(context.Background(), 2) }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("the revocation of ulla's token waits for bob's stream's check")
	}
	if err := ended(t, s); !IsRevoked(err) {
		t.Fatalf("ulla's stream ended with %v, want a revocation", err)
	}
	released := make(chan struct{})
	go func() { other.Release(); close(released) }()
	select {
	case <-released:
	case <-time.After(wait):
		t.Fatal("vera's stream cannot give back its place while bob's stream's grant is checked")
	}
	unblocked()
	r := <-bobs
	if r.err != nil {
		t.Fatalf("bob's stream: %v", r.err)
	}
	r.g.Release()
}

// An access change applied while a stale grant was checked (without the
// guards' lock) may have taken it away after the check read it: the grant
// is checked again, and a guard is never registered with a check older
// than a change the other guards were given.
func TestStaleGrantCheckedAgainAfterAnAccessChange(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	inCheck := make(chan struct{}, 1)
	unblock := make(chan struct{})
	h, l := newHub(t, HubOptions{Check: func(context.Context, *sluice.Grant) error {
		if checks.Add(1) == 1 {
			inCheck <- struct{}{}
			<-unblock // it read the token before its revocation
			return nil
		}
		return sluice.Errorf(sluice.CodeUnauthenticated, "invalid or revoked token")
	}})
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	l.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 99, DatabaseID: 1})
	if err := h.guards.sync(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	bob := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 8, Name: "bob"}, TokenID: 5}, Database: testDB, Role: sluice.RoleRead}
	var ends atomic.Int64
	type result struct {
		g   *Guard
		err error
	}
	bobs := make(chan result, 1)
	go func() {
		g, err := h.Guard(context.Background(), bob, 0, func(error) { ends.Add(1) })
		bobs <- result{g, err}
	}()
	<-inCheck
	l.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: 8, TokenID: 5})
	synced := make(chan error, 1)
	go func() { synced <- h.guards.sync(context.Background(), 2) }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		close(unblock)
		t.Fatal("the revocation waits for bob's stream's check")
	}
	close(unblock)
	r := <-bobs
	if r.err == nil {
		r.g.Release()
		t.Fatalf("bob's stream was registered after the revocation of its token (%d checks, ended %d times)", checks.Load(), ends.Load())
	}
	if sluice.ErrorCode(r.err) != sluice.CodeUnauthenticated || checks.Load() != 2 {
		t.Fatalf("bob's stream: %v after %d checks, want Unauthenticated after 2", r.err, checks.Load())
	}
}

// A stale grant checked again and again because access changes keep
// being applied while it is checked is refused after a few checks, as
// unavailable; and a check that does not answer is given up after
// CheckTimeout.
func TestStaleGrantChecksAreBounded(t *testing.T) {
	t.Parallel()
	var h *Hub
	var l *memLog
	var checks atomic.Int64
	h, l = newHub(t, HubOptions{Check: func(ctx context.Context, g *sluice.Grant) error {
		checks.Add(1)
		if g.User.ID == 9 {
			<-ctx.Done() // Postgres does not answer
			return sluice.Errorf(sluice.CodeUnavailable, "timed out")
		}
		l.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 99, DatabaseID: 1})
		l.mu.Lock()
		v := int64(len(l.access))
		l.mu.Unlock()
		synced := make(chan error, 1)
		go func() { synced <- h.guards.sync(context.Background(), v) }()
		select {
		case err := <-synced:
			return err
		case <-time.After(wait):
			return errors.New("the access change waits for the check")
		}
	}, CheckTimeout: 10 * time.Millisecond})
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	l.change(sluice.AccessChange{Kind: sluice.AccessRole, UserID: 99, DatabaseID: 1})
	if err := h.guards.sync(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Guard(context.Background(), ullaRead, 0, func(error) {}); sluice.ErrorCode(err) != sluice.CodeUnavailable || checks.Load() != maxGrantChecks {
		t.Fatalf("Guard while access changes keep coming: %v after %d checks, want Unavailable after %d", err, checks.Load(), maxGrantChecks)
	}
	vera := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 9, Name: "vera"}}, Database: testDB, Role: sluice.RoleRead}
	if _, err := h.Guard(context.Background(), vera, 0, func(error) {}); sluice.ErrorCode(err) != sluice.CodeUnavailable {
		t.Fatalf("Guard of a check that does not answer: %v, want Unavailable", err)
	}
}

// The access changes are read from Postgres without the guards' lock: while
// the read waits, streams still open and give back their places (the
// parked streams' writers release theirs), and the changes read are
// applied once it returns.
func TestAccessChangesAreReadWithoutTheLock(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	h.track(1, 0)
	if err := h.guards.sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	s := guarded(t, h, ullaRead, nil)
	vera := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 9, Name: "vera"}}, Database: testDB, Role: sluice.RoleRead}
	other, err := h.Guard(context.Background(), vera, 0, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	locked := make(chan bool, 1)
	unblock := make(chan struct{})
	l.readingAccess = func(int64, int64) {
		free := h.guards.mu.TryLock() // nothing else takes it now
		if free {
			h.guards.mu.Unlock()
		}
		locked <- !free
		<-unblock
	}
	l.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: ulla.ID, TokenID: 3})
	synced := make(chan error, 1)
	go func() { synced <- h.guards.sync(context.Background(), 1) }()
	if <-locked {
		close(unblock)
		t.Fatal("the access changes are read from Postgres under the guards' lock: every stream opening and release waits for the read")
	}
	other.Release()
	if _, err := h.Guard(context.Background(), vera, 0, func(error) {}); err != nil {
		t.Fatal(err)
	}
	close(unblock)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := ended(t, s); !IsRevoked(err) {
		t.Fatalf("ulla's stream ended with %v, want a revocation", err)
	}
}
