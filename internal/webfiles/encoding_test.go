package webfiles

import "testing"

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"gzip, deflate, br, zstd", true},
		{"br;q=1.0, gzip;q=0.8, *;q=0.1", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"gzip;q=0.001", true},
		{"identity", false},
		{"*", true},
		{"*;q=0", false},
		{"deflate, br", false},
		{"x-gzip", false},
		// The specific coding's q wins over *'s, wherever each is.
		{"*, gzip;q=0", false},
		{"gzip;q=0, *", false},
		{"br, *;q=0.5", true},
	} {
		if got := acceptsGzip([]string{c.header}); got != c.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", c.header, got, c.want)
		}
	}
}

// TestAcceptsGzipOverFieldLines: Accept-Encoding sent as several lines
// is one list.
func TestAcceptsGzipOverFieldLines(t *testing.T) {
	t.Parallel()
	if !acceptsGzip([]string{"br", "gzip"}) {
		t.Error("gzip on the second line: not accepted")
	}
	if acceptsGzip([]string{"*", "gzip;q=0"}) {
		t.Error("gzip refused on the second line: accepted")
	}
}

func TestETagMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{`"abc"`, true},
		{`W/"abc"`, true},
		{`"x", "abc"`, true},
		{`"abc-gzip"`, false},
		{`*`, true},
		{`abc`, false},
	} {
		if got := etagMatch(c.header, `"abc"`); got != c.want {
			t.Errorf("etagMatch(%q) = %v, want %v", c.header, got, c.want)
		}
	}
}
