package webhook

import "time"

// schedule is the retry schedule of failed requests: waits[n-1] before the
// retry that follows n failed attempts, stretched or shrunk by up to a
// fifth at random, so webhooks that failed together do not retry in step.
type schedule struct {
	waits []time.Duration
	// jitter returns a number in [0, 1).
	jitter func() float64
}

// wait returns the wait before the next attempt after failures failed
// ones, and false when the schedule is exhausted: the webhook then fails.
func (s schedule) wait(failures int) (time.Duration, bool) {
	if failures < 1 || failures > len(s.waits) {
		return 0, false
	}
	base := s.waits[failures-1]
	return time.Duration(float64(base) * (0.8 + 0.4*s.jitter())), true
}
