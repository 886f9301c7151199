package rest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice"
)

// A write of many documents runs in one transaction, which the engine
// begins once the body has more documents than one group-commit batch
// takes. Read as it arrives, a slow body would keep that transaction open,
// with its Postgres connection and the row locks of the documents written
// so far, for as long as the client takes: at body_min_rate (8 KiB/s), a
// 64 MiB body takes more than two hours, during which every other write
// of those documents waits and vacuum cannot clean behind the
// transaction. So a write's body is read whole before the engine sees
// it: up to spoolMemory in memory, the rest into an unlinked temporary
// file, within a process-wide budget of disk (write_spool_bytes). A body
// that does not fit the budget (other bodies hold it, or an NDJSON stream
// longer than max_body_bytes) reads what is left as it arrives, inside
// the transaction, as before: still bounded by body_idle_timeout and
// body_min_rate.

const (
	// spoolMemory is how much of a body is held in memory: a body up to
	// it (a write of a thousand small documents) uses no file.
	spoolMemory = 256 << 10
	// spoolStep is how much of the disk budget a body takes at a time.
	spoolStep = 1 << 20
)

// spooler reads the bodies of writes before their transactions begin,
// holding at most budget bytes of them on disk at once (in dir).
type spooler struct {
	dir   string
	gauge prometheus.Gauge // bytes on disk now; nil: not measured
	mu    sync.Mutex
	free  int64 // bytes of the disk budget not taken
}

// newSpooler returns a spooler with a disk budget of budget bytes (0:
// bodies are not spooled) in dir ("": the system's temporary directory).
func newSpooler(dir string, budget int64, gauge prometheus.Gauge) *spooler {
	if budget <= 0 {
		return nil
	}
	if dir == "" {
		dir = os.TempDir()
	}
	return &spooler{dir: dir, free: budget, gauge: gauge}
}

// spooledBody is a body read ahead: its bytes in memory, then in a file,
// then what is left of the body unread. Close gives back the file and its
// budget.
type spooledBody struct {
	io.Reader
	s        *spooler
	file     *os.File
	reserved int64 // budget taken
	written  int64 // bytes in file
}

// spool reads body until it ends, or until max bytes of it are read (0:
// no bound), or the disk budget runs out, and returns a reader of the
// same bytes; left, when not 0, is how long body says it is. A nil
// spooler spools nothing. An error of body is returned as it is; a disk
// that fails is a 503.
func (s *spooler) spool(body io.Reader, max, left int64) (*spooledBody, error) {
	sb := &spooledBody{s: s}
	if s == nil {
		sb.Reader = body
		return sb, nil
	}
	var head bytes.Buffer
	limit := int64(spoolMemory)
	if max > 0 {
		limit = min(limit, max)
	}
	if left > 0 {
		// Room for all of it and the read that finds its end: growing
		// as it comes copied it several times.
		head.Grow(int(min(left, limit)) + bytes.MinRead)
	}
	if _, err := head.ReadFrom(io.LimitReader(body, limit)); err != nil {
		return nil, err
	}
	if int64(head.Len()) < limit {
		sb.Reader = bytes.NewReader(head.Bytes()) // the whole body
		return sb, nil
	}
	ended, err := sb.toFile(body, max-limit)
	if err != nil {
		sb.Close()
		return nil, err
	}
	parts := []io.Reader{bytes.NewReader(head.Bytes())}
	if sb.file != nil {
		parts = append(parts, io.NewSectionReader(sb.file, 0, sb.written))
	}
	if !ended {
		parts = append(parts, body)
	}
	sb.Reader = io.MultiReader(parts...)
	return sb, nil
}

// toFile copies body into a temporary file until it ends (ended), until
// max bytes (max < 0: no bound) or the budget runs out.
func (sb *spooledBody) toFile(body io.Reader, max int64) (ended bool, err error) {
	s := sb.s
	buf := make([]byte, 64<<10)
	for max < 0 || sb.written < max {
		if sb.reserved-sb.written < int64(len(buf)) {
			if !s.take(spoolStep) {
				return false, nil // the rest is read as it arrives
			}
			sb.reserved += spoolStep
		}
		want := int64(len(buf))
		if max >= 0 {
			want = min(want, max-sb.written)
		}
		n, rerr := body.Read(buf[:want])
		if n > 0 {
			if err := sb.write(buf[:n]); err != nil {
				return false, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return true, nil
		}
		if rerr != nil {
			return false, rerr
		}
	}
	return false, nil
}

// write appends p to the file, creating it first.
func (sb *spooledBody) write(p []byte) error {
	if sb.file == nil {
		f, err := os.CreateTemp(sb.s.dir, "sluice-body-")
		if err != nil {
			return spoolError(err)
		}
		// Unlinked at once: the file is gone when closed, or when the
		// process dies, whatever happens to the request.
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return spoolError(err)
		}
		sb.file = f
	}
	if _, err := sb.file.Write(p); err != nil {
		return spoolError(err)
	}
	sb.written += int64(len(p))
	if sb.s.gauge != nil {
		sb.s.gauge.Add(float64(len(p)))
	}
	return nil
}

// spoolError is the error of a spool file that could not be written
// (the disk full, its directory missing): the request may succeed later.
func spoolError(err error) error {
	return &sluice.Error{Code: sluice.CodeUnavailable, Message: "could not hold the request body in a temporary file before writing it: " + err.Error()}
}

// take takes n bytes of the disk budget, if it has them.
func (s *spooler) take(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free < n {
		return false
	}
	s.free -= n
	return true
}

// Close removes the file and gives back the budget; the reader must not
// be used after it. A nil spooledBody (nothing spooled) does nothing.
func (sb *spooledBody) Close() {
	if sb == nil || sb.s == nil {
		return
	}
	s := sb.s
	if sb.file != nil {
		sb.file.Close()
		if s.gauge != nil {
			s.gauge.Sub(float64(sb.written))
		}
		sb.file = nil
	}
	if sb.reserved > 0 {
		s.mu.Lock()
		s.free += sb.reserved
		s.mu.Unlock()
		sb.reserved = 0
	}
}
