//go:build !linux

package httpstream

// parkSupported: responses are parked only on Linux (epoll).
const parkSupported = false

// writeNow is never called: no response is parked.
func (p *parked) writeNow([]byte) (int, error) { return 0, ErrNotParkable }
