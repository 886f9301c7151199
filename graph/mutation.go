package graph

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/99designs/gqlgen/graphql"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/jsondup"
	"github.com/sluice-dev/sluice/internal/jsonesc"
	"github.com/sluice-dev/sluice/internal/schema"
)

// mutation runs every mutation field of the operation as one commit (one
// request is one commit): the fields run in order inside one transaction,
// and any error rolls all of them back, so every field is null and data is
// null. author and message, when given on several fields, must agree.
func (x *execution) mutation() json.RawMessage {
	fields := x.rootFields("Mutation")
	var ops []engine.WriteOp
	var opFields []int // index in fields of each op
	var opt engine.WriteOptions
	for i, cf := range fields {
		if cf.Name == "__typename" {
			continue
		}
		op, author, message, err := x.writeOp(cf)
		if err == nil {
			err = agree(&opt.Author, author, "author")
		}
		if err == nil {
			err = agree(&opt.Message, message, "message")
		}
		if err != nil {
			x.fail(fieldPath(cf), err)
			return nil
		}
		ops = append(ops, op)
		opFields = append(opFields, i)
	}
	var ids [][]string
	if len(ops) > 0 {
		if key := x.req.IdempotencyKey; key != "" {
			// The answer is recorded as the data it is, so that a
			// retry answers it without an operation to build it from
			// (see Handler.ServeHTTP).
			opt.Idempotency = &engine.Idempotency{Key: key, Request: x.requestHash,
				Answer: func(ids [][]string) ([]byte, error) { return mutationData(fields, ids), nil }}
		}
		// Validated against this schema version: written under it or
		// not at all.
		opt.SchemaVersion = x.es.version
		res, err := x.es.store.WriteBatch(x.ctx, x.req.User, x.req.DB.Org, x.req.DB.Name, ops, opt)
		if err != nil {
			// An error of the whole request (access) is shown on its
			// first field; one of an op on the field that made it.
			at := opFields[0]
			var oe *engine.OpError
			if errors.As(err, &oe) && oe.Index >= 0 && oe.Index < len(opFields) {
				at = opFields[oe.Index]
			}
			x.fail(fieldPath(fields[at]), err)
			return nil
		}
		x.commit, ids = res.Commit, res.IDs
		if res.Replayed != nil {
			// The data the first request answered. (Keys recorded by
			// releases that kept the ids hashed their requests another
			// way: they are another request's, refused before this.)
			x.req.replayed = true
			return res.Replayed
		}
	}
	return mutationData(fields, ids)
}

// mutationData returns the data of a mutation whose fields wrote ids, in
// order (each field but __typename wrote one list).
func mutationData(fields []graphql.CollectedField, ids [][]string) json.RawMessage {
	// Not bounded by the response bytes limit: the commit is made, and the
	// ids it answers are bounded by the request's size.
	w := &jsonWriter{}
	w.WriteByte('{')
	n := 0
	for i, cf := range fields {
		w.key(cf.Alias, i == 0)
		if cf.Name == "__typename" {
			w.str("Mutation")
			continue
		}
		w.WriteByte('[')
		for j, id := range ids[n] {
			if j > 0 {
				w.WriteByte(',')
			}
			w.str(id)
		}
		w.WriteByte(']')
		n++
	}
	w.WriteByte('}')
	return w.Bytes()
}

// agree sets *dst to v, or fails when both are set and differ.
func agree(dst *string, v, name string) error {
	if v == "" {
		return nil
	}
	if *dst != "" && *dst != v {
		return errorf("the mutations of one request make one commit, which has one %s: got %q and %q", name, *dst, v)
	}
	*dst = v
	return nil
}

