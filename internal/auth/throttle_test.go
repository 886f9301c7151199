package auth

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

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
		th.Fail(addr, "bea")
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
	th.Fail(addr, "bea")
	th.Fail(addr, "bea")
	th.Succeed(addr, "bea")
	th.Fail(addr, "bea")
	th.Fail(addr, "bea")
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
		th.Fail("[2001:db8::1]:4000", "user"+strconv.Itoa(i))
	}
	// Any address of the /64 counts as the same.
	if err := th.Check("[2001:db8::ffff:1]:5000", "someone"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("an address past the limit: %v", err)
	}
	if err := th.Check("[2001:db8:0:1::1]:5000", "someone"); err != nil {
		t.Fatalf("another /64: %v", err)
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
