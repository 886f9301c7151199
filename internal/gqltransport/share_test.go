package gqltransport

import (
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
)

// TestShareKeyDoesNotKeepTheVariables: a subscription's share key holds
// a fixed-size digest of its variables, whatever their size, and still
// tells variables apart. Found by review: the key was the canonical
// encoding of the variables, kept for the subscription's life, HTML-escaped
// (a '<' as six bytes): 7 MiB of '<' in a variable held about 50 MiB per
// SSE subscription.
func TestShareKeyDoesNotKeepTheVariables(t *testing.T) {
	key := func(vars map[string]any) shareKey {
		t.Helper()
		k, ok := keyOf(nil, &request{params: &graphql.RawParams{Query: "subscription($v: String) { Dog_added(filter: {name: {eq: $v}}) { name } }", Variables: vars}})
		if !ok {
			t.Fatalf("variables %.40v: no share key", vars)
		}
		return k
	}
	small := key(map[string]any{"v": "<"})
	large := key(map[string]any{"v": strings.Repeat("<", 1<<20)})
	if len(small.variables) != len(large.variables) || len(large.variables) > 64 {
		t.Fatalf("the key keeps %d bytes of a variable of 1 byte, %d of one of 1 MiB: want a fixed size, at most 64", len(small.variables), len(large.variables))
	}
	// Equal variables, in any order, share; others do not.
	if key(map[string]any{"v": "<", "w": 1.0}) != key(map[string]any{"w": 1.0, "v": "<"}) {
		t.Fatal("equal variables give different keys")
	}
	if small == large || small == key(map[string]any{"v": ">"}) || small == key(nil) || key(nil) != key(map[string]any{}) {
		t.Fatal("the keys of different variables are equal, or those of no variables differ")
	}
}
