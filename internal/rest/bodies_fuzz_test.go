package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/webhook"
)

// FuzzSmallBodies decodes any body as the routes of small JSON objects
// (users, organizations, roles, passwords, tokens, tickets, log
// retention, a webhook's actions) and of a webhook's settings decode
// theirs (decodeJSONWithin): read, or refused as a client error of
// bounded size that names no Go type (encoding/json's own text does:
// "Go struct field …").
func FuzzSmallBodies(f *testing.F) {
	for _, s := range []string{`{"name":"ann"}`, `{"name":1}`, `{"user":"u","role":"write"}`, `{"password":"x","Password":"y"}`, `{"nope":1}`,
		`{"log_retention":"8760h"}`, `{"grace":"1h","after":"a-1-2"}`, `{"url":"https://example.com","classes":"Person"}`, `{"ops":[1]}`, `{"filter":`,
		`[]`, `null`, `{"name":"a"} x`, `{"name":"\ud800"}`, "{\"name\":\"\xff\"}", `{"` + strings.Repeat("k", 3000) + `":1}`, `{"batch":{"a":1}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var small struct {
			Name         string  `json:"name"`
			Organization string  `json:"organization"`
			Password     string  `json:"password"`
			User         string  `json:"user"`
			Role         string  `json:"role"`
			Database     string  `json:"database"`
			LogRetention *string `json:"log_retention"`
			After        *string `json:"after"`
			Grace        *string `json:"grace"`
			Expires      *int64  `json:"expires_in"`
		}
		var in webhook.Input
		for _, c := range []struct {
			v   any
			max int64
		}{{&small, smallBodyMax}, {&in, webhookBodyMax}} {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			err := decodeJSONWithin(httptest.NewRecorder(), r, c.v, c.max, "a test's body")
			if err == nil {
				continue
			}
			checkRefusal(t, body, err)
			for _, goText := range []string{"Go ", "struct", "interface", "json:", "rest.", "webhook.", "main.", "[]"} {
				if msg := err.Error(); strings.Contains(msg, goText) && !strings.Contains(body, goText) {
					t.Fatalf("%.200q: message %.300q says %q", body, msg, goText)
				}
			}
		}
	})
}
