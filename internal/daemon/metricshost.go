package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluice-dev/sluice/internal/config"
)

// checkMetricsSettings refuses the metrics settings that would do nothing
// where they are set: a metrics_token beside metrics_listen (the API's
// listener then serves no /metrics, and the metrics listener needs no
// credentials), which an operator sets believing the listener needs it,
// and metrics_allow_hosts without a metrics listener to check.
func checkMetricsSettings(cfg config.Config) error {
	if cfg.MetricsToken != "" && cfg.MetricsListen != "" {
		return errors.New("metrics_token is set, but so is metrics_listen, whose listener serves /metrics without credentials (the API's listener then serves none): the token would authorize nothing; unset one of them")
	}
	if len(cfg.MetricsAllowHosts) > 0 && cfg.MetricsListen == "" {
		return errors.New("metrics_allow_hosts is set, but metrics_listen is not: it names the hosts the metrics listener answers, and there is none; set metrics_listen, or unset metrics_allow_hosts")
	}
	return nil
}

// checkMetricsHost refuses, 403, a request to the metrics listener whose
// Host header names a host other than an IP address, localhost or one of
// allowed (config metrics_allow_hosts, lower case without a final dot).
// The listener answers without credentials, trusting whoever can reach
// it; but a web page can make its own name resolve to the listener's
// address (DNS rebinding) and have its visitor's browser, on that
// private network, fetch /metrics and hand the answer to the page as
// same-origin. Such a request carries the page's name in Host: no page
// can send an IP address or localhost there without being served from
// that address itself.
func checkMetricsHost(allowed []string, next http.Handler) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, n := range allowed {
		names[n] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !metricsHostAllowed(r.Host, names) {
			http.Error(w, fmt.Sprintf("the metrics listener does not answer for host %q: only for IP addresses, localhost and the names in metrics_allow_hosts", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metricsHostAllowed reports whether host, a Host header with or without
// a port, is an IP address, localhost or a name in names. An empty one is
// allowed: browsers always send Host, so a request without one is no
// page's (an HTTP/1.0 client's).
func metricsHostAllowed(host string, names map[string]bool) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	// An IPv6 address without a port keeps its brackets.
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return true
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	return name == "localhost" || names[name]
}
