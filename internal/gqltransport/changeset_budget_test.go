package gqltransport_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestChangeSetBudgetCountsChanges: a commit of many tiny changes
// (30,000 deletions of documents of one short field, about 1.2 MB of
// change images, more than a row of the log holds: read in pieces) fits
// a 2 MiB graphql_max_response_bytes by its images, but the changes
// gathered hold several times that (each its struct, id and class
// besides its image): the _ChangeSet subscriber gets the
// RESULT_TOO_LARGE error event that a commit of large images gets, and
// the stream goes on with the next commit. Without the per-change
// overhead the assembler gathered it whole, and sent its change set.
func TestChangeSetBudgetCountsChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) {
		c.GraphQLMaxResponseBytes = 2 << 20
		// Room for the change set's 30,000 deleted documents: the commit
		// is refused by the assembler's bound or not at all.
		c.GraphQLMaxResultRows = 100_000
	})
	d.CreateDatabase(t, "tiny", "type T { f: String }")
	const n = 30_000
	docs := make([]string, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf(`"T/%d"`, i)
		docs[i] = fmt.Sprintf(`{"@type":"T","@id":%s,"f":"x"}`, ids[i])
	}
	insert(t, d, "tiny", "["+strings.Join(docs, ",")+"]") // commit 1
	s := subscribe(t, d, "tiny", `subscription { _ChangeSet { T_deleted { _id } } }`)
	s.connected()
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/tiny", "["+strings.Join(ids, ",")+"]") // commit 2
	insert(t, d, "tiny", `{"@type":"T","@id":"T/late","f":"y"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/tiny?id=T/late", nil) // commit 4 (3 inserts it)

	evIDs, data := s.nexts(2)
	if !strings.HasSuffix(evIDs[0], fmt.Sprintf("-2-%d", n-1)) || !strings.Contains(data[0], `"code":"RESULT_TOO_LARGE"`) || !strings.Contains(data[0], "too large for one _ChangeSet event") {
		t.Fatalf("the commit of %d tiny deletions: %s %.300s…, want the RESULT_TOO_LARGE error event", n, evIDs[0], data[0])
	}
	if data[1] != `{"data":{"_ChangeSet":{"T_deleted":[{"_id":"T/late"}]}}}` {
		t.Fatalf("the next commit: %s %s", evIDs[1], data[1])
	}
}
