package rest_test

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
)

// TestKeyedDeleteWithIDRefusesItsBody: a DELETE ?id= takes no body (its
// ids are in ?id=), so one that announces a body is refused at once, with
// an Idempotency-Key too: without asking for the body (no 100 Continue),
// before its key is looked up or its write joins a batch, and nothing is
// deleted. (It was accepted, its body read only to be hashed, and
// TestSlowKeyedDeleteBodyHoldsUpNoOtherWrite checked that a client
// trickling that body held up no other write; now nothing waits for it.)
// A PUT of another document meanwhile answers.
func TestKeyedDeleteWithIDRefusesItsBody(t *testing.T) {
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
	// A body of 100 bytes, announced with Expect: 100-continue, none of
	// it sent.
	fmt.Fprintf(conn, "DELETE /api/document/admin/slowdel?id=Note/x HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n"+
		"Idempotency-Key: slow-delete\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n", auth)
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the DELETE with a body announced: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !resp.Close || !strings.Contains(string(b), "either in ?id= or in its body, not both") {
		t.Fatalf("the DELETE with a body announced: %d (closes: %v) %s", resp.StatusCode, resp.Close, b)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/slowdel?create=true", `{"@type":"Note","@id":"Note/y","text":"y"}`)
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/slowdel?id=Note/x", nil)
}
