package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestDecodingErrorsInWords: a JSON body of the wrong shape, on every
// route that decodes one, is a 400 that names the field and says what
// was expected in words; no text of Go's JSON decoder (Go types, "json:")
// reaches the client.
func TestDecodingErrorsInWords(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "words", "type Note { text: String }")
	cases := []struct {
		method, path, body, want string
	}{
		{"POST", "/api/db/admin/x", `{"schema":{"type":"Note"}}`, `field "schema": expected a string, got an object`},
		{"POST", "/api/db/admin/x", `{"label":5}`, `field "label": expected a string, got a number`},
		{"POST", "/api/db/admin/x", `["x"]`, `expected an object, got an array`},
		{"POST", "/api/db/admin/x", `{"label":"x"`, `invalid JSON: it ends before it is complete`},
		{"POST", "/api/db/admin/x", `{"label":"x",}`, `invalid JSON: an unexpected character '}' at byte 13 (counting from 0)`},
		{"POST", "/api/organizations", `{"name":true}`, `field "name": expected a string, got true or false`},
		{"POST", "/api/users", `{"name":["rita"],"organization":"admin","password":"pw-pw-pw-pw"}`, `field "name": expected a string, got an array`},
		{"PUT", "/api/users/admin/password", `{"password":12345678}`, `field "password": expected a string, got a number`},
		{"PUT", "/api/roles/admin/words", `{"user":"admin","role":{}}`, `field "role": expected a string, got an object`},
		{"POST", "/api/tokens", `{"name":null,"x":1}`, `unknown field "x"`},
		{"POST", "/api/stream-tickets", `{"database":["admin/words"]}`, `field "database": expected a string, got an array`},
		{"POST", "/api/webhooks/admin/words", `{"url":"https://example.com/","classes":"Note"}`, `field "classes": expected an array of strings, got a string`},
		{"POST", "/api/webhooks/admin/words", `{"url":7}`, `field "url": expected a string, got a number`},
		// A document's syntax error in the same words, its byte counted
		// in the document (and its line in NDJSON).
		{"POST", "/api/document/admin/words", `{"@type":"Note","text":"A",}`, `document 0: invalid JSON: an unexpected character '}' at byte 27 (counting from 0)`},
		{"POST", "/api/document/admin/words", "{\"@type\":\"Note\"}\n\n{\"@type\":\"Note\",\"text\":\"A\"x}", `document 1 (line 3): invalid JSON: an unexpected character 'x' at byte 26 (counting from 0)`},
		{"POST", "/api/document/admin/words", "{\"@type\":\"Note\"}\n}", `document 1: invalid JSON: an unexpected character '}' at byte 17 (counting from 0) of the body, line 2`},
		{"POST", "/api/document/admin/words", `[{"@type":"Note"},]`, `document 1: invalid JSON: an unexpected character ']' at byte 18 (counting from 0) of the body`},
		{"POST", "/api/graphql/admin/words", `{"query":"{ Note { _id } }","variables":[1]}`, `the variables parameter must be an object`},
		{"POST", "/api/graphql/admin/words", `{"query":"{ Note { _id } }",}`, `invalid JSON: an unexpected character '}' at byte 28 (counting from 0)`},
		{"POST", "/api/graphql/admin/words", `{"query":"mutation { _insertDocuments(json: \"{\\\"@type\\\": }\") }"}`, `the string is not JSON: invalid JSON: an unexpected character '}' at byte 10 (counting from 0)`},
	}
	for _, c := range cases {
		r := d.Do(t, dt.Admin(), c.method, c.path, c.body, "Content-Type", "application/json")
		var e struct {
			Message string `json:"api:message"`
			Errors  []struct{ Message string }
		}
		_ = json.Unmarshal(r.Body, &e)
		body := e.Message
		if len(e.Errors) > 0 {
			body = e.Errors[0].Message
		}
		for _, leak := range []string{"Go struct", "json: cannot", "unmarshal", "of type string", "[]string"} {
			if strings.Contains(string(r.Body), leak) {
				t.Errorf("%s %s %s: the decoder's text reached the client: %s", c.method, c.path, c.body, r.Body)
			}
		}
		if (r.Status != 400 && r.Status != 200) || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %s, want %q", c.method, c.path, c.body, r.Status, r.Body, c.want)
		}
	}
}
