package rest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestSpoolReadsBodiesWhole: a body read ahead reads back the same bytes
// whatever its length, having read ahead just what the bounds say (max,
// the user's share of the budget), its file unlinked at once; what it
// holds counts against the budget until Close gives it back.
func TestSpoolReadsBodiesWhole(t *testing.T) {
	const budget = 16 * spoolStep // a user's share: 4 MiB
	for _, tc := range []struct {
		name     string
		size     int
		max      int64
		unknown  bool  // the body's length is not known ahead
		onDisk   int64 // bytes in the file
		unread   bool  // the body is not read to its end ahead
		noSpool  bool
		fellBack bool
	}{
		{name: "empty", size: 0},
		{name: "in memory", size: spoolMemory - 1},
		{name: "memory's size", size: spoolMemory},
		{name: "a byte past memory", size: spoolMemory + 1, onDisk: 1},
		{name: "on disk", size: spoolMemory + 2*spoolStep + 5, onDisk: 2*spoolStep + 5},
		{name: "on disk, length unknown", size: spoolMemory + 2*spoolStep + 5, unknown: true, onDisk: 2*spoolStep + 5},
		{name: "past the user's share", size: spoolMemory + 5*spoolStep, onDisk: budget/spoolShare - spoolMemory, unread: true, fellBack: true},
		{name: "past max", size: spoolMemory + spoolStep, max: spoolMemory + 1000, onDisk: 1000, unread: true},
		{name: "no spooler", size: spoolMemory + spoolStep, unread: true, noSpool: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			held := prometheus.NewGauge(prometheus.GaugeOpts{Name: "held"})
			streamed := prometheus.NewCounter(prometheus.CounterOpts{Name: "streamed"})
			s := newSpooler(dir, budget, nil, held, streamed)
			if tc.noSpool {
				s = newSpooler(dir, 0, nil, held, streamed)
			} else {
				s.keepFree = 0 // whatever the machine's disk has free
			}
			want := make([]byte, tc.size)
			for i := range want {
				want[i] = byte(rand.IntN(256))
			}
			body := &countingReader{r: bytes.NewReader(want)}
			left := int64(tc.size)
			if tc.unknown {
				left = -1
			}
			sb, err := s.spool(body, 7, tc.max, left)
			if err != nil {
				t.Fatal(err)
			}
			if sb.written != tc.onDisk {
				t.Errorf("%d bytes in the file, want %d", sb.written, tc.onDisk)
			}
			if s != nil {
				if h := metricValue(held); h != float64(budget-s.free) || h < float64(tc.onDisk) || h > budget/spoolShare {
					t.Errorf("held %v (the budget has %d free), want at least the %d in the file, at most a share", h, s.free, tc.onDisk)
				}
			}
			if got := metricValue(streamed) == 1; got != tc.fellBack {
				t.Errorf("counted as read as it arrives: %v, want %v", got, tc.fellBack)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the spool's file is in %s: %v", dir, entries)
			}
			if body.eof == tc.unread {
				t.Errorf("read %d of %d bytes ahead (eof %v), want it read whole: %v", body.n, tc.size, body.eof, !tc.unread)
			}
			got, err := io.ReadAll(sb)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes (%v), want the %d sent", len(got), err, len(want))
			}
			sb.Close()
			sb.Close() // twice does nothing more
			if s != nil && (s.free != budget || len(s.users) != 0) {
				t.Errorf("after Close: %d of the budget free, users %v", s.free, s.users)
			}
			if got := metricValue(held); got != 0 {
				t.Errorf("held after Close: %v", got)
			}
		})
	}
}

// TestSpoolBudget: one user holds at most a quarter of the budget, all
// users together the budget; a body past what is left reads the rest as
// it arrives, and one whose head finds nothing left reads nothing ahead.
func TestSpoolBudget(t *testing.T) {
	const budget = 8 * spoolMemory // a user's share: 2 heads
	s := newSpooler(t.TempDir(), budget, nil, nil, nil)
	s.keepFree = 0 // whatever the machine's disk has free
	body := func() io.Reader { return bytes.NewReader(make([]byte, 4*spoolMemory)) }
	var held []*spooledBody
	for user := range int64(4) {
		sb, err := s.spool(body(), user, 0, 4*spoolMemory)
		if err != nil {
			t.Fatal(err)
		}
		if s.users[user] != budget/spoolShare || sb.written != budget/spoolShare-spoolMemory {
			t.Fatalf("user %d holds %d of the budget, %d in its file; want a share, %d", user, s.users[user], sb.written, budget/spoolShare-spoolMemory)
		}
		held = append(held, sb)
	}
	if s.free != 0 {
		t.Fatalf("%d of the budget free, want none", s.free)
	}
	sb, err := s.spool(body(), 9, 0, 4*spoolMemory)
	if err != nil || sb.reserved != 0 {
		t.Fatalf("a body past the budget: %d held, %v", sb.reserved, err)
	}
	if n, _ := io.Copy(io.Discard, sb); n != 4*spoolMemory {
		t.Fatalf("read %d bytes of it", n)
	}
	for _, sb := range held {
		sb.Close()
	}
	if s.free != budget || len(s.users) != 0 {
		t.Fatalf("after Close: %d free, users %v", s.free, s.users)
	}
}