// writeOp converts a mutation field to a write of the batch.
func (x *execution) writeOp(cf graphql.CollectedField) (engine.WriteOp, string, string, error) {
	args := cf.ArgumentMap(x.op.Variables)
	author, _ := args["author"].(string)
	message, _ := args["message"].(string)
	create, _ := args["create"].(bool)
	switch cf.Name {
	case fieldInsertDocs, fieldReplaceDocs:
		docs, err := jsonDocuments(args["json"], &x.jsonValues)
		if err != nil {
			return engine.WriteOp{}, "", "", err
		}
		kind := engine.WriteInsert
		if cf.Name == fieldReplaceDocs {
			kind = engine.WriteReplace
		}
		return engine.WriteOp{Kind: kind, Docs: &sliceSource{docs: docs}, Create: create}, author, message, nil
	case fieldDeleteDocs:
		// By id, or by id and version (a conditional delete, as REST's
		// DELETE with a body of {"@id", "@version"}): one of the two.
		rawIDs, idsGiven := args["ids"]
		rawDocs, docsGiven := args["documents"]
		if idsGiven && rawIDs != nil && docsGiven && rawDocs != nil || (!idsGiven || rawIDs == nil) && (!docsGiven || rawDocs == nil) {
			return engine.WriteOp{}, "", "", errorf("%s: give the documents to delete in ids or in documents (each an _id and its _version), one of the two", fieldDeleteDocs)
		}
		if rawIDs != nil {
			raw := listArg(rawIDs)
			ids := make([]string, 0, len(raw))
			for _, v := range raw {
				s, _ := filter.IDString(v)
				ids = append(ids, s)
			}
			return engine.WriteOp{Kind: engine.WriteDelete, IDs: ids}, author, message, nil
		}
		raw := listArg(rawDocs)
		ids := make([]string, 0, len(raw))
		expect := make([]sluice.Precondition, 0, len(raw))
		for _, v := range raw {
			m, _ := v.(map[string]any)
			id, _ := filter.IDString(m[fieldID])
			if err := checkVersion(cf.Name, id, m); err != nil {
				return engine.WriteOp{}, "", "", err
			}
			version, _ := m[fieldVersion].(string)
			ids = append(ids, id)
			expect = append(expect, sluice.Precondition{Version: version})
		}
		return engine.WriteOp{Kind: engine.WriteDelete, IDs: ids, Expect: expect}, author, message, nil
	}
	if class, ok := strings.CutSuffix(cf.Name, suffixUpdate); ok {
		if c := x.es.schema.Class(class); c != nil && c.Kind == sluice.KindDocument {
			raw := listArg(args["documents"])
			patches := make([]engine.Patch, 0, len(raw))
			for _, v := range raw {
				m, _ := v.(map[string]any)
				id, _ := filter.IDString(m[fieldID])
				if !strings.Contains(id, "/") {
					id = class + "/" + id
				} else if !strings.HasPrefix(id, class+"/") {
					return engine.WriteOp{}, "", "", errorf("%s%s patches %s documents, not %s", class, suffixUpdate, class, id)
				}
				if err := checkVersion(cf.Name, id, m); err != nil {
					return engine.WriteOp{}, "", "", err
				}
				patches = append(patches, engine.Patch{ID: id, Fields: typedPatch(x.es.schema, c, m), Typed: true})
			}
			return engine.WriteOp{Kind: engine.WritePatch, Patches: patches}, author, message, nil
		}
	}
	for _, suffix := range []string{suffixInsert, suffixReplace} {
		class, ok := strings.CutSuffix(cf.Name, suffix)
		if !ok {
			continue
		}
		c := x.es.schema.Class(class)
		if c == nil || c.Kind != sluice.KindDocument {
			break
		}
		raw := listArg(args["documents"])
		docs := make([]map[string]any, 0, len(raw))
		for i, v := range raw {
			m, _ := v.(map[string]any)
			if suffix == suffixInsert && m[fieldVersion] != nil {
				return engine.WriteOp{}, "", "", errorf("%s: documents[%d] gives a _version, but an insert takes no precondition: it fails anyway when the document exists; to write only a given version, use %s%s or %s%s", cf.Name, i, class, suffixReplace, class, suffixUpdate)
			}
			id, _ := filter.IDString(m[fieldID])
			if err := checkVersion(cf.Name, id, m); err != nil {
				return engine.WriteOp{}, "", "", err
			}
			docs = append(docs, TypedInputDocument(x.es.schema, c, m))
		}
		kind := engine.WriteInsert
		if suffix == suffixReplace {
			kind = engine.WriteReplace
		}
		return engine.WriteOp{Kind: kind, Docs: &sliceSource{docs: docs}, Create: create}, author, message, nil
	}
	return engine.WriteOp{}, "", "", errorf("unknown mutation %s", cf.Name)
}

// checkVersion refuses the _version of typed input m (of document id, of
// mutation field) when it is "", which names no version: a read as of a
// position answers it for a version the log does not record. (Any other
// string is compared with the document's version, and fails the request
// as stale when it is not that.) The error names _version, the field the
// client sent, not the "@version" it becomes.
func checkVersion(field, id string, m map[string]any) error {
	if v, ok := m[fieldVersion].(string); ok && v == "" {
		if id == "" {
			id = "a new document"
		}
		return errorf(`%s: the _version of %s is "", which is no version: give the _version a read of the document answers now (a read as of a position answers "" for a version the log does not record), or none`, field, id)
	}
	return nil
}

