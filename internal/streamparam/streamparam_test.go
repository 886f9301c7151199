package streamparam

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration // 0: refused
	}{
		{"15s", 15 * time.Second}, {"15", 15 * time.Second}, {"1s", time.Second}, {"1h", time.Hour}, {"3600", time.Hour},
		{"1ns", 0}, {"999ms", 0}, {"0", 0}, {"-5s", 0}, {"1h0m1s", 0}, {"1000h", 0}, {"3601", 0}, {"soon", 0}, {"", 0},
		{"99999999999999999999", 0},
	} {
		d, err := Heartbeat(c.in)
		if c.want == 0 {
			if err == nil || sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Errorf("Heartbeat(%q) = %v, %v; want a CodeInvalid error", c.in, d, err)
			}
			continue
		}
		if err != nil || d != c.want {
			t.Errorf("Heartbeat(%q) = %v, %v; want %v", c.in, d, err, c.want)
		}
	}
}

func TestLastEventID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header, header2, query, rawQuery string
		extKey                           string
		ext                              any
		want                             string // "": nil; "error": refused
	}{
		{want: ""},
		{header: "ep-3-1", query: "ep-1-0", ext: "ep-2-0", want: "ep-3-1"},
		{query: "ep-1-0", ext: "ep-2-0", want: "ep-1-0"},
		{ext: "ep-2-0", want: "ep-2-0"},
		{header: "nonsense", want: "error"},
		{query: "=", want: "error"},
		{ext: 42, want: "error"},
		{ext: "", want: "error"},
		// A resume position under another spelling is not read: refused
		// rather than starting the stream from now (found by review).
		{rawQuery: "lastEventID=ep-1-0", want: "error"},
		{rawQuery: "last_event_id=ep-1-0", want: "error"},
		{rawQuery: "last-event-id=ep-1-0", want: "error"},
		{rawQuery: "other=1", want: ""},
		{extKey: "lastEventID", ext: "ep-2-0", want: "error"},
		{extKey: "LastEventId", ext: "ep-2-0", want: "error"},
		{extKey: "operationId", ext: "x", want: ""},
		// Two headers: which one counts would be a guess.
		{header: "ep-3-1", header2: "ep-4-0", want: "error"},
	} {
		target := "/x"
		if c.query != "" {
			target += "?lastEventId=" + url.QueryEscape(c.query)
			if c.query == "=" {
				target = "/x?lastEventId="
			}
		}
		if c.rawQuery != "" {
			target += "?" + c.rawQuery
		}
		r := httptest.NewRequest("GET", target, nil)
		if c.header != "" {
			r.Header.Set("Last-Event-ID", c.header)
		}
		if c.header2 != "" {
			r.Header.Add("Last-Event-ID", c.header2)
		}
		var ext map[string]any
		if c.ext != nil {
			key := c.extKey
			if key == "" {
				key = ResumeName
			}
			ext = map[string]any{key: c.ext}
		}
		p, err := LastEventID(r, ext)
		switch {
		case c.want == "error":
			if err == nil || sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Errorf("%+v: %v, %v; want a CodeInvalid error", c, p, err)
			}
		case c.want == "":
			if p != nil || err != nil {
				t.Errorf("%+v: %v, %v; want nil", c, p, err)
			}
		case err != nil || p == nil || p.String() != c.want:
			t.Errorf("%+v: %v, %v; want %s", c, p, err, c.want)
		}
	}
}

// FuzzStreamParams feeds arbitrary ?ops=, ?heartbeat= and resume position
// values to the parsers: no panic, a refusal is a client error, an
// accepted ops value never selects nothing, an accepted heartbeat is
// within its bounds.
func FuzzStreamParams(f *testing.F) {
	f.Add("create,update", "15s", "ep-1-0")
	f.Add("upsert", "soon", "x")
	f.Add("", "0", "")
	f.Add("delete", "1ns", "ep-99999999999999999999-0")
	f.Fuzz(func(t *testing.T, ops, heartbeat, last string) {
		set, err := Ops(true, ops)
		if err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Fatalf("ops %q: %v", ops, err)
		}
		if err == nil && len(set) == 0 {
			t.Fatalf("ops %q accepted with no operation", ops)
		}
		d, err := Heartbeat(heartbeat)
		if err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Fatalf("heartbeat %q: %v", heartbeat, err)
		}
		if err == nil && (d < MinHeartbeat || d > MaxHeartbeat) {
			t.Fatalf("heartbeat %q accepted as %v", heartbeat, d)
		}
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Last-Event-ID", last)
		if _, err := LastEventID(r, nil); err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Fatalf("position %q: %v", last, err)
		}
	})
}

