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
