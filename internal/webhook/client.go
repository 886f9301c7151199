package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// responseExcerpt is how much of a response body is kept for the attempts
// log, and responseDrain how much more is read (and dropped) so the
// connection can be reused; a longer body closes the connection.
// responseHeaderBytes bounds an answer's status line and headers: a
// receiver answering more fails the attempt. So an answer costs a
// webhook a few tens of KiB, whatever the receiver sends (over HTTP/2
// too: see the flow-control window in newSender).
const (
	responseExcerpt     = 512
	responseDrain       = 64 << 10
	responseHeaderBytes = 16 << 10
)

// sender posts webhook requests.
type sender struct {
	client    *http.Client
	timeout   time.Duration
	userAgent string
	now       func() time.Time
}

func newSender(d *dialer, timeout time.Duration, userAgent string, now func() time.Time) *sender {
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, past Policy
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: responseHeaderBytes,
		// Over HTTP/2 the receiver may send as much of its answer as the
		// flow-control window allows before anything reads it, and the
		// transport holds it: 4 MiB a request by default, past the few
		// tens of KiB an answer is allowed to cost. A request reads at
		// most the excerpt and the drain, so a window of that is all it
		// needs; a connection, which the webhooks of one host share,
		// takes at most 1 MiB.
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     responseExcerpt + responseDrain,
			MaxReceiveBufferPerConnection: 1 << 20,
		},
	}
	return &sender{
		client: &http.Client{Transport: tr,
			// Redirects are not followed: a 3xx is a failed attempt (a
			// redirect could lead anywhere, and the body would not be
			// sent again anyway).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		timeout: timeout, userAgent: userAgent, now: now,
	}
}

// message is one request of a webhook.
type message struct {
	url string
	id  string // webhook-id: the position of its last event
	// parts are the events the body is made of (build): one event's
	// envelope, or with batch a JSON array of them (CloudEvents' batched
	// mode).
	parts       []sluice.Event
	batch       bool
	body        []byte
	contentType string
	events      int
}

// size returns the bytes of the body build makes.
func (m *message) size() int64 {
	n := 0
	for _, e := range m.parts {
		n += len(e.Data)
	}
	if m.batch {
		n += len(m.parts) + 1 // the brackets and commas
	}
	return int64(n)
}

// build makes the body from the parts. One event's envelope is the body
// as it is (no copy).
func (m *message) build() {
	if !m.batch {
		m.body = m.parts[0].Data
		return
	}
	b := make([]byte, 0, m.size())
	b = append(b, '[')
	for i, e := range m.parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.Data...)
	}
	m.body = append(b, ']')
}

// result is what an attempt came to.
type result struct {
	status   int    // 0 without an answer
	err      string // "" for a 2xx
	duration time.Duration
	response string // the start of the response body
	// detail, for the server's log only, says more than err may (the
	// addresses a name resolved to).
	detail string
}

func (r result) ok() bool { return r.err == "" }

// send makes one attempt to deliver m, signed with secrets. It never
// returns an error: a failed attempt is a result; ctx ending is reported
// by ctx.
func (s *sender) send(ctx context.Context, m *message, secrets [][]byte) result {
	start := s.now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(m.body))
	if err != nil {
		return result{err: "bad request: " + err.Error()}
	}
	ts := start.Unix()
	req.Header.Set("Content-Type", m.contentType)
	req.Header.Set("User-Agent", s.userAgent)
	req.Header.Set("webhook-id", m.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", signatures(secrets, m.id, ts, m.body))
	resp, err := s.client.Do(req)
	if err != nil {
		r := result{err: describe(err, s.timeout), duration: s.now().Sub(start)}
		if ue := (*unreachableError)(nil); errors.As(err, &ue) {
			r.detail = ue.detail.Error()
		}
		return r
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, responseExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, responseDrain))
	r := result{status: resp.StatusCode, duration: s.now().Sub(start), response: cleanText(excerpt)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		r.err = fmt.Sprintf("answered %d (redirects are not followed; Location: %.200s)", resp.StatusCode, resp.Header.Get("Location"))
	default:
		r.err = fmt.Sprintf("answered %d", resp.StatusCode)
	}
	return r
}

// describe says what went wrong with a request, without the URL (the
// attempts log shows it separately).
func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	// Before the deadline's words: the request was never sent (a
	// dial's addresses time out too).
	if ce := (*connectError)(nil); errors.As(err, &ce) {
		return ce.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout awaiting response headers") {
		return fmt.Sprintf("no answer within %s (webhook_timeout)", timeout)
	}
	if strings.Contains(err.Error(), "server response headers exceeded") || strings.Contains(err.Error(), "header list too large") {
		return fmt.Sprintf("the answer's headers are larger than %d bytes", responseHeaderBytes)
	}
	// Every address of a name is tried: say why each failed.
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// cleanText returns b as text Postgres can store: valid UTF-8 without
// NUL bytes (each becomes U+FFFD).
func cleanText(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
