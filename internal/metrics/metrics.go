// Package metrics defines Sluice's Prometheus metrics. Each daemon has its own
// registry (no global default registry), so several daemons can run in one
// test process.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the collectors. Fields are safe for concurrent use.
type Metrics struct {
	// Registry holds every collector of the daemon, the stream and
	// webhook collectors (NewStream, NewWebhook) included.
	Registry *Registry

	HTTPRequests *prometheus.CounterVec   // by method, route, code
	HTTPDuration *prometheus.HistogramVec // by method, route
	Commits      *prometheus.CounterVec   // by database ("org/name")
	Changes      *prometheus.CounterVec   // by database and op
	// PasswordChecks counts bcrypt comparisons: one per new (user,
	// password, stored hash), however many requests present it.
	PasswordChecks prometheus.Counter
	// WriteSpoolBytes is the bytes of write_spool_bytes held by write
	// bodies read ahead of their transactions; WriteSpoolFallbacks counts
	// the bodies that read (some of) their rest as it arrived instead,
	// for want of budget or of a writable disk.
	WriteSpoolBytes     prometheus.Gauge
	WriteSpoolFallbacks prometheus.Counter
}

// New creates and registers every collector, plus the Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: NewRegistry(),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_http_request_duration_seconds",
			Help:    "Time to serve non-streaming HTTP requests, by method and route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method", "route"}),
		Commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_commits_total",
			Help: "Commits made through this process, by database.",
		}, []string{"database"}),
		Changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_changes_total",
			Help: "Document changes committed through this process, by database.",
		}, []string{"database"}),
		PasswordChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_auth_password_checks_total",
			Help: "Password hash comparisons run (bcrypt): one per credential and stored hash, not per request.",
		}),
		WriteSpoolBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_write_spool_bytes",
			Help: "Bytes of write_spool_bytes held by large write bodies read ahead of their transactions, in memory and in temporary files.",
		}),
		WriteSpoolFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_write_spool_fallbacks_total",
			Help: "Large write bodies that read some of their rest as it arrived, inside their transactions: write_spool_bytes, the user's share of it or the spool's disk was exhausted.",
		}),
	}
	m.Registry.MustRegister(m.HTTPRequests, m.HTTPDuration, m.Commits, m.Changes, m.PasswordChecks, m.WriteSpoolBytes, m.WriteSpoolFallbacks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveWriteBudget registers sluice_write_bytes, the bytes of JSON the
// documents of writes in progress hold of write_bytes, and
// sluice_write_bytes_waiting, the writes waiting for some, both read from
// budget at each scrape.
func (m *Metrics) ObserveWriteBudget(budget func() (held int64, waiting int)) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_write_bytes",
			Help: "Bytes of JSON of write_bytes held by the documents of writes in progress (REST and GraphQL), from when each is read until its rows are sent.",
		}, func() float64 { held, _ := budget(); return float64(held) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_write_bytes_waiting",
			Help: "Writes (REST and GraphQL) waiting for write_bytes or their user's write_bytes_per_user to take their next document.",
		}, func() float64 { _, n := budget(); return float64(n) }))
}

// Connections are what the API's listener holds and has closed
// (connlimit.Stats, read at each scrape).
type Connections struct {
	Open, Waiting                      int
	Evicted, Refused, Expired, Aborted uint64
}

// ObserveConnections registers the sluice_http_connections* metrics of the
// API's connection bounds, read from stats at each scrape.
func (m *Metrics) ObserveConnections(stats func() Connections) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_http_connections",
			Help: "Connections of the API open now, streams included.",
		}, func() float64 { return float64(stats().Open) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_http_connections_waiting",
			Help: "Connections of the API carrying no request now: new (no request read yet) or idle between keep-alive requests; and those that never carried an authenticated request, with or without one.",
		}, func() float64 { return float64(stats().Waiting) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_http_connections_evicted_total",
			Help: "Waiting connections closed to make room at a connection bound (the process's, the waiting ones', or one address's share).",
		}, func() float64 { return float64(stats().Evicted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_http_connections_refused_total",
			Help: "New connections closed at once: the process's connection bound was held by authenticated connections carrying requests or streams alone.",
		}, func() float64 { return float64(stats().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_http_connections_expired_total",
			Help: "Connections closed after waiting 15 s without having carried an authenticated request.",
		}, func() float64 { return float64(stats().Expired) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_http_anonymous_requests_reset_total",
			Help: "Requests whose stream was reset unanswered: their HTTP/2 connection, which never carried an authenticated request, had 16 requests in flight already.",
		}, func() float64 { return float64(stats().Aborted) }))
}

// UserRequests are the users' requests in flight, counted against
// max_requests_per_user and max_requests_in_flight (inflight.Stats, read
// at each scrape).
type UserRequests struct {
	Admitted, Refused int
	Aborted           uint64
}

// ObserveUserRequests registers the sluice_http_user_requests* metrics
// of max_requests_per_user and max_requests_in_flight, read from stats
// at each scrape.
func (m *Metrics) ObserveUserRequests(stats func() UserRequests) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_http_user_requests_in_flight",
			Help: "Authenticated requests in flight now, from their authentication until their answers are sent, counted against max_requests_per_user and max_requests_in_flight (the super user's and open streams aside).",
		}, func() float64 { return float64(stats().Admitted) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_http_user_requests_refusals_in_flight",
			Help: "Answers 429 to requests past max_requests_per_user, and 503 past max_requests_in_flight, not sent yet (at most 16 a user, and a tenth of max_requests_in_flight in all).",
		}, func() float64 { return float64(stats().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_http_user_requests_aborted_total",
			Help: "Requests aborted unanswered (HTTP/2 stream reset, HTTP/1 connection closed): their user had max_requests_per_user requests and 16 refusals in flight already, or every user together max_requests_in_flight and a tenth as many refusals.",
		}, func() float64 { return float64(stats().Aborted) }))
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
