package webhook

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// maxErrorBytes bounds the message of an error refusing a webhook's
// settings: it names what is wrong and repeats at most a bounded part of
// a value (sluice.Echo), however long the value.
const maxErrorBytes = 1024

// FuzzWebhookInput reads any body of POST or PATCH /api/webhooks/… as the
// route decodes it (unknown members refused) and checks it as Create and
// Update do (apply), against a schema and the default policy. A body is
// taken or refused as a client error of bounded size; what is taken is a
// URL a webhook may have (absolute http or https, a host that is no
// address literal, no credentials or fragment), UTF-8 text, known
// classes and operations.
func FuzzWebhookInput(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://example.com/hook"}`,
		`{"url":"https://example.com/hook","description":"d","classes":["Person"],"ops":["create"],"filter":{"name":{"eq":"x"}},"batch":"commit"}`,
		`{"url":null}`, `{"classes":null,"ops":null,"batch":null,"filter":null}`,
		`{"url":"http://127.1/"}`, `{"url":"http://0x7f000001/"}`, `{"url":"http://[::1]/"}`, `{"url":"http://ｌｏｃａｌｈｏｓｔ/"}`,
		`{"url":"https://u:p@example.com/"}`, `{"url":"https://example.com:0/"}`, `{"url":"https://example.com/#x"}`, `{"url":"mailto:x@example.com"}`,
		`{"classes":[]}`, `{"classes":["Person","Person"]}`, `{"classes":["Nope"]}`, `{"classes":["Address"]}`,
		`{"ops":["create","create"]}`, `{"ops":["upsert"]}`, `{"ops":[]}`, `{"batch":"day"}`,
		`{"description":"a\u0000b"}`, `{"filter":{"name":{"eq":"x"}}}`, `{"classes":["Person"],"filter":[1]}`, `{"classes":["Person"],"filter":{"nope":1}}`,
		`{"classes":["` + strings.Repeat("P", 2000) + `"]}`, `{"batch":"` + strings.Repeat("\\u00ff", 2000) + `"}`, `{"url":"https://` + strings.Repeat("\\u0001", 2000) + `"}`,
	} {
		f.Add(s)
	}
	sch, err := schema.Parse("type Person { name: String! age: Int address: Address } type Address @subdocument { city: String }")
	if err != nil {
		f.Fatal(err)
	}
	s := &Service{policy: Policy{}}
	f.Fuzz(func(t *testing.T, body string) {
		var in Input
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if dec.Decode(&in) != nil {
			return // refused by the route's decoder, fuzzed on its own
		}
		w := &sluice.Webhook{Database: &sluice.Database{Org: "admin", Name: "people"}, Ops: defaultOps(), Batch: sluice.BatchEvent}
		if err := s.apply(sch, w, in); err != nil {
			sh := sluice.Show(err)
			if sh.Code != sluice.CodeInvalid {
				t.Fatalf("%s: error %v is shown as %s", body, err, sh.Code)
			}
			if msg := sluice.ErrorMessage(err); len(msg) > maxErrorBytes || !utf8.ValidString(msg) {
				t.Fatalf("%.200s: error message of %d bytes (valid UTF-8: %t): %.300q", body, len(msg), utf8.ValidString(msg), msg)
			}
			return
		}
		if in.URL.Set {
			u, err := url.Parse(w.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.Fragment != "" || len(w.URL) > maxURLBytes {
				t.Fatalf("%s: url %q taken", body, w.URL)
			}
			if a, err := netip.ParseAddr(dialledHost(u.Hostname())); err == nil && s.policy.Check(a) != nil {
				t.Fatalf("%s: url %q, of a refused address, taken", body, w.URL)
			}
		}
		if !utf8.ValidString(w.Description) || strings.ContainsRune(w.Description, 0) || len(w.Description) > maxDescriptionBytes {
			t.Fatalf("%s: description %q taken", body, w.Description)
		}
		for _, c := range w.Classes {
			if cl := sch.Class(c); cl == nil || cl.Kind == sluice.KindSubdocument {
				t.Fatalf("%s: class %q taken", body, c)
			}
		}
		for _, o := range w.Ops {
			if o != "create" && o != "update" && o != "delete" {
				t.Fatalf("%s: operation %q taken", body, o)
			}
		}
		if w.Batch != sluice.BatchEvent && w.Batch != sluice.BatchCommit {
			t.Fatalf("%s: batch %q taken", body, w.Batch)
		}
		if w.Filter != nil && (!json.Valid(w.Filter) || len(bytes.TrimSpace(w.Filter)) > maxFilterBytes) {
			t.Fatalf("%s: filter %q taken", body, w.Filter)
		}
	})
}
