package daemon_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

func TestPastQuick(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "hist", "type Person { name: String! age: Int }")
	pos := []string{a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position")}
	step := func(method, path, body string) {
		a.MustDo(t, 200, dt.Admin(), method, path, body)
		pos = append(pos, a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position"))
	}
	step("POST", "/api/document/admin/hist", `{"@type":"Person","@id":"alice","name":"Alice","age":30}`)
	step("PUT", "/api/document/admin/hist", `{"@type":"Person","@id":"Person/alice","name":"Alice","age":31}`)
	step("POST", "/api/document/admin/hist", `{"@type":"Person","@id":"bob","name":"Bob"}`)
	step("DELETE", "/api/document/admin/hist?id=Person/alice", "")
	for i, p := range pos {
		r := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person&as_list=true&as_of="+url.QueryEscape(p), nil)
		fmt.Println(i, p, strings.TrimSpace(string(r.Body)), r.Header.Get("Sluice-Position"))
	}
}
