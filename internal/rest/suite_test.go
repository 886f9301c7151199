package rest_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/daemontest/deliverytest"
)

// TestDeliveryGuarantees runs the delivery suite every transport runs
// (deliverytest) on the REST change stream.
func TestDeliveryGuarantees(t *testing.T) {
	t.Parallel()
	deliverytest.Exercise(t, deliverytest.Transport{Name: "REST change stream",
		Open: func(t *testing.T, d *dt.Daemon, auth dt.Auth, db, from string) deliverytest.Sub {
			var h []string
			if from != "" {
				h = []string{"Last-Event-ID", from}
			}
			return openREST(t, d, dt.StreamRequest{Path: "/api/subscribe/admin/" + db + "/Dog", Header: h}, auth)
		},
		OpenGated: func(t *testing.T, d *dt.Daemon, auth dt.Auth, db string, gate <-chan struct{}) deliverytest.Sub {
			return openREST(t, d, dt.StreamRequest{Path: "/api/subscribe/admin/" + db + "/Dog", Gate: gate}, auth)
		}})
}

func openREST(t *testing.T, d *dt.Daemon, req dt.StreamRequest, auth dt.Auth) restSub {
	s := d.MustOpenStream(t, auth, req)
	if f := s.Next(); !strings.HasPrefix(f.String(), ": connected sub=") {
		t.Fatalf("first frame %q", f)
	}
	return restSub{s}
}

type restSub struct{ *dt.Stream }

func (s restSub) Next(t *testing.T) (pos, id string) {
	t.Helper()
	f := s.Event()
	var e struct {
		Subject string `json:"subject"`
	}
	if f.Field("event") != "entity.create" || json.Unmarshal([]byte(f.Field("data")), &e) != nil {
		t.Fatalf("event %q", f)
	}
	return f.Field("id"), e.Subject
}

func (s restSub) End(t *testing.T) string {
	t.Helper()
	for _, f := range s.Ended() {
		switch {
		case f.String() == ": server shutting down":
			return ""
		case f.Field("event") == "error":
			return f.Field("data")
		default:
			t.Fatalf("a frame before the end: %q", f)
		}
	}
	return ""
}