// TypedInputDocument converts a <Class>_Input value to the raw document the
// generic mutations take, so that typed and generic mutations write the
// same commit: "@type" is added to the document and its subdocuments, _id
// becomes "@id" and _version "@version".
func TypedInputDocument(s *sluice.Schema, c *sluice.Class, in map[string]any) map[string]any {
	out := make(map[string]any, len(in)+1)
	out["@type"] = c.Name
	for k, v := range in {
		if v == nil {
			continue
		}
		switch k {
		case fieldID:
			if id, ok := filter.IDString(v); ok {
				v = id // 4 stands for "4", as in an argument
			}
			out["@id"] = v
			continue
		case fieldVersion:
			out["@version"] = v
			continue
		}
		f := c.Field(k)
		if f != nil && f.List {
			// A single value given for a list field is a list of one,
			// as it is for an argument (listArg).
			v = listArg(v)
		}
		v = idValues(f, v)
		if f != nil && f.Type.Kind == sluice.TypeSubdocument {
			sc := s.Class(f.Type.Name)
			if items, ok := v.([]any); ok && f.List {
				subs := make([]any, len(items))
				for i, it := range items {
					m, _ := it.(map[string]any)
					subs[i] = TypedInputDocument(s, sc, m)
				}
				v = subs
			} else if m, ok := v.(map[string]any); ok {
				v = TypedInputDocument(s, sc, m)
			}
		}
		out[k] = v
	}
	return out
}

// idValues returns v, the value given for field f (nil: not a field of
// the class) of an input document, with an integer given for an ID (a
// reference, or an ID field; one, or each of a list) as the string it
// stands for: GraphQL's ID takes 4 for "4", and the schema's validation
// wants the string.
func idValues(f *sluice.Field, v any) any {
	if f == nil || f.Type.Kind != sluice.TypeReference && (f.Type.Kind != sluice.TypeScalar || f.Type.Name != sluice.ScalarID) {
		return v
	}
	if items, ok := v.([]any); ok {
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = idValues(f, it)
		}
		return out
	}
	if id, ok := filter.IDString(v); ok {
		return id
	}
	return v
}

// typedPatch converts a <Class>_Patch value to the JSON Merge Patch
// engine.Patch takes: its fields as given, nulls included (they remove
// what they name), "@type" added to its subdocuments, _version as
// "@version"; _id is the patch's ID, not a member.
func typedPatch(s *sluice.Schema, c *sluice.Class, in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch k {
		case fieldID:
			continue
		case fieldVersion:
			if v != nil {
				out["@version"] = v
			}
			continue
		}
		f := c.Field(k)
		if f != nil && f.List && v != nil {
			// A single value given for a list field is a list of one,
			// as it is for an argument (listArg); null still removes
			// the field.
			v = listArg(v)
		}
		if v != nil {
			v = idValues(f, v)
		}
		if f != nil && f.Type.Kind == sluice.TypeSubdocument && v != nil {
			sc := s.Class(f.Type.Name)
			if items, ok := v.([]any); ok && f.List {
				subs := make([]any, len(items))
				for i, it := range items {
					m, _ := it.(map[string]any)
					subs[i] = TypedInputDocument(s, sc, m)
				}
				v = subs
			} else if m, ok := v.(map[string]any); ok {
				sub := typedPatch(s, sc, m)
				sub["@type"] = sc.Name
				v = sub
			}
		}
		out[k] = v
	}
	return out
}

// jsonDocuments reads the json argument of the generic mutations: an
// object, an array of objects, or a string holding either. The JSON
// values of the strings a request's mutations decode are counted in
// *values, and bounded as its variables are before they are decoded
// (maxParamValues): a string variable is one value of the variables, and
// a 7 MB one of empty objects decoded to 245 MB of heap.
func jsonDocuments(v any, values *int) ([]map[string]any, error) {
	if s, ok := v.(string); ok {
		if *values += jsonValues([]byte(s)); *values > maxParamValues {
			return nil, errorf("json: the documents the request gives as strings hold more than %d JSON values, the most a request may send (larger batches of documents: use the REST API)", maxParamValues)
		}
		if l, bad := jsonesc.Find([]byte(s)); bad {
			// encoding/json would read it as U+FFFD.
			return nil, errorf("json: %s", l.Refusal())
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var parsed any
		if err := dec.Decode(&parsed); err != nil {
			return nil, errorf("json: the string is not JSON: %s", sluice.DecodeError(err).Message)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, errorf("json: the string holds more than one JSON value")
		}
		// encoding/json kept the last of a member given twice.
		if rep, ok := jsondup.Find([]byte(s)); ok {
			return nil, errorf("json: the string is not JSON: invalid JSON: %s", rep.Message())
		}
		v = parsed
	}
	switch x := v.(type) {
	case map[string]any:
		return []map[string]any{x}, nil
	case []any:
		out := make([]map[string]any, len(x))
		for i, it := range x {
			m, ok := it.(map[string]any)
			if !ok {
				return nil, errorf("json[%d]: expected a document object, got %s", i, describeJSON(it))
			}
			out[i] = m
		}
		return out, nil
	}
	return nil, errorf("json: expected a document object, an array of them, or a string holding either; got %s", describeJSON(v))
}

func describeJSON(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// sliceSource is an engine.DocSource over documents already in memory.
type sliceSource struct {
	docs []map[string]any
	i    int
}

func (s *sliceSource) Next() (schema.RawDocument, error) {
	if s.i >= len(s.docs) {
		return schema.RawDocument{}, io.EOF
	}
	s.i++
	return schema.RawDocument{Map: s.docs[s.i-1]}, nil
}
