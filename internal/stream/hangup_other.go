//go:build !linux

package stream

import (
	"errors"
	"syscall"
)

// hangups is not available: streams are not parked on this platform.
type hangups struct{}

func newHangups() (*hangups, error) {
	return nil, errors.New("parked streams need epoll (Linux)")
}

// watch is never made: no stream is parked.
type watch struct{}

func (*hangups) newWatch(syscall.RawConn, func()) *watch { return &watch{} }
func (*watch) arm() error                                { return errors.ErrUnsupported }
func (*watch) stop()                                     {}
func (*hangups) close()                                  {}

// shutdown is never called: no stream is parked.
func shutdown(syscall.RawConn) {}
