package rest

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/httpstream"
)

// TestErrorsShowTheOneMapping: REST answers, and the change stream's error
// event, show an error as sluice.Show does, never the driver's text.
func TestErrorsShowTheOneMapping(t *testing.T) {
	outage := fmt.Errorf("read: %w", errors.Join(sluice.ErrStorageUnavailable, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")))
	rec := httptest.NewRecorder()
	writeError(rec, httptest.NewRequest("GET", "/api/document/a/b", nil), outage)
	body := rec.Body.String()
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "2" || !strings.Contains(body, `"api:Unavailable"`) || !strings.Contains(body, `"api:server_error"`) || strings.Contains(body, "dial") {
		t.Errorf("answer: %d %v %s", rec.Code, rec.Header(), body)
	}
	rec = httptest.NewRecorder()
	writeError(rec, httptest.NewRequest("GET", "/", nil), errors.New("SQLSTATE 42P01"))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"internal error"`) || strings.Contains(rec.Body.String(), "SQLSTATE") {
		t.Errorf("internal: %d %s", rec.Code, rec.Body)
	}
	s := restSink{out: httpstream.New(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "text/event-stream", 0)}
	s.End(outage)
	if frame := s.out.Buf.String(); !strings.HasPrefix(frame, "event: error\ndata: ") || !strings.Contains(frame, `"api:Unavailable"`) || strings.Contains(frame, "dial") {
		t.Errorf("stream end: %q", frame)
	}
}
