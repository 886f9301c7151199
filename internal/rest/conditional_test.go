package rest_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSlowKeyedDeleteBodyHoldsUpNoOtherWrite: a keyed DELETE ?id= reads
// none of its body to delete, yet its request hash covers it; the body is
// read (to hash it) before the write joins group commit, so a client that
// sends it slowly holds up its own request alone. A PUT of another
// document answers while the DELETE's body is still held (it answered
// only once the body was in, or body_idle_timeout ended it: the batch's
// leader read it behind the commit rows).
func TestSlowKeyedDeleteBodyHoldsUpNoOtherWrite(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "slowdel", "type Note { text: String! }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/slowdel?create=true", `{"@type":"Note","@id":"Note/x","text":"x"}`)

	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("admin:" + dt.AdminPassword))
	// A body of 100 bytes, announced with Expect: 100-continue: the
	// server asks for it when it first reads it, to hash it (before the
	// write joins a batch; without the fix, in the batch's leader).
	fmt.Fprintf(conn, "DELETE /api/document/admin/slowdel?id=Note/x HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n"+
		"Idempotency-Key: slow-delete\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n", auth)
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for _, want := range []string{"HTTP/1.1 100 Continue\r\n", "\r\n"} {
		line, err := br.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("the DELETE's answer to Expect: 100-continue: %q (%v), want %q", line, err, want)
		}
	}
	// One byte of it is sent: the rest is held.
	fmt.Fprint(conn, " ")

	put := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("PUT", d.URL+"/api/document/admin/slowdel?create=true", strings.NewReader(`{"@type":"Note","@id":"Note/y","text":"y"}`))
		dt.Admin()(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			put <- 0
			return
		}
		resp.Body.Close()
		put <- resp.StatusCode
	}()
	// Generous, and still well within body_idle_timeout (30 s), which
	// would end the held body.
	select {
	case status := <-put:
		if status != 200 {
			t.Fatalf("the PUT of another document answered %d", status)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a PUT of another document waited for a keyed DELETE's body")
	}

	// The rest of the body: the DELETE answers, and deleted Note/x.
	fmt.Fprint(conn, strings.Repeat(" ", 99))
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the DELETE answered %d", resp.StatusCode)
	}
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/slowdel?id=Note/x", nil)
}
