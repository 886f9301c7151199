package rest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// TestHTTP2TrickledBodyNamesMinRate: over HTTP/2 (readWatch), a body
// trickled a byte every 20 ms (never idle for body_idle_timeout) fails
// naming body_min_rate.
func TestHTTP2TrickledBodyNamesMinRate(t *testing.T) {
	t.Parallel()
	limits := newBodyLimits(0, 300*time.Millisecond, 1000, 0)
	got := make(chan error, 1)
	r := chi.NewRouter()
	r.With(limits.Middleware).Post("/up", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		got <- err
		w.WriteHeader(400)
	})
	srv := httptest.NewUnstartedServer(r)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				pw.Close()
				return
			case <-tk.C:
				if _, err := pw.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	defer close(done)
	req, _ := http.NewRequest("POST", srv.URL+"/up", pr)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case err := <-got:
		if err == nil || !strings.Contains(err.Error(), "body_min_rate") {
			t.Fatalf("trickled body over HTTP/2: %v; want an error naming body_min_rate", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a trickled body over HTTP/2 was not cut within 10 s")
	}
}