func TestOpList(t *testing.T) {
	t.Parallel()
	ops, err := OpList("ops", []string{"delete", "create"})
	if err != nil {
		t.Fatal(err)
	}
	if got := OpTokens(ops); strings.Join(got, ",") != "create,delete" {
		t.Errorf("OpTokens = %v, want create,delete", got)
	}
	for _, bad := range [][]string{nil, {}, {"create", "insert"}, {""}, {"Create"}} {
		_, err := OpList("ops", bad)
		if sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.HasPrefix(sluice.ErrorMessage(err), "ops") {
			t.Errorf("OpList(%q) = %v, want a BadRequest naming ops", bad, err)
		}
	}
}

// A parameter given more than once is refused, naming it: a stream never
// takes one of its values silently.
func TestParamsRefusesRepeats(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		target, refused string // refused: "" when accepted
	}{
		{"/x", ""},
		{"/x?heartbeat=5s&lastEventId=ep-1-0&connected=true", ""},
		{"/x?heartbeat=5s&heartbeat=junk", "heartbeat"},
		{"/x?connected=true&query=q&connected=false", "connected"},
		{"/x?lastEventId=ep-1-0&lastEventId=ep-2-0", "lastEventId"},
	} {
		r := httptest.NewRequest("GET", c.target, nil)
		q, err := Params(r)
		_, lerr := LastEventID(r, nil)
		if c.refused == "" {
			if err != nil || lerr != nil {
				t.Errorf("%s: %v, %v; want accepted", c.target, err, lerr)
			}
			if len(q) != len(r.URL.Query()) {
				t.Errorf("%s: %v", c.target, q)
			}
			continue
		}
		want := `query parameter "` + c.refused + `" is given 2 times`
		for _, err := range []error{err, lerr} {
			if sluice.ErrorCode(err) != sluice.CodeInvalid || sluice.ErrorMessage(err) != want {
				t.Errorf("%s: %v; want %q", c.target, err, want)
			}
		}
	}
}

// A query whose text cannot be read is refused, naming what is wrong,
// rather than read without the pair it mangles.
func TestQueryRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ target, refused string }{
		{"/x", ""},
		{"/x?ops=create,delete&heartbeat=5s", ""},
		{"/x?a+b=c%20d&&e", ""},
		{"/x?ops=delete%zz", `invalid URL escape "%zz"`},
		{"/x?lastEventId=ep-1-0%2", `invalid URL escape "%2"`},
		{"/x?l%zzastEventId=ep-1-0", `invalid URL escape "%zz"`},
		{"/x?ops=delete;heartbeat=5s", "semicolon"},
	} {
		r := httptest.NewRequest("GET", c.target, nil)
		_, qerr := Query(r)
		_, perr := Params(r)
		_, lerr := LastEventID(r, nil)
		for _, err := range []error{qerr, perr, lerr} {
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("%s: %v, want accepted", c.target, err)
			case c.refused != "" && (sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(sluice.ErrorMessage(err), c.refused)):
				t.Errorf("%s: %v, want a BadRequest naming %s", c.target, err, c.refused)
			}
		}
	}
}

// FuzzQuery feeds arbitrary query text to Query: no panic, a refusal is
// a client error that does not echo the query (which may hold a stream
// ticket), and an accepted query keeps a value for every pair it holds:
// none is left out.
func FuzzQuery(f *testing.F) {
	f.Add("ops=create,update&lastEventId=ep-1-0")
	f.Add("ops=delete%zz")
	f.Add("ticket=sluice-st_secret&lastEventId=ep-1-0%2")
	f.Add("a;b=c")
	f.Add("=x&&y")
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/x", nil)
		r.URL.RawQuery = raw
		q, err := Query(r)
		if err != nil {
			if sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Fatalf("%q: %v", raw, err)
			}
			if len(raw) > 8 && strings.Contains(sluice.ErrorMessage(err), raw) {
				t.Fatalf("%q: the error echoes the query: %v", raw, err)
			}
			return
		}
		pairs, values := 0, 0
		for _, p := range strings.Split(raw, "&") {
			if p != "" {
				pairs++
			}
		}
		for _, vs := range q {
			values += len(vs)
		}
		if values != pairs {
			t.Fatalf("%q: accepted with %d values for %d pairs: %v", raw, values, pairs, q)
		}
	})
}
