package httpstream

import (
	"errors"

	"golang.org/x/sys/unix"
)

// parkSupported: responses are parked on Linux, where the stream server
// watches parked connections with epoll.
const parkSupported = true

// writeNow writes b to the socket without waiting: it returns how much the
// socket took (all of it unless its buffer is full).
func (p *parked) writeNow(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		n, err := unix.Write(p.fd, b[written:])
		if n > 0 {
			written += n
		}
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return written, nil // the caller keeps the rest
		case err != nil:
			return written, err
		case n == 0:
			return written, nil
		}
	}
	return written, nil
}
