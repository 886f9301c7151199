package daemontest

import (
	"fmt"
	"strings"
)

// MetricValue sums the samples of metric name in body, a Prometheus text
// exposition, whose labels include every given `key="value"` pair.
func MetricValue(body, name string, labels ...string) float64 {
	var sum float64
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}
