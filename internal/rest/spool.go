package rest

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A write of many documents runs in one transaction, which the engine
// begins once the body has more documents than one group-commit batch
// takes. Read as it arrives, a slow body would keep that transaction open,
// with its Postgres connection and the row locks of the documents written
// so far, for as long as the client takes: at body_min_rate (8 KiB/s), a
// 64 MiB body takes more than two hours, during which every other write
// of those documents waits and vacuum cannot clean behind the
// transaction. So the engine asks for the rest of such a body before it
// begins (docStream.ReadAhead): up to spoolMemory of it in memory, the
// rest in an unlinked temporary file.
//
// What read-ahead bodies hold, in memory and in files, is bounded by a
// budget for the process (write_spool_bytes), of which one user holds at
// most a quarter: a body that finds no budget left (other bodies hold it,
// or an NDJSON stream past max_body_bytes) reads the rest as it arrives,
// inside the transaction, as before: still bounded by body_idle_timeout and
// body_min_rate. So does one whose file cannot be written (a full disk):
// the write goes on, and the failure is logged, not answered.

const (
	// spoolMemory is how much of a body is held in memory: a body up to
	// it (a write of a thousand small documents) uses no file.
	spoolMemory = 256 << 10
	// spoolStep is how much of the budget a body takes at a time for its
	// file (less when less is left of the body).
	spoolStep = 1 << 20
	// spoolShare is the part of the budget one user may hold: 1/4.
	spoolShare = 4
)

// spooler reads the bodies of writes ahead, holding at most budget bytes
// of them at once (their heads in memory, the rest in files in dir).
type spooler struct {
	dir      string
	budget   int64
	logger   *slog.Logger
	held     prometheus.Gauge   // bytes of the budget held; nil: not measured
	streamed prometheus.Counter // bodies read as they arrive for want of budget or disk; nil: not counted
	keepFree int64              // bytes left free on dir's file system (spoolDiskReserve)
	mu       sync.Mutex
	free     int64           // bytes of the budget not held
	users    map[int64]int64 // bytes each user holds
}

// newSpooler returns a spooler with a budget of budget bytes (0: bodies
// are not read ahead) whose files go in dir.
func newSpooler(dir string, budget int64, logger *slog.Logger, held prometheus.Gauge, streamed prometheus.Counter) *spooler {
	if budget <= 0 {
		return nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &spooler{dir: dir, budget: budget, free: budget, users: map[int64]int64{}, logger: logger, held: held, streamed: streamed,
		keepFree: spoolDiskReserve}
}

// take takes up to n bytes of the budget for user, as much as the budget
// and the user's share have left, and returns how many.
func (s *spooler) take(user, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, s.free, s.budget/spoolShare-s.users[user])
	if n <= 0 {
		return 0
	}
	s.free -= n
	s.users[user] += n
	if s.held != nil {
		s.held.Add(float64(n))
	}
	return n
}

// give gives back n bytes user held.
func (s *spooler) give(user, n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += n
	if s.users[user] -= n; s.users[user] <= 0 {
		delete(s.users, user)
	}
	if s.held != nil {
		s.held.Sub(float64(n))
	}
}

// spooledBody is a body read ahead: its head in memory, then what is in
// its file, then what could not be written (a failing disk), then what is
// left of the body unread. Close gives back the file and the budget.
type spooledBody struct {
	io.Reader
	s        *spooler
	user     int64
	file     *os.File
	reserved int64 // budget held
	head     int64 // of which, for the head
	written  int64 // bytes in file
	left     int64 // the body's length (-1: unknown)
}

// spool reads body for user until it ends, or until max bytes of it are
// read (0: no bound), or the budget runs out, and returns a reader of the
// same bytes; left is how long body says it is (-1: unknown). A nil
// spooler reads nothing ahead. An error of body is returned as it is.
func (s *spooler) spool(body io.Reader, user, max, left int64) (*spooledBody, error) {
	sb := &spooledBody{s: s, user: user, Reader: body, left: left}
	if s == nil {
		return sb, nil
	}
	limit := int64(spoolMemory)
	if max > 0 {
		limit = min(limit, max)
	}
	if left >= 0 {
		limit = min(limit, left+1) // its end is found with its last bytes
	}
	if sb.reserved = s.take(user, limit); sb.reserved < limit {
		s.give(user, sb.reserved)
		sb.reserved = 0
		sb.fellBack()
		return sb, nil
	}
	sb.head = limit
	head := make([]byte, limit)
	n, err := readFull(body, head)
	head = head[:n]
	switch {
	case errors.Is(err, io.EOF):
		sb.Reader = bytes.NewReader(head) // the whole body
		return sb, nil
	case err != nil:
		sb.Close()
		return nil, err
	}
	rest := int64(-1) // no bound
	if max > 0 {
		rest = max - limit
	}
	parts, err := sb.toFile(body, rest)
	if err != nil {
		sb.Close()
		return nil, err
	}
	sb.Reader = io.MultiReader(append([]io.Reader{bytes.NewReader(head)}, parts...)...)
	return sb, nil
}

