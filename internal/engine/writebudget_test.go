package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/schema"
)

// jsonDocs is an engine.DocSource over documents' JSON text. When stall is
// not nil, after its last document it closes asked and waits for stall to
// be closed before it ends: a request body that stops arriving.
type jsonDocs struct {
	docs  [][]byte
	stall chan struct{}
	asked chan struct{}
	once  sync.Once
}

func (j *jsonDocs) Next() (schema.RawDocument, error) {
	if len(j.docs) == 0 {
		if j.stall != nil {
			j.once.Do(func() { close(j.asked) })
			<-j.stall
		}
		return schema.RawDocument{}, io.EOF
	}
	d := j.docs[0]
	j.docs = j.docs[1:]
	return schema.RawDocument{JSON: d}, nil
}

// notes returns n Notes, keyed prefix0…, each of a text of size bytes.
func notes(prefix string, n, size int) [][]byte {
	text := strings.Repeat("x", size)
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"@type":"Note","@id":"%s%d","text":%q}`, prefix, i, text)
	}
	return out
}

// newWriter creates user rita, who may write to database db.
func newWriter(t *testing.T, e *engine.Engine, admin *sluice.User) *sluice.User {
	t.Helper()
	ctx := context.Background()
	u, err := e.CreateUser(ctx, admin, engine.AdminOrg, "rita", "rita-password")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetRole(ctx, admin, engine.AdminOrg, "db", "rita", sluice.RoleWrite); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestWriteBytesAreBudgeted: the documents of writes in progress hold at
// most write_bytes_per_user of JSON for one user and write_bytes for the
// process (the super user's too). A write whose documents do not fit
// waits for the budget, and past its wait is refused naming the setting
// (429 for the user's share, 503 for the process's), having written
// nothing; once the write holding it ends, it is written.
func TestWriteBytesAreBudgeted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name           string
		total, perUser int64
		code           sluice.Code
		setting        string
		superUser      bool
	}{
		{"per user", 64 << 20, 1 << 20, sluice.CodeTooMany, "write_bytes_per_user", false},
		{"per process", 1 << 20, 0, sluice.CodeUnavailable, "write_bytes", false},
		{"per process, the super user", 1 << 20, 0, sluice.CodeUnavailable, "write_bytes", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, _, admin := newEngine(t)
			e.LimitWriteBytes(c.total, c.perUser)
			e.WaitForWriteBytes(200 * time.Millisecond)
			if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
				t.Fatal(err)
			}
			u := admin
			if !c.superUser {
				u = newWriter(t, e, admin)
			}
			// A holds one document of 600 KB, its body stalled after it.
			held := &jsonDocs{docs: notes("a", 1, 600<<10), stall: make(chan struct{}), asked: make(chan struct{})}
			answered := make(chan error, 1)
			go func() {
				_, err := e.Insert(ctx, u, engine.AdminOrg, "db", held, engine.WriteOptions{})
				answered <- err
			}()
			<-held.asked
			if n, _ := e.WriteBytes(); n < 600<<10 {
				t.Fatalf("the stalled write holds %d bytes of the budget, want its document's 600 KB", n)
			}
			// B's document of 600 KB does not fit beside it.
			_, err := e.Insert(ctx, u, engine.AdminOrg, "db", &jsonDocs{docs: notes("b", 1, 600<<10)}, engine.WriteOptions{})
			if se, ok := errors.AsType[*sluice.Error](err); !ok || se.Code != c.code || !strings.Contains(se.Message, c.setting) {
				t.Fatalf("a write past the budget: %v, want %s naming %s", err, c.code, c.setting)
			}
			// A small one does.
			if _, err := e.Insert(ctx, u, engine.AdminOrg, "db", &jsonDocs{docs: notes("c", 1, 100<<10)}, engine.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			close(held.stall)
			if err := <-answered; err != nil {
				t.Fatal(err)
			}
			if _, err := e.Insert(ctx, u, engine.AdminOrg, "db", &jsonDocs{docs: notes("b", 1, 600<<10)}, engine.WriteOptions{}); err != nil {
				t.Fatalf("the write refused, once the budget was given back: %v", err)
			}
			if n, _ := e.WriteBytes(); n != 0 {
				t.Fatalf("writes that ended hold %d bytes of the budget", n)
			}
		})
	}
}

// TestWritesLargerThanTheBudgetAreWritten: a write holding more JSON than
// its user may hold at once (few large documents, or many) is written
// within that budget: it never waits for the budget while it holds some
// that only its own progress gives back. A small write (up to 100
// documents) whose next document must wait becomes a large one, written
// in chunks, and a large one sends what it holds back before it waits.
// Each document larger than the user's share is charged the share.
func TestWritesLargerThanTheBudgetAreWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	const share = 3 << 20
	e.LimitWriteBytes(64<<20, share)
	// A write that waited for what only its own progress gives back would
	// wait for good: any bound fails it. A write's next document waits
	// meanwhile for its writer to send the one before (a 4 MB document
	// took over 2 s under -race on a loaded CI machine).
	e.WaitForWriteBytes(20 * time.Second)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	u := newWriter(t, e, admin)
	for _, c := range []struct {
		name    string
		n, size int
	}{
		{"12 documents of 600 KB", 12, 600 << 10},
		{"90 documents of 60 KB", 90, 60 << 10},
		{"2 documents of 4 MB", 2, 4 << 20},
		{"300 documents of 20 KB", 300, 20 << 10},
	} {
		prefix := fmt.Sprintf("n%d_", c.n)
		res, err := e.Insert(ctx, u, engine.AdminOrg, "db", &jsonDocs{docs: notes(prefix, c.n, c.size)}, engine.WriteOptions{})
		if err != nil {
			t.Fatalf("insert of %s: %v", c.name, err)
		}
		if len(res.IDs) != c.n {
			t.Fatalf("insert of %s wrote %d documents", c.name, len(res.IDs))
		}
		if _, err := e.Replace(ctx, u, engine.AdminOrg, "db", &jsonDocs{docs: notes(prefix, c.n, c.size)}, engine.WriteOptions{}); err != nil {
			t.Fatalf("replace of %s: %v", c.name, err)
		}
		if held, peak := e.WriteBytes(); held != 0 || peak > share {
			t.Fatalf("after %s: writes hold %d bytes of the budget, and held %d at most, want 0 and at most %d", c.name, held, peak, share)
		}
	}
}

// TestSuperUserIsHeldToTheProcessBudgetOnly: the super user's writes are
// not held to write_bytes_per_user, as they are not to the other per-user
// budgets: beside a write of its own holding 600 KB of a 1 MB share, a
// write of 600 KB is written at once, and a document larger than the
// share is charged its size, not the share; write_bytes still bounds them
// (TestWriteBytesAreBudgeted).
func TestSuperUserIsHeldToTheProcessBudgetOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	e.LimitWriteBytes(64<<20, 1<<20)
	e.WaitForWriteBytes(200 * time.Millisecond)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	held := &jsonDocs{docs: notes("a", 1, 600<<10), stall: make(chan struct{}), asked: make(chan struct{})}
	answered := make(chan error, 1)
	go func() {
		_, err := e.Insert(ctx, admin, engine.AdminOrg, "db", held, engine.WriteOptions{})
		answered <- err
	}()
	<-held.asked
	if _, err := e.Insert(ctx, admin, engine.AdminOrg, "db", &jsonDocs{docs: notes("b", 1, 600<<10)}, engine.WriteOptions{}); err != nil {
		t.Fatalf("the super user's write beside another of its own: %v", err)
	}
	close(held.stall)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if _, err := e.Insert(ctx, admin, engine.AdminOrg, "db", &jsonDocs{docs: notes("c", 1, 2<<20)}, engine.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if held, peak := e.WriteBytes(); held != 0 || peak < 2<<20 {
		t.Fatalf("writes hold %d bytes of the budget, and held %d at most, want 0 and a document of 2 MB's size at least", held, peak)
	}
}

// TestLargeWriteWaitingIsNotOvertaken: writes waiting for write_bytes
// take it in arrival order. While a stalled write holds 600 KB of 1 MB and
// a write of a 600 KB document waits for the budget, writes of 100 KB,
// which would fit beside the stalled one, wait behind it, the same user's
// or another's, instead of taking what is given back before it fits (a
// stream of them starved it until it was refused). A user waiting for
// its own share keeps back no other user.
func TestLargeWriteWaitingIsNotOvertaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	e.LimitWriteBytes(1<<20, 0)
	e.WaitForWriteBytes(time.Minute)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	rita := newWriter(t, e, admin)
	waiting := func(n int) {
		t.Helper()
		eventually.True(t, 10*time.Second, fmt.Sprintf("%d writes waiting for the budget", n), func() bool {
			_, w := e.WriteBudget()
			return w == n
		})
	}
	held := &jsonDocs{docs: notes("a", 1, 600<<10), stall: make(chan struct{}), asked: make(chan struct{})}
	type answer struct {
		what string
		err  error
	}
	answers := make(chan answer, 4)
	insert := func(what string, u *sluice.User, src engine.DocSource) {
		go func() {
			_, err := e.Insert(ctx, u, engine.AdminOrg, "db", src, engine.WriteOptions{})
			answers <- answer{what, err}
		}()
	}
	insert("the stalled write", admin, held)
	<-held.asked
	insert("the large write", rita, &jsonDocs{docs: notes("l", 1, 600<<10)})
	waiting(1)
	insert("a small write of another user", admin, &jsonDocs{docs: notes("s", 1, 100<<10)})
	waiting(2)
	insert("a small write of the same user", rita, &jsonDocs{docs: notes("r", 1, 100<<10)})
	waiting(3)
	close(held.stall)
	for range 4 {
		if a := <-answers; a.err != nil {
			t.Fatalf("%s: %v", a.what, a.err)
		}
	}
	if n, _ := e.WriteBytes(); n != 0 {
		t.Fatalf("writes that ended hold %d bytes of the budget", n)
	}
}

// TestUserWaitingForItsShareKeepsBackNoOther: a write waiting for its
// user's write_bytes_per_user keeps back that user's later writes only:
// another's is written at once.
func TestUserWaitingForItsShareKeepsBackNoOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	e.LimitWriteBytes(64<<20, 1<<20)
	e.WaitForWriteBytes(time.Minute)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	rita := newWriter(t, e, admin)
	held := &jsonDocs{docs: notes("a", 1, 600<<10), stall: make(chan struct{}), asked: make(chan struct{})}
	answers := make(chan error, 2)
	go func() {
		_, err := e.Insert(ctx, rita, engine.AdminOrg, "db", held, engine.WriteOptions{})
		answers <- err
	}()
	<-held.asked
	go func() {
		_, err := e.Insert(ctx, rita, engine.AdminOrg, "db", &jsonDocs{docs: notes("l", 1, 600<<10)}, engine.WriteOptions{})
		answers <- err
	}()
	eventually.True(t, 10*time.Second, "rita's second write waiting for her share", func() bool {
		_, w := e.WriteBudget()
		return w == 1
	})
	if _, err := e.Insert(ctx, admin, engine.AdminOrg, "db", &jsonDocs{docs: notes("s", 1, 600<<10)}, engine.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	close(held.stall)
	for range 2 {
		if err := <-answers; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriteChargeWaitsHoldingNothing: a WriteCharge (a REST patch's, a
// GraphQL mutation's) grows by what fits at once; what does not, it
// waits for whole, having given back what it held, so that a write never
// waits for what only its own progress gives back, and it waits in turn
// with the other writes (sluice_write_bytes_waiting). It is charged at
// most its user's share; the super user's, its whole size.
func TestWriteChargeWaitsHoldingNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	e.LimitWriteBytes(4<<20, 1<<20)
	e.WaitForWriteBytes(time.Minute)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	rita := newWriter(t, e, admin)
	held := func(want int64) {
		t.Helper()
		if got, _ := e.WriteBytes(); got != want {
			t.Fatalf("the budget holds %d bytes, want %d", got, want)
		}
	}
	c1, c2 := e.ChargeWrite(rita), e.ChargeWrite(rita)
	defer c1.Release()
	defer c2.Release()
	if err := c1.Grow(ctx, 600<<10); err != nil {
		t.Fatal(err)
	}
	if err := c2.Grow(ctx, 100<<10); err != nil {
		t.Fatal(err)
	}
	held(700 << 10)
	// 600 KB does not fit beside c1's: c2 gives back its 100 KB and
	// waits for the whole, here until its context ends.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c2.Grow(short, 600<<10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a charge past rita's share: %v, want it to wait until its context ended", err)
	}
	held(600 << 10)
	grown := make(chan error, 1)
	go func() { grown <- c2.Grow(ctx, 600<<10) }()
	eventually.True(t, 10*time.Second, "c2 waiting for the budget", func() bool {
		_, w := e.WriteBudget()
		return w == 1
	})
	c1.Release()
	if err := <-grown; err != nil {
		t.Fatal(err)
	}
	held(600 << 10)
	// Charged rita's share at most.
	if err := c2.Grow(ctx, 3<<20); err != nil {
		t.Fatal(err)
	}
	held(1 << 20)
	// The super user's charge is its whole size, beside rita's share.
	c3 := e.ChargeWrite(admin)
	defer c3.Release()
	if err := c3.Grow(ctx, 3<<20); err != nil {
		t.Fatal(err)
	}
	held(4 << 20)
	c2.Release()
	c3.Release()
	held(0)
}

// TestDecodedJSONSize: a decoded document (a GraphQL mutation's) is
// charged the size of its JSON text, as a REST write's document is.
func TestDecodedJSONSize(t *testing.T) {
	text := `{"@type":"Note","@id":"n","text":"hello","n":12.5,"ok":true,"no":false,"none":null,"tags":["a","b"],"sub":{"@type":"S","x":[1,2,{}],"y":[]}}`
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if got := engine.DecodedJSONSize(v); got != int64(len(text)) {
		t.Fatalf("DecodedJSONSize: %d, want %d, the length of its JSON", got, len(text))
	}
}
