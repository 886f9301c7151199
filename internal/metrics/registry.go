package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry is a Prometheus registry that keeps the vectors registered in
// it, so that ForgetDatabase can take a deleted database's series out of
// every one of them: the commit counters, the streams' and live queries',
// the webhooks'. A database's series would otherwise stay until the
// process ends, and any user who may create databases could add series
// without bound by creating and deleting them.
type Registry struct {
	*prometheus.Registry

	vecs vecSet
}

// partialDeleter is a metric vector (CounterVec, GaugeVec, HistogramVec).
type partialDeleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

// vecSet is a set of vectors that a database's series can be deleted
// from. It is safe for concurrent use.
type vecSet struct {
	mu   sync.Mutex
	vecs []partialDeleter
}

func (s *vecSet) add(c prometheus.Collector) {
	if v, ok := c.(partialDeleter); ok {
		s.mu.Lock()
		s.vecs = append(s.vecs, v)
		s.mu.Unlock()
	}
}

// forgetDatabase deletes the series whose database label is id's, and
// returns how many it deleted.
func (s *vecSet) forgetDatabase(id int64) int {
	l := prometheus.Labels{"database": strconv.FormatInt(id, 10)}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.vecs {
		n += v.DeletePartialMatch(l)
	}
	return n
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{Registry: prometheus.NewRegistry()} }

// Register registers c, as prometheus.Registry does, and keeps it when it
// is a metric vector.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.vecs.add(c)
	return nil
}

// MustRegister registers cs as Register does, and panics on an error.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// ForgetDatabase deletes the series whose database label is id's from
// every vector registered in r, and returns how many it deleted. Vectors
// without a database label are left alone.
func (r *Registry) ForgetDatabase(id int64) int { return r.vecs.forgetDatabase(id) }
