package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math/bits"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// The stream clients are lean, since ten thousand of them share two cores
// with the servers: one goroutine per connection on a raw TCP connection
// (no http.Transport goroutines), http.ReadResponse for the status and the
// chunked body, and no JSON decoding: the send time is found with
// bytes.Index.

// sentKey precedes the send time (unix nanoseconds, as a JSON string) in
// every event's payload.
var sentKey = []byte(`"n":"`)

// sseClient is one subscriber. Its counters are written by its own
// goroutine and read by the benchmark once the cell is over.
type sseClient struct {
	conn     net.Conn
	body     *bufio.Reader
	received int64
	bad      int64 // events whose send time could not be read
	lastAt   int64 // unix nanoseconds of the last event
}

// openStream connects to addr, sends request (a complete HTTP/1.1 request)
// and reads until the readiness comment `: connected`.
func openStream(addr string, request []byte) (*sseClient, error) {
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(request); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	c := &sseClient{conn: conn, body: bufio.NewReaderSize(resp.Body, 4096)}
	for {
		line, err := c.body.ReadSlice('\n')
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("before `: connected`: %w", err)
		}
		if bytes.HasPrefix(line, []byte(": connected")) {
			return c, nil
		}
	}
}

// read counts the events of the stream until the connection closes,
// recording each one's latency in h and adding it to total.
func (c *sseClient) read(h *latencyHistogram, total *atomic.Int64) {
	for {
		line, err := c.body.ReadSlice('\n')
		if err != nil {
			return
		}
		data, ok := bytes.CutPrefix(line, []byte("data: {"))
		if !ok {
			continue
		}
		now := time.Now().UnixNano()
		c.received++
		c.lastAt = now
		total.Add(1)
		i := bytes.Index(data, sentKey)
		if i < 0 {
			c.bad++
			continue
		}
		var sent int64
		for _, d := range data[i+len(sentKey):] {
			if d < '0' || d > '9' {
				break
			}
			sent = sent*10 + int64(d-'0')
		}
		h.record(time.Duration(now - sent))
	}
}

// latencyHistogram counts durations in microseconds, in buckets of at most
// 1/32 (3%) of their value, up to about 2^40 µs. Safe for concurrent use.
type latencyHistogram struct {
	buckets [40 * 32]atomic.Int64
}

const subBuckets = 32

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	shift := bits.Len64(us) - 6 // keep the top 5 bits below the leading one
	return (shift+1)*subBuckets + int(us>>shift)&(subBuckets-1)
}

// lowerBound is the smallest duration in bucket i, in microseconds.
func lowerBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	shift := i/subBuckets - 1
	return (subBuckets | uint64(i%subBuckets)) << shift
}

func (h *latencyHistogram) record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	i := bucketOf(uint64(us))
	if i >= len(h.buckets) {
		i = len(h.buckets) - 1
	}
	h.buckets[i].Add(1)
}

// quantiles returns the upper bound of the bucket holding each quantile.
func (h *latencyHistogram) quantiles(qs ...float64) []time.Duration {
	var n int64
	counts := make([]int64, len(h.buckets))
	for i := range h.buckets {
		counts[i] = h.buckets[i].Load()
		n += counts[i]
	}
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	for k, q := range qs {
		rank := int64(q * float64(n))
		var seen int64
		for i, c := range counts {
			seen += c
			if seen > rank {
				out[k] = time.Duration(lowerBound(i+1)) * time.Microsecond
				break
			}
		}
	}
	return out
}