// TestSpoolErrors: an error of the body is the spool's, and holds
// nothing; a file that cannot be written makes the body read the rest as
// it arrives, every byte still there.
func TestSpoolErrors(t *testing.T) {
	s := newSpooler(t.TempDir(), 16*spoolStep, nil, nil, nil)
	broken := errors.New("connection reset")
	if _, err := s.spool(io.MultiReader(bytes.NewReader(make([]byte, spoolMemory+10)), &failingReader{broken}), 1, 0, -1); !errors.Is(err, broken) {
		t.Errorf("a body failing: %v", err)
	}
	if s.free != 16*spoolStep {
		t.Errorf("after a failed body: %d free", s.free)
	}
	streamed := prometheus.NewCounter(prometheus.CounterOpts{Name: "streamed"})
	s = newSpooler(filepath.Join(t.TempDir(), "missing"), 16*spoolStep, nil, nil, streamed)
	want := make([]byte, spoolMemory+3*(64<<10))
	for i := range want {
		want[i] = byte(i)
	}
	sb, err := s.spool(bytes.NewReader(want), 1, 0, int64(len(want)))
	if err != nil {
		t.Fatalf("no directory: %v", err)
	}
	got, err := io.ReadAll(sb)
	if err != nil || !bytes.Equal(got, want) || metricValue(streamed) != 1 {
		t.Fatalf("no directory: read back %d of %d bytes (%v), counted %v", len(got), len(want), err, metricValue(streamed))
	}
	sb.Close()
	if s.free != 16*spoolStep {
		t.Errorf("after a failed file: %d free", s.free)
	}
}

// TestSpoolKeepsATruncatedBodysError: a body cut short (its client gone
// before its announced end: io.ErrUnexpectedEOF) fails when read ahead,
// as it does read as it arrives, in its head or past it; an NDJSON
// stream cut at a line's end is not taken for a whole one.
func TestSpoolKeepsATruncatedBodysError(t *testing.T) {
	for _, size := range []int{1000, spoolMemory + 5000} {
		s := newSpooler(t.TempDir(), 16*spoolStep, nil, nil, nil)
		sb, err := s.spool(&truncated{r: bytes.NewReader(make([]byte, size))}, 1, 0, int64(size)+5000)
		if err == nil {
			_, err = io.ReadAll(sb)
			sb.Close()
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("a body cut after %d bytes: %v, want io.ErrUnexpectedEOF", size, err)
		}
		if s.free != 16*spoolStep {
			t.Errorf("after a body cut after %d bytes: %d free", size, s.free)
		}
	}
	var body bytes.Buffer
	for i := range 150 {
		fmt.Fprintf(&body, `{"@type":"Note","@id":"n%d"}`+"\n", i)
	}
	src, err := newDocStream(&truncated{r: bytes.NewReader(body.Bytes())}, 1<<20, int64(body.Len())+10000)
	if err != nil {
		t.Fatal(err)
	}
	src.spooler = newSpooler(t.TempDir(), 16*spoolStep, nil, nil, nil)
	defer src.Close()
	for n := 0; ; n++ {
		if n == 101 {
			if err := src.ReadAhead(); err != nil {
				break // refused: fine
			}
		}
		if _, err := src.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				t.Errorf("%d documents and a clean end of a body cut short", n)
			}
			break
		}
	}
}

// truncated is a body whose client went away before its announced end:
// net/http answers io.ErrUnexpectedEOF for such a body.
type truncated struct {
	r    io.Reader
	done bool
}

func (t *truncated) Read(p []byte) (int, error) {
	if t.done {
		return 0, io.EOF
	}
	n, err := t.r.Read(p)
	if err == io.EOF {
		t.done = true
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

type countingReader struct {
	r   io.Reader
	n   int64
	eof bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

// metricValue reads a gauge's or a counter's value.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestSpoolLeavesTheDiskSomeRoom: a spool whose file system would have
// less than spoolDiskReserve (or a tenth of it) left takes nothing more
// on disk: with the embedded Postgres it shares data_dir with the cluster.
func TestSpoolLeavesTheDiskSomeRoom(t *testing.T) {
	s := newSpooler(t.TempDir(), 16*spoolStep, nil, nil, nil)
	free, total, ok := diskSpace(s.dir)
	if !ok {
		t.Skip("the free space of this file system cannot be read here")
	}
	if s.diskHas(free) {
		t.Errorf("the spool would take all %d free bytes of %d", free, total)
	}
}
