package metrics

import "github.com/prometheus/client_golang/prometheus"

// Stream holds the change feed's and the streams' collectors. Database
// labels are database ids, like sluice_commits_total. Fields are safe for
// concurrent use.
type Stream struct {
	// Subscribers counts open subscriptions, by transport ("rest",
	// "graphql-sse", …) and database; a series goes when its count
	// returns to 0.
	Subscribers *OpenGauge
	// Published counts events (document changes) the tailer handed to the
	// hub, by database.
	Published *prometheus.CounterVec
	// Delivered counts events written to clients, by transport and database.
	Delivered *prometheus.CounterVec
	// CatchUps counts subscribers switched from live delivery to reading
	// the log because their queue overflowed, by database.
	CatchUps *prometheus.CounterVec
	// Replays counts subscriptions that started from a past position
	// (resume), by database.
	Replays *prometheus.CounterVec
	// CatchUpsWaiting is the number of catch-ups (streams reading the log
	// themselves) waiting for their turn to read it.
	CatchUpsWaiting prometheus.Gauge
	// ResumeFailures counts resumes refused because the position expired
	// or belongs to another epoch, by database.
	ResumeFailures *prometheus.CounterVec
	// Parked is the number of streams parked (no goroutine while idle),
	// Unparked counts parked streams that continued on a goroutine of
	// their own (a slow reader, or one detached from its share).
	Parked   prometheus.Gauge
	Unparked prometheus.Counter
	// OutputWaiting is the number of streams waiting for room in the
	// budget of output formed and not yet written (stream_output_bytes,
	// stream_output_bytes_per_user) before they form or take their next
	// large piece.
	OutputWaiting prometheus.Gauge
	// StreamsEnded counts open streams ended because an access change took
	// their access away, or because Postgres was lost.
	StreamsEnded prometheus.Counter
	// Latency observes the time from commit to the write of its event to a
	// client, by transport (for a share of identical GraphQL
	// subscriptions, to the write of its last member): by Postgres' clock
	// up to the read of the log that found the commit, then by this
	// process's monotonic clock, as TailerLag.
	Latency *prometheus.HistogramVec
	// TailerLag is the age of the newest commit the tailer handed to the
	// hub, when it handed it over: its age when read by Postgres' clock,
	// plus the time since that read began by this process's monotonic
	// clock, so that a replica whose clock is off still reports it right.
	TailerLag prometheus.Gauge
	// TailerRunning is 1 while the tailer reads the log successfully.
	TailerRunning prometheus.Gauge
	// ListenReconnects counts reconnections of the tailer's LISTEN
	// connection.
	ListenReconnects prometheus.Counter
	// LiveReads counts the reads of live query results (one snapshot
	// each, which reads every result of a cohort a batch of commits may
	// have changed), LiveStatements the SQL statements
	// they sent, and LiveResults the results that changed and were
	// published, by database.
	LiveReads      *prometheus.CounterVec
	LiveStatements *prometheus.CounterVec
	LiveResults    *prometheus.CounterVec

	// forget deletes a database's series (see ForgetDatabase).
	forget func(id int64) int
}

// NewStream creates the stream collectors and registers them in reg.
func NewStream(reg prometheus.Registerer) *Stream {
	s := &Stream{
		Subscribers: newOpenGauge("sluice_stream_subscribers", "Open stream subscriptions, by transport and database.",
			"transport", "database"),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_stream_events_published_total",
			Help: "Document changes the change feed handed to the hub, by database.",
		}, []string{"database"}),
		Delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_stream_events_delivered_total",
			Help: "Events written to stream clients, by transport and database.",
		}, []string{"transport", "database"}),
		CatchUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_stream_catchups_total",
			Help: "Subscribers whose queue overflowed and that switched to reading the log, by database.",
		}, []string{"database"}),
		Replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_stream_replays_total",
			Help: "Subscriptions resumed from a past position and replayed from the log, by database.",
		}, []string{"database"}),
		CatchUpsWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_stream_catchups_waiting",
			Help: "Catch-ups (streams resumed or fallen behind, reading the log themselves) waiting for their turn to read it: the catch-up reads at once are capped per user and per process.",
		}),
		Parked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_streams_parked",
			Help: "Streams parked: their connection taken from net/http, served without a goroutine while idle.",
		}),
		Unparked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_streams_unparked_total",
			Help: "Parked streams that continued on a goroutine of their own (a slow reader, or one detached from its share).",
		}),
		OutputWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_stream_output_waiting",
			Help: "Streams waiting for room in the budget of output formed and not yet written to clients (stream_output_bytes, stream_output_bytes_per_user) before they form or take their next piece of 64 KiB or more.",
		}),
		StreamsEnded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_streams_ended_by_access_total",
			Help: "Open streams ended because an access change took their access away, or because Postgres was lost.",
		}),
		ResumeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_stream_resume_failures_total",
			Help: "Resumes refused because the position expired or is from another epoch, by database.",
		}, []string{"database"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_stream_delivery_latency_seconds",
			Help:    "Time from a commit to the write of its event to a stream client, by transport (by Postgres' clock up to the read that found it, then by this process's monotonic clock).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"transport"}),
		TailerLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_changefeed_lag_seconds",
			Help: "Age of the newest commit the change feed handed to the hub, at the time it did (by Postgres' clock up to the read that found it, then by this process's monotonic clock).",
		}),
		TailerRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_changefeed_running",
			Help: "1 while the change feed reads the commit log successfully, else 0.",
		}),
		ListenReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_changefeed_listen_reconnects_total",
			Help: "Reconnections of the change feed's LISTEN connection.",
		}),
		LiveReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_live_query_reads_total",
			Help: "Reads of live query results (one snapshot each, for every result of a cohort a batch of commits may have changed), by database.",
		}, []string{"database"}),
		LiveStatements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_live_query_statements_total",
			Help: "SQL statements sent by reads of live query results, by database.",
		}, []string{"database"}),
		LiveResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_live_query_results_total",
			Help: "Live query results that changed and were published (once per share, whatever its members), by database.",
		}, []string{"database"}),
	}
	cs := []prometheus.Collector{s.Subscribers, s.Published, s.Delivered, s.CatchUps, s.Replays, s.CatchUpsWaiting, s.Parked, s.Unparked, s.OutputWaiting,
		s.ResumeFailures, s.StreamsEnded, s.Latency, s.TailerLag, s.TailerRunning, s.ListenReconnects,
		s.LiveReads, s.LiveStatements, s.LiveResults}
	reg.MustRegister(cs...)
	if r, ok := reg.(*Registry); ok {
		s.forget = r.ForgetDatabase
	} else {
		var own vecSet
		for _, c := range cs {
			own.add(c)
		}
		s.forget = own.forgetDatabase
	}
	return s
}

// ForgetDatabase deletes the series of database id, which was deleted:
// from every vector of the registry s was registered in when that is a
// *Registry (the daemon's: the commit counters and the webhooks' series
// too), else from s's own. The change feed calls it, which finds every
// deleted database on every replica. It returns how many series it
// deleted. The subscribers' series go with their last subscription.
func (s *Stream) ForgetDatabase(id int64) int { return s.forget(id) }
