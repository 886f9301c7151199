package inflight

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// TestLimiter: a user's requests past the bound are refused with a
// TooMany error naming the setting, its refusals past theirs are
// aborted, other users and the super user are not held back, and each
// request is counted out once, however many times it is ended.
func TestLimiter(t *testing.T) {
	t.Parallel()
	l := New(Bounds{PerUser: 2, Refusals: 1})
	alice, bob := &sluice.User{ID: 1, Name: "alice"}, &sluice.User{ID: 2, Name: "bob"}
	admin := &sluice.User{ID: 3, Name: "admin", Superuser: true}
	begin := func(u *sluice.User) *Request {
		t.Helper()
		r, err := l.Begin(u)
		if err != nil {
			t.Fatalf("%s: %v", u.Name, err)
		}
		return r
	}
	a1, a2 := begin(alice), begin(alice)
	refusal, err := l.Begin(alice)
	var se *sluice.Error
	if refusal == nil || !errors.As(err, &se) || se.Code != sluice.CodeTooMany || sluice.RetryAfter(err) == "" {
		t.Fatalf("alice's third request: %v, %v; want a refusal, TooMany with Retry-After", refusal, err)
	}
	if r, err := l.Begin(alice); r != nil || !errors.Is(err, ErrAbort) {
		t.Fatalf("alice's fourth request: %v, %v; want ErrAbort", r, err)
	}
	begin(bob)
	if st := l.Stats(); st != (Stats{Admitted: 3, Refused: 1, Aborted: 1}) {
		t.Errorf("Stats: %+v; want 3 admitted, 1 refused and 1 aborted", st)
	}
	for range 10 {
		if r := begin(admin); r != nil {
			t.Fatal("the super user's request was counted")
		}
	}
	// A refusal sent frees its place among the refusals, not a request's.
	refusal.End()
	refusal.End()
	if r, err := l.Begin(alice); r == nil || err == nil {
		t.Fatalf("alice's request after her refusal was sent: %v, %v; want another refusal", r, err)
	} else {
		r.End()
	}
	// A request handed over to the streams is counted out once.
	ctx := With(context.Background(), a1)
	Handover(ctx)
	a1.End()
	a3 := begin(alice)
	if r, err := l.Begin(alice); err == nil {
		t.Fatalf("alice's request past the bound: %v, nil", r)
	} else {
		r.End()
	}
	a2.End()
	a3.End()
	Handover(context.Background()) // no request: nothing
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.users[alice.ID]; c != nil {
		t.Errorf("alice's counts after every request ended: %+v", *c)
	}
}

// TestLimiterTotal: every user's requests together are bounded too:
// past the process's bound a request of a user under its own is refused
// with an Unavailable error naming the setting, past the process's
// refusals it is aborted, the super user is not held back, and a request
// ended makes room for anyone's.
func TestLimiterTotal(t *testing.T) {
	t.Parallel()
	l := New(Bounds{PerUser: 2, Refusals: 16, Total: 3, TotalRefusals: 2})
	users := []*sluice.User{{ID: 1, Name: "u1"}, {ID: 2, Name: "u2"}, {ID: 3, Name: "u3"}, {ID: 4, Name: "u4"}}
	var held []*Request
	for _, u := range users[:3] {
		r, err := l.Begin(u)
		if r == nil || err != nil {
			t.Fatalf("%s's first request: %v, %v; want it admitted", u.Name, r, err)
		}
		held = append(held, r)
	}
	var refusals []*Request
	for _, u := range users[2:] {
		r, err := l.Begin(u)
		var se *sluice.Error
		if r == nil || !errors.As(err, &se) || se.Code != sluice.CodeUnavailable || sluice.RetryAfter(err) == "" || !strings.Contains(se.Message, "max_requests_in_flight") {
			t.Fatalf("%s's request past the process's bound: %v, %v; want a refusal, Unavailable with Retry-After naming max_requests_in_flight", u.Name, r, err)
		}
		refusals = append(refusals, r)
	}
	if r, err := l.Begin(users[0]); r != nil || !errors.Is(err, ErrAbort) {
		t.Fatalf("a request past the process's refusals: %v, %v; want ErrAbort", r, err)
	}
	if r, err := l.Begin(&sluice.User{ID: 5, Name: "admin", Superuser: true}); r != nil || err != nil {
		t.Fatalf("the super user's request: %v, %v; want it admitted, uncounted", r, err)
	}
	if st := l.Stats(); st != (Stats{Admitted: 3, Refused: 2, Aborted: 1}) {
		t.Errorf("Stats: %+v; want 3 admitted, 2 refused and 1 aborted", st)
	}
	held[0].End()
	r, err := l.Begin(users[3])
	if r == nil || err != nil {
		t.Fatalf("a request once another ended: %v, %v; want it admitted", r, err)
	}
	for _, r := range append(append(held, refusals...), r) {
		r.End()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.users) != 0 {
		t.Errorf("%d users counted after every request ended", len(l.users))
	}
}
