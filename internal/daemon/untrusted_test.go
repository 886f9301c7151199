package daemon_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// untrustedRequests returns the REST requests that carry the fuzzed
// strings a (a name or an id), b (a type, a position or a key) and c (free
// text) to Postgres: as path segments, query parameters, JSON body values
// and credentials. Each is {method, path, body, Authorization header}.
func untrustedRequests(a, b, c string) [][4]string {
	pa, pb := url.PathEscape(a), url.PathEscape(b)
	qa, qb, qc := url.QueryEscape(a), url.QueryEscape(b), url.QueryEscape(c)
	ja, jb, jc := jsonString(a), jsonString(b), jsonString(c)
	basic := func(user, password string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	return [][4]string{
		{"GET", "/api/db/" + pa + "/" + pb, "", ""},
		{"GET", "/api/db/admin/" + pa, "", ""},
		{"POST", "/api/db/" + pa + "/x", "", ""},
		{"POST", "/api/db/admin/fz" + pb, `{"label":` + jc + `,"comment":` + ja + `}`, ""},
		{"DELETE", "/api/db/" + pa + "/fz" + pb, "", ""}, // never the fixture
		{"GET", "/api/schema/" + pa + "/" + pb, "", ""},
		{"PUT", "/api/schema/admin/" + pa, "type Person { name: String! }", ""},
		{"GET", "/api/document/" + pa + "/" + pb, "", ""},
		{"GET", "/api/document/admin/people?id=" + qa, "", ""},
		{"GET", "/api/document/admin/people?id=Person/" + qa, "", ""},
		{"GET", "/api/document/admin/people?id=" + qb + "/" + qa, "", ""},
		{"GET", "/api/document/admin/people?type=" + qb, "", ""},
		{"GET", "/api/document/admin/people?type=" + qb + "&skip=" + qc, "", ""},
		{"POST", "/api/document/admin/people?author=" + qa + "&message=" + qc, `{"@type":"Person","name":"A"}`, ""},
		{"POST", "/api/document/admin/people", `{"@type":` + jb + `,"@id":` + ja + `,"name":` + jc + `}`, ""},
		{"POST", "/api/document/admin/people", `{"@type":"Person","@id":` + ja + `,"name":"A","nick":` + jc + `}`, ""},
		{"PUT", "/api/document/admin/people?create=true&author=" + qc, `{"@type":"Person","@id":` + ja + `,"name":` + jc + `}`, ""},
		{"DELETE", "/api/document/admin/people?id=" + qa, "", ""},
		{"DELETE", "/api/document/admin/people?id=Person/" + qa, "", ""},
		{"DELETE", "/api/document/admin/people", `[` + ja + `,` + jb + `]`, ""},
		{"GET", "/api/log/" + pa + "/" + pb, "", ""},
		{"GET", "/api/log/admin/people?before=" + qa + "&count=" + qb, "", ""},
		{"GET", "/api/changes/" + pa + "/" + pb, "", ""},
		{"GET", "/api/changes/admin/people?after=" + qb, "", ""},
		{"GET", "/api/changes/admin/people?after=" + qa + "&limit=" + qc, "", ""},
		{"GET", "/api/asyncapi/" + pa + "/" + pb, "", ""},
		{"GET", "/api/subscribe/" + pa + "/" + pb + "/Person", "", ""},
		{"GET", "/api/subscribe/admin/people/" + pb + "?ops=" + qc, "", ""},
		{"POST", "/api/organizations", `{"name":` + ja + `}`, ""},
		{"POST", "/api/users", `{"name":` + ja + `,"organization":` + jb + `,"password":` + jc + `}`, ""},
		{"PUT", "/api/roles/admin/people", `{"user":` + ja + `,"role":` + jb + `}`, ""},
		{"PUT", "/api/roles/" + pa + "/" + pb, `{"user":"admin","role":"read"}`, ""},
		{"POST", "/api/tokens", `{"name":` + jc + `}`, ""},
		{"DELETE", "/api/tokens/" + pa, "", ""},
		{"POST", "/api/graphql/admin/people", `{"query":"query($v: String, $id: ID) { Person(filter: {name: {eq: $v}, nick: {startsWith: $v}}) { _id } byID: Person(id: $id) { _id } }","variables":{"v":` + jc + `,"id":` + ja + `}}`, ""},
		{"POST", "/api/graphql/admin/people", `{"query":"query($v: String) { Person(filter: {name: {regex: $v}}) { _id } }","variables":{"v":` + jb + `}}`, ""},
		{"GET", "/api/info", "", basic(a, c)},
		{"GET", "/api/info", "", basic(a+"\x00", "x")},
		{"GET", "/api/info", "", "Bearer " + b},
		{"GET", "/api/document/admin/people?id=Person/x", "", basic(b, a)},
	}
}

// jsonString returns s as a JSON string, keeping invalid UTF-8 bytes as
// they are (encoding/json would replace them), so that raw bytes reach the
// server's decoder too.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	if strings.ToValidUTF8(s, "") == s {
		return string(b)
	}
	var out strings.Builder
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"' || ch == '\\':
			out.WriteByte('\\')
			out.WriteByte(ch)
		case ch < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte("0123456789abcdef"[ch>>4])
			out.WriteByte("0123456789abcdef"[ch&15])
		default:
			out.WriteByte(ch)
		}
	}
	out.WriteByte('"')
	return out.String()
}

