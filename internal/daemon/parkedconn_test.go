package daemon_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestPipelinedStreamAfterAParkedOne: a client that sends a second
// stream's request on a connection behind a first stream's (HTTP/1.1
// pipelining) gets both, each parked in turn: when the first ends, its
// connection goes back to the server with the second request, already
// read from the socket, to be read first. That connection could not be
// parked again (it had no socket to hand over), and the second stream,
// its headers and readiness frame sent, had its connection closed.
func TestPipelinedStreamAfterAParkedOne(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "first", "type Note { text: String! }")
	d.CreateDatabase(t, "second", "type Note { text: String! }")
	conn, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("admin:" + dt.AdminPassword))
	// One write: the second request reaches the server with the first.
	fmt.Fprintf(conn, "GET /api/subscribe/admin/first/Note HTTP/1.1\r\nHost: sluice\r\nAuthorization: Basic %s\r\n\r\n"+
		"GET /api/subscribe/admin/second/Note HTTP/1.1\r\nHost: sluice\r\nAuthorization: Basic %s\r\n\r\n", auth, auth)
	if err := conn.SetReadDeadline(time.Now().Add(parkWait)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	open := func(name string) *bufio.Reader {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the %s stream: %v %v", name, resp, err)
		}
		body := bufio.NewReader(resp.Body)
		if line, err := body.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
			t.Fatalf("the %s stream's first line: %q, %v", name, line, err)
		}
		return body
	}
	first := open("first")
	eventually.True(t, parkWait, "the first stream parked", func() bool { return parked(t, d) == 1 })
	// The first stream ends: its database is deleted.
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/first", nil)
	if rest, err := io.ReadAll(first); err != nil {
		t.Fatalf("the first stream ended with %q, %v", rest, err)
	}
	second := open("second")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/second", `{"@type":"Note","text":"after"}`)
	var got strings.Builder
	for !strings.Contains(got.String(), `"after"`) {
		line, err := second.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			t.Fatalf("the second stream, after %q: %v", got.String(), err)
		}
	}
	if n := parked(t, d); n != 1 {
		t.Fatalf("%v streams parked, want the second", n)
	}
}
