package gqltransport

import (
	"bytes"
	"testing"
)

// TestIdleConnectionKeepsSmallBuffers: after a large result is written, a
// connection keeps at most muxKeepBytes of buffer for its next messages:
// the queue's and the writer's spare let go of what the result grew (an
// idle socket kept 383 KiB after two results of 194 KB, for its life).
func TestIdleConnectionKeepsSmallBuffers(t *testing.T) {
	o := newMuxOut(make(chan struct{}))
	big := bytes.Repeat([]byte("x"), 194<<10)
	o.add(big)
	buf, _ := o.take(nil)
	if len(buf) != len(big) {
		t.Fatalf("took %d bytes, want %d", len(buf), len(big))
	}
	// The writer hands the written buffer back as its spare.
	o.add([]byte("small"))
	if _, _ = o.take(reusable(buf)); cap(o.buf) > muxKeepBytes {
		t.Errorf("the queue keeps a buffer of %d bytes after a large result, want at most %d", cap(o.buf), muxKeepBytes)
	}
	if kept := reusable(buf); kept != nil {
		t.Errorf("the writer keeps a spare of %d bytes, want none past %d", cap(kept), muxKeepBytes)
	}
	if small := make([]byte, 0, 4<<10); cap(reusable(small)) != 4<<10 {
		t.Error("a small buffer is not kept for the next messages")
	}
}