// FuzzUntrustedStrings sends every REST request that reaches Postgres, and
// GraphQL queries with filter values and ids, with fuzzed ids, names,
// types, positions, parameters and credentials. Nothing the client sends
// may make the server fail: every answer is below 500, and no GraphQL error
// is internal.
// The seeds (run by go test) hold the inputs an outside tester found
// answering 500: NUL and invalid UTF-8.
func FuzzUntrustedStrings(f *testing.F) {
	d := dt.Start(f)
	d.CreateDatabase(f, "people", "type Person { name: String! nick: String }")
	d.MustDo(f, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Person","@id":"Person/x","name":"X"}`)

	f.Add("x", "Person", "hello")
	f.Add("\x00", "\x00", "\x00")
	f.Add("Person/\x00", "Person\x00", "a\x00b")
	f.Add("\xff", "\xff", "\xff")
	f.Add("Person/\xff", "\xfe\xff", "\xc3\x28")
	f.Add("a\x00b", "zzz-1-0", "ab\xed\xa0\x80")
	f.Add("\xed\xa0\x80", "abc-1-\x00", "1")
	f.Add(strings.Repeat("k", 3000), strings.Repeat("T", 200), strings.Repeat("\u00e9", 5000))
	f.Add("admin", "people", "\U0010ffff")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		for _, r := range untrustedRequests(a, b, c) {
			method, path, body, authz := r[0], r[1], r[2], r[3]
			req, err := http.NewRequest(method, d.URL+path, strings.NewReader(body))
			if err != nil {
				continue // not a request a client can send
			}
			if strings.HasPrefix(path, "/api/graphql/") {
				req.Header.Set("Content-Type", "application/json")
			}
			if authz != "" {
				req.Header.Set("Authorization", authz)
			} else {
				req.SetBasicAuth("admin", dt.AdminPassword)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if strings.Contains(err.Error(), "invalid header field value") {
					continue // net/http refuses to send it (and its server answers 400)
				}
				t.Fatalf("%s %q: %v", method, path, err)
			}
			var msg []byte
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				msg, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20)) // a stream would never end
			}
			resp.Body.Close()
			// GraphQL reports errors in a 200 answer.
			if resp.StatusCode >= 500 || strings.Contains(string(msg), `"INTERNAL_SERVER_ERROR"`) {
				t.Errorf("%s %q (body %q): status %d: %.300s", method, path, body, resp.StatusCode, msg)
			}
		}
	})
}
