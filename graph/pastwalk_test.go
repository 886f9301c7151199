package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/engine"
)

// nodesSDL is an interface whose reference points to the interface
// itself, implemented by three classes: a selection of n levels of next
// reaches each level's selection once per class having the field.
const nodesSDL = `
interface Node { next: Node }
type A implements Node { x: Int }
type B implements Node { y: Int }
type C implements Node { z: Int }
`

// nested returns depth levels of next around _id.
func nested(depth int) string {
	return strings.Repeat("next { ", depth) + "_id" + strings.Repeat(" }", depth)
}

// TestPastCheckIsLinearInDepth: checking what a query of the past shows
// (checkPastSelection) takes a few steps per level of references, not
// one per path through the classes having the field (found by review:
// memoised on the slice of selections gqlgen collects anew for each
// class, the check was never found done: 3^depth steps here, depth 14
// took 26 s of a core before its 2 s request timeout was answered,
// depth 18 about 35 minutes). Without the fix it fails at depth 2 (13
// steps, 12 allowed).
func TestPastCheckIsLinearInDepth(t *testing.T) {
	t.Parallel()
	for depth := 1; depth <= 18; depth++ {
		steps, err := graph.PastCheckSteps(t.Context(), nodesSDL, `{ Node { `+nested(depth)+` } }`)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		// The root selection, then each level's once per class (3
		// each), with room to spare.
		if max := 4 * (depth + 1); steps > max {
			t.Fatalf("depth %d: %d steps, more than %d", depth, steps, max)
		}
	}
}

// TestPastCheckStopsWithTheContext: the check of a query of the past
// ends with the request's context.
func TestPastCheckStopsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := graph.PastCheckSteps(ctx, nodesSDL, `{ Node { `+nested(3)+` } }`); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want %v", err, context.Canceled)
	}
}

// TestPastChecksDeepSelections: a query of the past whose selection
// reaches, levels of references down, a field hidden as of its position
// is still refused, on whichever class the field is selected; one that
// does not reach it is answered, the admin's too.
func TestPastChecksDeepSelections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStack(t, nodesSDL)
	st.insert(t, `[
{"@type":"A","@id":"a","x":1,"next":"B/b"},
{"@type":"B","@id":"b","y":2,"next":"C/c"},
{"@type":"C","@id":"c","z":3,"next":"A/a"}
]`)
	var ext struct{ Extensions struct{ Position string } }
	if err := json.Unmarshal([]byte(st.query(t, `{ A { _id } }`, nil).raw), &ext); err != nil {
		t.Fatal(err)
	}
	p := ext.Extensions.Position
	reader, err := st.eng.CreateUser(ctx, st.admin, "admin", "reader", "password1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.eng.SetRole(ctx, st.admin, "admin", "db", "reader", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	// C.z protected since p, then public again: hidden from the reader
	// as of p.
	for _, sdl := range []string{strings.Replace(nodesSDL, "z: Int", "z: Int @private", 1), nodesSDL} {
		if _, err := st.eng.PutSchema(ctx, st.admin, "admin", "db", sdl, engine.PutSchemaOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	const depth = 8
	deep := func(sel string) string {
		return `{ Node(asOf: "` + p + `") { ` + strings.Repeat("next { ", depth) + sel + strings.Repeat(" }", depth) + ` } }`
	}
	for _, c := range []struct {
		user   *sluice.User
		query  string
		hidden bool
	}{
		{reader, deep(`_id ... on C { z }`), true},
		{reader, deep(`_id ... on A { x next { ... on C { z } } }`), true},
		{reader, deep(`... on Node { ... on C { z } }`), true},
		{reader, deep(`_id ... on A { x } ... on B { y }`), false},
		{nil, deep(`_id ... on C { z }`), false},
	} {
		res := st.do(ctx, t, c.user, c.query, nil)
		switch {
		case c.hidden && (len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Message, "C.z as of "+p+" cannot be shown")):
			t.Errorf("%s: %s, want C.z refused", c.query, res.raw)
		case !c.hidden && (len(res.Errors) > 0 || !strings.Contains(string(res.Data), `"_id"`)):
			t.Errorf("%s: %s, want the documents", c.query, res.raw)
		}
	}
}
