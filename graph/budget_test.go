package graph

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// TestParamsBudget: requests' parameters are charged to the process's
// budget and to their user's quarter of it until released; past either a
// request is refused (503, 429) having taken nothing; the super user is
// held to the process's budget only.
func TestParamsBudget(t *testing.T) {
	t.Parallel()
	b := newParamsBudget(4000)
	ann, bob := &sluice.User{ID: 1, Name: "ann"}, &sluice.User{ID: 2, Name: "bob"}
	root := &sluice.User{ID: 3, Name: "admin", Superuser: true}
	r1, err := b.take(ann, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.take(ann, 401); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), "graphql_request_bytes") {
		t.Fatalf("ann past her quarter: %v, want TooMany naming the setting", err)
	}
	r2, err := b.take(ann, 400) // exactly her quarter
	if err != nil {
		t.Fatal(err)
	}
	r3, err := b.take(root, 2900) // past a quarter: the super user may
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.take(bob, 200); sluice.ErrorCode(err) != sluice.CodeUnavailable || !strings.Contains(err.Error(), "graphql_request_bytes") {
		t.Fatalf("bob past the process's budget: %v, want Unavailable naming the setting", err)
	}
	r3()
	r3() // a second release frees nothing more
	if b.held != 1000 {
		t.Fatalf("held %d after the super user's release, want 1000", b.held)
	}
	r4, err := b.take(bob, 200)
	if err != nil {
		t.Fatal(err)
	}
	r1()
	r2()
	r4()
	if b.held != 0 || len(b.users) != 0 {
		t.Fatalf("after every release: held %d, users %v", b.held, b.users)
	}
	var none *paramsBudget // no bound
	if release, err := none.take(ann, 1<<40); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
}

// TestParamsCost: a request is charged its text and 80 bytes a JSON
// value, so that variables of many small values cost what they hold once
// decoded.
func TestParamsCost(t *testing.T) {
	t.Parallel()
	body := `{"query":"{ a }","variables":{"x":[1,2,3]}}`
	_, values, msg := parseRequestBody([]byte(body))
	if msg != "" {
		t.Fatal(msg)
	}
	// The object, query, variables, x, the list and its three numbers.
	if want := int64(len(body) + 80*values); paramsCost(len(body), values) != want || values < 6 {
		t.Fatalf("cost of %s: %d values, cost %d", body, values, paramsCost(len(body), values))
	}
}
