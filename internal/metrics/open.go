package metrics

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// OpenGauge counts what is open (stream subscriptions), by label values.
// Unlike a GaugeVec's, a series is removed when its count returns to 0:
// the series of a database's subscribers of one transport lasts while one
// is open, so a deleted database's goes with its last subscription, ended
// after the database was forgotten or not. It is safe for concurrent use.
type OpenGauge struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	open map[string]*openCount // by label values joined with \xff
}

type openCount struct {
	values []string
	n      float64
}

func newOpenGauge(name, help string, labels ...string) *OpenGauge {
	return &OpenGauge{desc: prometheus.NewDesc(name, help, labels, nil), open: map[string]*openCount{}}
}

// WithLabelValues returns the count of the series of lvs, which are as
// many as the gauge's labels, in their order.
func (g *OpenGauge) WithLabelValues(lvs ...string) OpenCount { return OpenCount{g: g, lvs: lvs} }

// OpenCount is one series of an OpenGauge.
type OpenCount struct {
	g   *OpenGauge
	lvs []string
}

// Inc counts one more open.
func (c OpenCount) Inc() { c.g.add(c.lvs, 1) }

// Dec counts one fewer open.
func (c OpenCount) Dec() { c.g.add(c.lvs, -1) }

// Add moves the count by d.
func (c OpenCount) Add(d float64) { c.g.add(c.lvs, d) }

func (g *OpenGauge) add(lvs []string, d float64) {
	key := strings.Join(lvs, "\xff")
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.open[key]
	if c == nil {
		c = &openCount{values: slices.Clone(lvs)}
		g.open[key] = c
	}
	if c.n += d; c.n == 0 {
		delete(g.open, key)
	}
}

// Describe implements prometheus.Collector.
func (g *OpenGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *OpenGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	ms := make([]prometheus.Metric, 0, len(g.open))
	for _, c := range g.open {
		ms = append(ms, prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, c.n, c.values...))
	}
	g.mu.Unlock()
	for _, m := range ms {
		ch <- m
	}
}
