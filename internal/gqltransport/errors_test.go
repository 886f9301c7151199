package gqltransport

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// errOutage is what storage returns when Postgres cannot be reached: the
// driver's text is kept for the log only.
var errOutage = fmt.Errorf("recheck the grant: %w", errors.Join(sluice.ErrStorageUnavailable, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")))

// TestRefusalsShowTheOneMapping: a stream refused (here, by a Postgres
// outage during a stale grant's recheck) is answered as sluice.Show shows
// the error, on every framing, never with the driver's text.
func TestRefusalsShowTheOneMapping(t *testing.T) {
	rec := httptest.NewRecorder()
	writeHTTPError(rec, errOutage)
	body := rec.Body.String()
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "2" || !strings.Contains(body, `"UNAVAILABLE"`) || !strings.Contains(body, sluice.ErrStorageUnavailable.Message) || strings.Contains(body, "dial") {
		t.Errorf("HTTP refusal: %d %v %s", rec.Code, rec.Header(), body)
	}
	rec = httptest.NewRecorder()
	writeHTTPError(rec, sluice.Errorf(sluice.CodeInvalid, "query parameter heartbeat=soon: want a duration"))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"BAD_REQUEST"`) {
		t.Errorf("a malformed request: %d %s", rec.Code, rec.Body)
	}
	if e := gqlError(nil, errOutage); e.Message != sluice.ErrStorageUnavailable.Message || e.Extensions["code"] != "UNAVAILABLE" {
		t.Errorf("GraphQL error: %+v", e)
	}
	if e := gqlError(nil, errors.New("pgx: conn closed")); e.Message != "internal error" || e.Extensions["code"] != "INTERNAL_SERVER_ERROR" {
		t.Errorf("GraphQL error of an internal failure: %+v", e)
	}
	for _, proto := range []muxProtocol{protoWS, protoSingle} {
		o := newMuxOut(make(chan struct{}))
		op := &muxOp{out: o, proto: proto, id: []byte(`"1"`)}
		op.refuse(errOutage)
		msgs := string(o.buf)
		if !strings.Contains(msgs, `"UNAVAILABLE"`) || strings.Contains(msgs, "dial") {
			t.Errorf("%v refusal: %s", proto, msgs)
		}
	}
}
