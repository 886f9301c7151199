package gqltransport

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/stream"
)

// TestLiveSettleComparesErrors: a live share publishes a result when its
// data or its errors changed (the same data with another error is another
// result), nothing when both are the same; with patches, a result with
// errors, and the first one after it, is whole (errors and data), and a
// patch is made only between two results without errors.
func TestLiveSettleComparesErrors(t *testing.T) {
	// A long name, so that a patch of a score is smaller than a result.
	name := strings.Repeat("n", 200)
	nulled := `{"P":[{"_id":"P/b","name":"` + name + `","friend":null}]}`
	mended := `{"P":[{"_id":"P/b","name":"` + name + `","friend":{"score":2}}]}`
	mended2 := `{"P":[{"_id":"P/b","name":"` + name + `","friend":{"score":3}}]}`
	const (
		errScore = `[{"message":"cannot return null","path":["P",0,"friend","score"],"extensions":{"code":"UNPROCESSABLE"}}]`
		errRank  = `[{"message":"cannot return null","path":["P",0,"friend","rank"],"extensions":{"code":"UNPROCESSABLE"}}]`
	)
	g := &liveGroup{b: &liveBatcher{}}
	pos := sluice.Position{Epoch: "e", Seq: 1, Index: sluice.WholeCommit}
	for _, patch := range []bool{false, true} {
		e := &liveEvaluator{patch: patch}
		step := func(what, data, errs, want string, delta bool) {
			t.Helper()
			var out stream.Settled
			var eb []byte
			if errs != "" {
				eb = []byte(errs)
			}
			pos.Seq++
			g.settle(e, []byte(data), eb, pos, &out)
			switch {
			case want == "" && len(out.Events) != 0:
				t.Errorf("patch %v, %s: published %s, want nothing", patch, what, out.Events[0].Data)
			case want != "" && (len(out.Events) != 1 || !strings.HasPrefix(string(out.Events[0].Data), "{"+want+`,"extensions":`)):
				t.Errorf("patch %v, %s: published %d results (%q), want {%s,\"extensions\":…}", patch, what, len(out.Events), out.Events, want)
			case (len(out.Delta) > 0) != delta:
				t.Errorf("patch %v, %s: %d patches, want a patch %v", patch, what, len(out.Delta), delta)
			}
		}
		step("the first result, with an error", nulled, errScore, `"errors":`+errScore+`,"data":`+nulled, false)
		step("the same", nulled, errScore, "", false)
		step("the same data, another error", nulled, errRank, `"errors":`+errRank+`,"data":`+nulled, false)
		step("mended", mended, "", `"data":`+mended, false)
		step("changed, without errors", mended2, "", `"data":`+mended2, patch)
	}
}
