package rest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// BenchmarkReadDocuments measures the CPU a write request spends on its
// body before Postgres, per 1,000 flat documents, in three cumulative
// stages: read (split the body into documents), validate, encode (table
// rows and after images). Bulk writes overlap this work with Postgres on
// another goroutine, so on a machine with few cores it is what they
// compete with Postgres for.
func BenchmarkReadDocuments(b *testing.B) {
	s, err := schema.Parse(`type Person { name: String! email: String! age: Int score: Float active: Boolean }`)
	if err != nil {
		b.Fatal(err)
	}
	var body strings.Builder
	body.WriteByte('[')
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"@type":"Person","@id":"p%d","name":"Person %d","email":"p%d@example.com","age":%d,"score":%d.5,"active":true}`, i, i, i, i%90, i)
	}
	body.WriteByte(']')
	data := []byte(body.String())
	for _, stage := range []string{"read", "validate", "encode"} {
		b.Run(stage, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ds, err := newDocStream(bytes.NewReader(data), 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				var docs []*sluice.Document
				for {
					raw, err := ds.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if stage == "read" {
						continue
					}
					doc, err := raw.Validate(s)
					if err != nil {
						b.Fatal(err)
					}
					docs = append(docs, doc)
				}
				if stage == "encode" {
					if _, err := postgres.EncodeRows(s, docs); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
