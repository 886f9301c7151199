package metrics

import "github.com/prometheus/client_golang/prometheus"

// Webhook holds the webhook deliverer's collectors, labelled by webhook id
// and database id. Only the replica delivering (the lease holder) reports
// per-webhook series, and only for the webhooks it delivers (see
// ForgetWebhook). Fields are safe for concurrent use.
type Webhook struct {
	// Delivered counts requests answered 2xx, and Events the events they
	// carried, by webhook and database.
	Delivered *prometheus.CounterVec
	Events    *prometheus.CounterVec
	// Failed counts failed attempts (non-2xx, timeouts, connection
	// errors, refused addresses), by webhook and database.
	Failed *prometheus.CounterVec
	// LagCommits is how many commits follow the webhook's position, and
	// LagSeconds the age of the oldest of them (0 when caught up).
	LagCommits *prometheus.GaugeVec
	LagSeconds *prometheus.GaugeVec
	// Duration observes the time of each attempt, to the end of its
	// response.
	Duration prometheus.Histogram
	// Leader is 1 while this replica holds the deliverer's lease.
	Leader prometheus.Gauge
	// LogReads counts the reads of the commit log by webhook loops, those
	// that found nothing new included: what wakes the loops costs that.
	LogReads prometheus.Counter
	// LoopStarts counts the starts of webhook loops, those over again
	// (an access change that affects the webhook) included: each reads
	// the webhook, its creator's access and its schema again.
	LoopStarts prometheus.Counter
	// BudgetWaits counts the requests that waited for room in
	// webhook_body_budget.
	BudgetWaits prometheus.Counter
}

// NewWebhook creates the webhook collectors and registers them in reg.
func NewWebhook(reg prometheus.Registerer) *Webhook {
	labels := []string{"webhook", "database"}
	w := &Webhook{
		Delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_webhook_deliveries_total",
			Help: "Webhook requests answered 2xx, by webhook and database.",
		}, labels),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_webhook_events_total",
			Help: "Events delivered by webhook requests answered 2xx, by webhook and database.",
		}, labels),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_webhook_failures_total",
			Help: "Failed webhook attempts (non-2xx, timeout, connection error, refused address), by webhook and database.",
		}, labels),
		LagCommits: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_webhook_lag_commits",
			Help: "Commits after the webhook's position, by webhook and database.",
		}, labels),
		LagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_webhook_lag_seconds",
			Help: "Age of the oldest commit the webhook has not delivered (0 when caught up), by webhook and database.",
		}, labels),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_webhook_attempt_duration_seconds",
			Help:    "Time of webhook attempts, to the end of the response.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_webhook_leader",
			Help: "1 while this replica holds the lease that makes it deliver every webhook.",
		}),
		LogReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_webhook_log_reads_total",
			Help: "Reads of the commit log by webhook loops, those that found nothing new included.",
		}),
		LoopStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_webhook_loop_starts_total",
			Help: "Starts of webhook loops, over again after an access change that affects the webhook included.",
		}),
		BudgetWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_webhook_body_budget_waits_total",
			Help: "Webhook pages of the log and requests that waited for room in webhook_body_budget, the bytes of log pages and request bodies all webhooks may hold at once.",
		}),
	}
	reg.MustRegister(w.Delivered, w.Events, w.Failed, w.LagCommits, w.LagSeconds, w.Duration, w.Leader, w.LogReads, w.LoopStarts, w.BudgetWaits)
	return w
}

// ForgetWebhook deletes every series of webhook (its id as labelled) of
// database: the deliverer calls it when it stops delivering the webhook
// (deleted, paused, or the lease lost), so that the series of webhooks
// removed do not pile up for as long as the process runs.
func (w *Webhook) ForgetWebhook(webhook, database string) {
	for _, v := range []interface{ DeleteLabelValues(...string) bool }{w.Delivered, w.Events, w.Failed, w.LagCommits, w.LagSeconds} {
		v.DeleteLabelValues(webhook, database)
	}
}
