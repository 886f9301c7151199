package daemon

import "testing"

// The "sluice is serving" line gives a URL a person can open: a listener
// on every address is reached as localhost.
func TestServeURL(t *testing.T) {
	for _, c := range []struct {
		addr string
		tls  bool
		want string
	}{
		{"[::]:6363", false, "http://localhost:6363/"},
		{"0.0.0.0:6363", false, "http://localhost:6363/"},
		{":6363", false, "http://localhost:6363/"},
		{"127.0.0.1:41234", false, "http://127.0.0.1:41234/"},
		{"[::1]:6363", true, "https://[::1]:6363/"},
		{"10.0.0.7:443", true, "https://10.0.0.7:443/"},
	} {
		if got := serveURL(c.addr, c.tls); got != c.want {
			t.Errorf("serveURL(%q, %v) = %q, want %q", c.addr, c.tls, got, c.want)
		}
	}
}
