package daemon_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// resetPeak resets the peak RSS (VmHWM) of process pid to its current RSS.
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

// TestChangeSetOfLargeCommitIsBounded: _ChangeSet(commit:) of a commit of
// 150,000 documents, asked by four clients at once, reads the commit in
// pieces and stops at graphql_max_result_rows: each gets the error naming
// it, and the daemon's peak memory grows by tens of MB (reading the whole
// commit took 2.25 GB). Its metadata alone reads one piece, and a
// smaller bound is a smaller read. The daemon runs as its own process,
// so that its memory is its own.
func TestChangeSetOfLargeCommitIsBounded(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword}, nil)
	d := dt.Remote("http://" + p.Addr)
	d.CreateDatabase(t, "big", "type Note { text: String n: Int }")
	const n = 150000
	var body strings.Builder
	for i := range n {
		fmt.Fprintf(&body, `{"@type":"Note","@id":"Note/n%06d","text":"%s","n":%d}`+"\n", i, strings.Repeat("x", 100), i)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", body.String(), "Content-Type", "application/x-ndjson")
	pid := p.Cmd.Process.Pid
	resetPeak(t, pid)
	peak0 := procMemory(t, pid, "VmHWM")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/big", `{"query":"{ _ChangeSet(commit: \"1\") { Note_added { _id text n } } }"}`, "Content-Type", "application/json")
			if !strings.Contains(string(r.Body), "graphql_max_result_rows") {
				t.Errorf("_ChangeSet of %d documents: %d %.300s", n, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	peak := procMemory(t, pid, "VmHWM")
	t.Logf("4 concurrent _ChangeSet reads of a %d-document commit: peak RSS %d -> %d KiB (+%d)", n, peak0, peak, peak-peak0)
	if peak-peak0 > 128<<10 {
		t.Errorf("the daemon's peak RSS grew by %d KiB for 4 reads of the commit, want it bounded by graphql_max_result_rows", peak-peak0)
	}
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/big", `{"query":"{ _ChangeSet(commit: \"1\") { _CommitMetadata { _id } } }"}`, "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), `{"data":{"_ChangeSet":{"_CommitMetadata":{"_id":"1"}}}`) {
		t.Errorf("the metadata of the commit: %s", r.Body)
	}
}
