package webhook

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestHTTP2AnswerHoldsLittle: a receiver answering over HTTP/2 can make
// a request hold no more of its answer than an answer over HTTP/1.1
// (the excerpt kept and the part drained, responseExcerpt and
// responseDrain): the client's flow-control window says how much the
// receiver may send that nobody read yet, which the transport buffers.
// Found by review: the window was HTTP/2's default of the transport, 4
// MiB for each request, so every receiver could make a webhook hold 4 MiB
// of its answer, whatever Sluice read of it. Here the body is not read
// at all, and the receiver writes until its writes block; then an answer
// of 1 MiB, of which an attempt reads its excerpt and drain, is answered
// as over HTTP/1.1.
func TestHTTP2AnswerHoldsLittle(t *testing.T) {
	t.Parallel()
	written := make(chan int64, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			// An answer larger than what is read of it: the attempt
			// still ends at once, answered.
			_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
			return
		}
		if r.ProtoMajor != 2 {
			written <- -1
			return
		}
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			written <- -2
			return
		}
		chunk := make([]byte, 16<<10)
		var n int64
		for n < 16<<20 {
			// A write the client's window blocks fails at the deadline:
			// n is then what the client took without reading it.
			if err := rc.SetWriteDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
				break
			}
			k, err := w.Write(chunk)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				break
			}
			n += int64(k)
		}
		written <- n
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	s := newSender(newDialer(Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, 0), 10*time.Second, "test", time.Now)
	s.client.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := <-written
	if n < 0 {
		t.Fatalf("the request was not made over HTTP/2 (%d)", n)
	}
	if limit := int64(2 * (responseExcerpt + responseDrain)); n > limit {
		t.Fatalf("the receiver sent %d bytes of its answer that nobody read, which the transport holds; want at most %d", n, limit)
	}
	m := &message{url: srv.URL + "/big", id: "1-1-0", body: []byte("{}"), contentType: "application/cloudevents+json"}
	if r := s.send(t.Context(), m, [][]byte{[]byte("secret")}); r.status != http.StatusOK || !r.ok() || len(r.response) != responseExcerpt {
		t.Fatalf("an answer of 1 MiB over HTTP/2: status %d, error %q, %d bytes kept", r.status, r.err, len(r.response))
	}
}
