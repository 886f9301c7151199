package httpstream

import (
	"errors"

	"golang.org/x/sys/unix"
)

// parkSupported: responses are parked on Linux, where the stream engine
// watches parked connections with epoll.
const parkSupported = true

// writeNow writes vec to the socket without waiting: it returns how much
// the socket took (all of it unless its buffer is full).
func (p *parked) writeNow(vec [][]byte) (int, error) {
	var n int
	var werr error
	err := p.raw.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Writev(int(fd), vec)
			if !errors.Is(werr, unix.EINTR) {
				return true // never wait: the caller keeps the rest
			}
		}
	})
	if n < 0 {
		n = 0
	}
	if errors.Is(werr, unix.EAGAIN) {
		werr = nil
	}
	if err != nil {
		return n, err
	}
	return n, werr
}
