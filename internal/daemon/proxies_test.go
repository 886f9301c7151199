package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

const metricsToken = "0123456789abcdef-metrics"

// failBearer sends n requests with bogus bearer tokens, the i-th with
// X-Forwarded-For xff(i), each answered 401.
func failBearer(t *testing.T, d *dt.Daemon, n int, xff func(i int) string) {
	t.Helper()
	for i := range n {
		d.MustDo(t, 401, dt.Bearer(fmt.Sprintf("sluice_bogus%d", i)), "GET", "/api/info", nil, "X-Forwarded-For", xff(i))
	}
}

// Behind a trusted proxy (trusted_proxies: the test's client, 127.0.0.1),
// the throttle counts the client X-Forwarded-For names: one client's 101
// bogus bearer tokens block its address, and not the proxy's, which every
// other client shares. Without trusted_proxies, all of them were one
// address: the 101st request blocked every user, the super user included.
func TestTrustedProxyThrottlesTheForwardedClient(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) {
		c.AuthMaxFailures, c.AuthFailureWindow = 10, time.Hour
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.MetricsToken = metricsToken
	})
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	var token struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/tokens", `{"name":"ci"}`).Body, &token); err != nil {
		t.Fatal(err)
	}
	// Ten times auth_max_failures block an address.
	failBearer(t, d, 100, func(int) string { return "203.0.113.7" })
	r := d.MustDo(t, 429, dt.Bearer("sluice_bogus100"), "GET", "/api/info", nil, "X-Forwarded-For", "203.0.113.7")
	if !strings.Contains(string(r.Body), "too many failed sign-ins from this address") || r.Header.Get("Retry-After") == "" {
		t.Errorf("throttled client: %v %s", r.Header, r.Body)
	}
	d.MustDo(t, 429, dt.Bearer(token.Token), "GET", "/api/info", nil, "X-Forwarded-For", "203.0.113.7")
	// Its passwords are not blocked: bearer tokens are no password
	// guesses (docs/security.md, Password guessing).
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/info", nil, "X-Forwarded-For", "203.0.113.7")
	// The other places that key on the client's address: a stream
	// ticket's redemption and the metrics token's check.
	ticket := "/api/subscribe/admin/people/Person?ticket=sluice-st_" + strings.Repeat("A", 43)
	d.MustDo(t, 429, dt.NoAuth(), "GET", ticket, nil, "Accept", "text/event-stream", "X-Forwarded-For", "203.0.113.7")
	d.MustDo(t, 401, dt.NoAuth(), "GET", ticket, nil, "Accept", "text/event-stream", "X-Forwarded-For", "203.0.113.8")
	d.MustDo(t, 429, dt.Bearer(metricsToken), "GET", "/metrics", nil, "X-Forwarded-For", "203.0.113.7")
	d.MustDo(t, 200, dt.Bearer(metricsToken), "GET", "/metrics", nil, "X-Forwarded-For", "203.0.113.8")
	// Another client of the proxy, with either credential, and the
	// proxy's own address are not blocked. A client cannot pass for
	// another by writing the header itself: the proxy appends its peer.
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/info", nil, "X-Forwarded-For", "203.0.113.8")
	d.MustDo(t, 200, dt.Bearer(token.Token), "GET", "/api/info", nil, "X-Forwarded-For", "203.0.113.8")
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/info", nil)
	d.MustDo(t, 429, dt.Bearer(token.Token), "GET", "/api/info", nil, "X-Forwarded-For", "203.0.113.8, 203.0.113.7")
}

// Without trusted_proxies, X-Forwarded-For is the client's own text and
// ignored: a client sending a new address in it with every guess is
// still one address, and blocked as one.
func TestForwardedForIgnoredWithoutTrustedProxies(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.AuthMaxFailures, c.AuthFailureWindow = 10, time.Hour })
	failBearer(t, d, 100, func(i int) string { return fmt.Sprintf("203.0.113.%d", i) })
	d.MustDo(t, 429, dt.Bearer("sluice_bogus100"), "GET", "/api/info", nil, "X-Forwarded-For", "198.51.100.1")
	d.MustDo(t, 429, dt.Bearer("sluice_bogus101"), "GET", "/api/info", nil)
}

// The graphql-ws sockets waiting for connection_init without credentials
// are shared out by client address too: behind a trusted proxy, one
// client holding its share (max_unauthenticated_sockets 10: one each)
// leaves the others theirs, where all of them were the proxy's address.
func TestTrustedProxyPendingSocketsPerClient(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) {
		c.MaxUnauthenticatedSockets = 10
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(client string) (*websocket.Conn, error) {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/any",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"X-Forwarded-For": {client}}})
		if err == nil {
			t.Cleanup(func() { _ = c.CloseNow() })
		}
		return c, err
	}
	// Held without connection_init, the socket keeps 203.0.113.7's share.
	if _, err := dial("203.0.113.7"); err != nil {
		t.Fatal(err)
	}
	if _, err := dial("203.0.113.7"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("second socket of 203.0.113.7: %v, want a 503", err)
	}
	if _, err := dial("203.0.113.8"); err != nil {
		t.Errorf("socket of 203.0.113.8: %v", err)
	}
}
