package gqltransport

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
)

// countEvents is a _ChangeSet subscription that only counts the commits
// it is given to evaluate and their changes.
type countEvents struct{ commits, changes int }

func (c *countEvents) PerCommit() bool { return true }

func (c *countEvents) events(_ context.Context, cm *sluice.Commit) ([]graph.SubscriptionEvent, error) {
	c.commits++
	c.changes += len(cm.Changes)
	return nil, nil
}

// tinyDeletes calls piece with the pieces of commit seq, n deletions of
// documents of one short field, as the change feed reads them: pieces of
// about pieceBytes of change images, each change with strings and an
// image of its own (as decoded from a row), the last piece not Partial.
func tinyDeletes(seq int64, n, pieceBytes int, piece func(*sluice.Commit)) (imageBytes int64) {
	c := &sluice.Commit{Epoch: "e", Seq: seq, NumChanges: n, Partial: true}
	size := 0
	for i := range n {
		before := []byte(`{"f":"x` + strconv.Itoa(i%10) + `"}`)
		c.Changes = append(c.Changes, sluice.Change{Index: i, Class: string([]byte("T")), DocID: "T/" + strconv.Itoa(1e6+i), Op: sluice.OpDeleted, Before: before})
		size += len(before)
		imageBytes += int64(len(before))
		if size >= pieceBytes || i == n-1 {
			c.Partial = i < n-1
			piece(c)
			c = &sluice.Commit{Epoch: "e", Seq: seq, NumChanges: n, Partial: true}
			size = 0
		}
	}
	return imageBytes
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestChangeSetAssemblyMemory measures what the assembler holds while it
// gathers a commit of 200,000 deletions of one short field each, against
// the image bytes and what its budget counts, and writes it to the file
// SLUICE_ASSEMBLY_MEMORY names (skipped without it: a measurement, not
// a check).
func TestChangeSetAssemblyMemory(t *testing.T) {
	out := os.Getenv("SLUICE_ASSEMBLY_MEMORY")
	if out == "" {
		t.Skip("set SLUICE_ASSEMBLY_MEMORY to a file to measure")
	}
	const n = 200_000
	a := &assembler{} // no byte bound: everything is gathered
	ev := &countEvents{}
	base := heapInUse()
	var held uint64
	var counted int64
	images := tinyDeletes(1, n, 64<<10, func(c *sluice.Commit) {
		if !c.Partial {
			// Every piece but the last one gathered.
			held, counted = heapInUse()-base, a.size
		}
		if _, _, err := a.events(context.Background(), ev, c); err != nil {
			t.Fatal(err)
		}
	})
	if ev.changes != n {
		t.Fatalf("evaluated %d changes, want %d", ev.changes, n)
	}
	report := fmt.Sprintf("assembling a commit of %d deletions of one short field (%d bytes of change images): before its last piece, %d bytes of heap held (%.1f× the images, %d bytes a change), %d bytes counted by the budget (%d a change)\n",
		n, images, held, float64(held)/float64(images), held/n, counted, counted/n)
	t.Log(report)
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
}
