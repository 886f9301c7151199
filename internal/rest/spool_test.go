package rest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice"
)

// TestSpoolReadsBodiesWhole: a spooled body reads back the same bytes
// whatever its length, holding in memory, in its file and unread just
// what the bounds say; its file is unlinked at once, and Close gives the
// budget and the gauge back.
func TestSpoolReadsBodiesWhole(t *testing.T) {
	const budget = 3 * spoolStep
	for _, tc := range []struct {
		name    string
		size    int
		max     int64
		onDisk  int64 // bytes in the file
		unread  bool  // the body is not read to its end
		noSpool bool
	}{
		{name: "empty", size: 0},
		{name: "in memory", size: spoolMemory - 1},
		{name: "memory's size", size: spoolMemory},
		{name: "a byte past memory", size: spoolMemory + 1, onDisk: 1},
		{name: "on disk", size: spoolMemory + 2*spoolStep + 5, onDisk: 2*spoolStep + 5},
		{name: "past the budget", size: spoolMemory + 5*spoolStep, onDisk: budget, unread: true},
		{name: "past max", size: spoolMemory + spoolStep, max: spoolMemory + 1000, onDisk: 1000, unread: true},
		{name: "no spooler", size: spoolMemory + spoolStep, unread: true, noSpool: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
			s := newSpooler(dir, budget, gauge)
			if tc.noSpool {
				s = newSpooler(dir, 0, gauge)
			}
			want := make([]byte, tc.size)
			for i := range want {
				want[i] = byte(rand.IntN(256))
			}
			body := &countingReader{r: bytes.NewReader(want)}
			sb, err := s.spool(body, tc.max, int64(tc.size))
			if err != nil {
				t.Fatal(err)
			}
			if got := gaugeValue(gauge); got != float64(tc.onDisk) {
				t.Errorf("gauge %v, want %d", got, tc.onDisk)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the spool's file is in %s: %v", dir, entries)
			}
			if body.eof == tc.unread {
				t.Errorf("read %d of %d bytes before the write (eof %v), want it read whole: %v", body.n, tc.size, body.eof, !tc.unread)
			}
			got, err := io.ReadAll(sb)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes (%v), want the %d sent", len(got), err, len(want))
			}
			sb.Close()
			if s != nil && s.free != budget {
				t.Errorf("budget after Close: %d, want %d", s.free, budget)
			}
			if got := gaugeValue(gauge); got != 0 {
				t.Errorf("gauge after Close: %v", got)
			}
		})
	}
}

// TestSpoolErrors: an error of the body is the spool's; a spool file that
// cannot be made is a 503 naming why; either way nothing stays held.
func TestSpoolErrors(t *testing.T) {
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	s := newSpooler(t.TempDir(), 4*spoolStep, gauge)
	broken := errors.New("connection reset")
	if _, err := s.spool(io.MultiReader(bytes.NewReader(make([]byte, spoolMemory+10)), &failingReader{broken}), 0, 0); !errors.Is(err, broken) {
		t.Errorf("a body failing: %v", err)
	}
	if s.free != 4*spoolStep || gaugeValue(gauge) != 0 {
		t.Errorf("after a failed body: budget %d, gauge %v", s.free, gaugeValue(gauge))
	}
	s = newSpooler(filepath.Join(t.TempDir(), "missing"), 4*spoolStep, gauge)
	_, err := s.spool(bytes.NewReader(make([]byte, spoolMemory+10)), 0, 0)
	if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeUnavailable {
		t.Errorf("no directory: %v", err)
	}
	if s.free != 4*spoolStep {
		t.Errorf("after a failed file: budget %d", s.free)
	}
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

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}
