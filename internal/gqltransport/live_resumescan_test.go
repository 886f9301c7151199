package gqltransport

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/stream"
)

// TestLiveResumeScansUnderAReadToken: a resumed live query judges the
// log since its client's position (up to maxResumeScan pieces) holding
// a read token of its user, as its read does: with one token a user,
// none of rita's is free while her resume judges a piece, and every
// token is given back after it. Found by review: the token was given
// back after the read and before the scan, so a user's resumes judged
// the log past the half of the cores their reads are bounded to.
func TestLiveResumeScansUnderAReadToken(t *testing.T) {
	t.Parallel()
	var docs []string
	for i := 1; i <= 5; i++ {
		docs = append(docs, fmt.Sprintf(`{"@type":"Item","@id":"Item/i%d","n":%d}`, i, i))
	}
	lq, store := liveQueryAs(t, "rita", "type Item { n: Int! }", "["+strings.Join(docs, ",")+"]", `subscription { Item { n } }`)
	hub := changefeed.NewHub(store, changefeed.HubOptions{})
	streams := stream.New(hub, stream.Options{NoPark: true})
	t.Cleanup(func() {
		hub.Close()
		streams.Close(context.Background())
	})
	b := &liveBatcher{budget: newLiveBudget(LiveBudget{}), reads: newLiveReads(1)}
	var judged, free int
	b.scanned = func(u *sluice.User) {
		judged++
		if release, _ := b.reads.try(u); release != nil {
			free++
			release()
		}
	}
	tr := &transport{Server: &Server{opts: Options{Streams: streams}, live: b}}
	// From before the first commit: the log holds the documents' insert.
	from := sluice.Position{Epoch: lq.Database().Epoch, Seq: 0, Index: sluice.WholeCommit}
	res, err := tr.resumeLive(context.Background(), lq, from, false)
	if err != nil {
		t.Fatal(err)
	}
	if judged == 0 {
		t.Fatal("the resume judged no piece of the log")
	}
	if free > 0 {
		t.Fatalf("rita's read token was free while her resume judged %d of %d pieces of the log", free, judged)
	}
	if res.msg == nil {
		t.Fatal("the result changed since the position, and the resume said it is current")
	}
	if len(b.reads.users) != 0 {
		t.Fatalf("read tokens left: %v", b.reads.users)
	}
}