// readFull reads into p until it is full or body fails or ends; unlike
// io.ReadFull it keeps body's own error (a body cut short is
// io.ErrUnexpectedEOF, which must not read as its end).
func readFull(body io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := body.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// toFile copies body into a temporary file until it ends, or most bytes
// are in it (most < 0: no bound), or the budget runs out, and returns the
// readers of what follows the head: the file, the bytes it could not
// take, the body's rest.
func (sb *spooledBody) toFile(body io.Reader, most int64) ([]io.Reader, error) {
	s := sb.s
	buf := make([]byte, 64<<10)
	var parts []io.Reader
	file := func() []io.Reader {
		if sb.file == nil {
			return parts
		}
		return append([]io.Reader{io.NewSectionReader(sb.file, 0, sb.written)}, parts...)
	}
	for most < 0 || sb.written < most {
		room := sb.reserved - sb.head - sb.written
		if room <= 0 {
			step := int64(spoolStep)
			if sb.left >= 0 {
				step = min(step, max(sb.left+1-sb.head-sb.written, 1))
			}
			if !s.diskHas(step) {
				sb.fellBack()
				return append(file(), body), nil
			}
			got := s.take(sb.user, step)
			if got == 0 {
				sb.fellBack()
				return append(file(), body), nil
			}
			sb.reserved += got
			continue
		}
		want := min(int64(len(buf)), room)
		if most >= 0 {
			want = min(want, most-sb.written)
		}
		n, rerr := body.Read(buf[:want])
		if n > 0 {
			if err := sb.write(buf[:n]); err != nil {
				// The bytes read stay in memory (at most one piece), and
				// the rest is read as it arrives.
				s.logger.Warn("a write's body could not be held in a temporary file; the rest is read as it arrives, inside its transaction", "dir", s.dir, "err", err)
				parts = append(parts, bytes.NewReader(bytes.Clone(buf[:n])))
				sb.fellBack()
				switch {
				case errors.Is(rerr, io.EOF):
					return file(), nil
				case rerr != nil:
					return nil, rerr
				}
				return append(file(), body), nil
			}
		}
		if errors.Is(rerr, io.EOF) {
			return file(), nil
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	return append(file(), body), nil
}

// diskHas reports whether the spool's file system can take n bytes more
// and still keep keepFree free (or a tenth of it, if smaller):
// with the embedded Postgres the spool shares data_dir with the cluster,
// whose WAL must never find the disk full. Where the free space cannot
// be read, it says yes.
func (s *spooler) diskHas(n int64) bool {
	free, total, ok := diskSpace(s.dir)
	if !ok {
		return true
	}
	return free-n >= min(s.keepFree, total/10)
}

// spoolDiskReserve is what the spool leaves free on its file system.
const spoolDiskReserve = 1 << 30

// fellBack counts a body that reads (some of) its rest as it arrives.
func (sb *spooledBody) fellBack() {
	if sb.s.streamed != nil {
		sb.s.streamed.Inc()
	}
}

// write appends p to the file, creating it first.
func (sb *spooledBody) write(p []byte) error {
	if sb.file == nil {
		f, err := os.CreateTemp(sb.s.dir, "sluice-body-")
		if err != nil {
			return err
		}
		// Unlinked at once: the file is gone when closed, or when the
		// process dies, whatever happens to the request.
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return err
		}
		sb.file = f
	}
	if _, err := sb.file.Write(p); err != nil {
		return err
	}
	sb.written += int64(len(p))
	return nil
}

// Close removes the file and gives back the budget; the reader must not
// be used after it. A nil spooledBody (nothing read ahead) does nothing.
func (sb *spooledBody) Close() {
	if sb == nil || sb.s == nil {
		return
	}
	if sb.file != nil {
		sb.file.Close()
		sb.file = nil
	}
	sb.s.give(sb.user, sb.reserved)
	sb.reserved = 0
}
