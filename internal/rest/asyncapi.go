package rest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice"
)

// asyncAPI serves GET /api/asyncapi/{org}/{db}: an AsyncAPI 3.0 document
// describing exactly what this database's streams send to the caller: the
// REST change stream of every class (CloudEvents envelopes whose data is
// the document, without the fields the caller's role may not read) and the
// graphql-sse stream of the GraphQL endpoint.
func (a *api) asyncAPI(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	u := userFrom(r)
	d, s, err := a.Engine.Database(r.Context(), u, org, name, sluice.RoleRead)
	if err != nil {
		writeError(w, r, err)
		return
	}
	role, err := a.Engine.Role(r.Context(), u, d)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, asyncAPIDocument(d, s, role))
}

// restOps are the REST stream's operations, as its `event: entity.<op>`
// names them.
var restOps = []struct{ op, summary string }{
	{"create", "A document of the class (or a subclass) was added; data is the document after the commit."},
	{"update", "A document was replaced; data is the document after the commit."},
	{"delete", "A document was deleted; data is the document before the commit."},
}

type obj = map[string]any

func asyncAPIDocument(d *sluice.Database, s *sluice.Schema, role sluice.Role) obj {
	channels, operations, messages := obj{}, obj{}, obj{}
	schemas := obj{"CloudEvent": cloudEventSchema(), "Error": errorSchema(), "ExecutionResult": obj{
		"type":        "object",
		"description": "A GraphQL execution result: the payload shaped by the subscription's selection set, or errors.",
		"properties": obj{
			"data":   obj{"type": []string{"object", "null"}},
			"errors": obj{"type": "array", "items": obj{"type": "object", "required": []string{"message"}}},
		},
	}}
	for _, name := range s.Order {
		c := s.Classes[name]
		schemas[name] = classSchema(s, c, role)
		if c.Kind == sluice.KindSubdocument {
			continue
		}
		// The data of a parent's stream is any of its document classes.
		var docs []any
		for _, sub := range s.Descendants(name) {
			if s.Classes[sub].Kind == sluice.KindDocument {
				docs = append(docs, obj{"$ref": "#/components/schemas/" + sub})
			}
		}
		chMsgs := obj{}
		var opMsgs []any
		for _, o := range restOps {
			id := name + "." + o.op
			messages[id] = obj{
				"name":        "entity." + o.op,
				"title":       "event: entity." + o.op,
				"summary":     o.summary,
				"contentType": "application/json",
				"payload": obj{"allOf": []any{
					obj{"$ref": "#/components/schemas/CloudEvent"},
					obj{"properties": obj{
						"type":      obj{"const": "entity." + o.op},
						"operation": obj{"const": o.op},
						"data":      obj{"anyOf": docs},
					}},
				}},
			}
			chMsgs["entity."+o.op] = obj{"$ref": "#/components/messages/" + id}
			opMsgs = append(opMsgs, obj{"$ref": "#/channels/" + name + "/messages/entity." + o.op})
		}
		chMsgs["error"] = obj{"$ref": "#/components/messages/rest.error"}
		opMsgs = append(opMsgs, obj{"$ref": "#/channels/" + name + "/messages/error"})
		channels[name] = obj{
			"address":     "/api/subscribe/" + d.Path() + "/" + name,
			"title":       "REST change stream of " + name,
			"description": "Server-sent events: `: connected sub=<n>` first, then one event per changed " + name + " document (subclasses included) with `id:` its position, `: ping` heartbeats, `: server shutting down` on shutdown and `event: error` when an error ends the stream. Query parameters: ops (create,update,delete), heartbeat; resume with Last-Event-ID.",
			"messages":    chMsgs,
		}
		operations["receive"+name+"Changes"] = obj{
			"action":   "receive",
			"channel":  obj{"$ref": "#/channels/" + name},
			"messages": opMsgs,
		}
	}
	messages["rest.error"] = obj{
		"name": "error", "title": "event: error",
		"summary":     "The stream ends with an error (the database deleted, the reader's access taken away, a position the log no longer holds); data is the error as every REST route answers it.",
		"contentType": "application/json",
		"payload":     obj{"$ref": "#/components/schemas/Error"},
	}
	messages["graphql.next"] = obj{
		"name": "next", "title": "event: next",
		"summary":     "One subscription event (or the result of a query or mutation); id: is its position.",
		"contentType": "application/json",
		"payload":     obj{"$ref": "#/components/schemas/ExecutionResult"},
	}
	messages["graphql.complete"] = obj{
		"name": "complete", "title": "event: complete",
		"summary": "The stream ends; data is empty.",
	}
	channels["graphql"] = obj{
		"address":     "/api/graphql/" + d.Path(),
		"title":       "GraphQL subscriptions (graphql-sse, distinct connections mode)",
		"description": "POST or GET with Accept: text/event-stream (or application/x-ndjson). `: connected` first, then `next` events, then `complete`. Resume with Last-Event-ID, ?lastEventId= or extensions.lastEventId.",
		"messages": obj{
			"next":     obj{"$ref": "#/components/messages/graphql.next"},
			"complete": obj{"$ref": "#/components/messages/graphql.complete"},
		},
	}
	operations["receiveGraphQLEvents"] = obj{
		"action":  "receive",
		"channel": obj{"$ref": "#/channels/graphql"},
		"messages": []any{
			obj{"$ref": "#/channels/graphql/messages/next"},
			obj{"$ref": "#/channels/graphql/messages/complete"},
		},
	}
	return obj{
		"asyncapi": "3.0.0",
		"info": obj{
			"title":       "Sluice streams of " + d.Path(),
			"version":     schemaVersionString(d),
			"description": "The change streams of database " + d.Path() + ", as seen by a user with the " + role.String() + " role. Every event is after its commit, in commit order, with a resumable position.",
		},
		"defaultContentType": "application/json",
		"channels":           channels,
		"operations":         operations,
		"components":         obj{"schemas": schemas, "messages": messages},
	}
}

func schemaVersionString(d *sluice.Database) string {
	return "schema-" + strconv.Itoa(d.SchemaVersion)
}

func cloudEventSchema() obj {
	str := obj{"type": "string"}
	return obj{
		"type":        "object",
		"description": "A CloudEvents 1.0 structured event.",
		"required":    []string{"specversion", "id", "type", "source", "subject", "time", "datacontenttype", "entity", "operation", "tenant", "user_id", "data"},
		"properties": obj{
			"specversion":     obj{"const": "1.0"},
			"id":              obj{"type": "string", "description": "The event's position (also the SSE id:), <epoch>-<seq>-<index>."},
			"type":            obj{"enum": []string{"entity.create", "entity.update", "entity.delete"}},
			"source":          obj{"type": "string", "description": "/api/db/<org>/<db>"},
			"subject":         obj{"type": "string", "description": "The document id."},
			"time":            obj{"type": "string", "format": "date-time", "description": "The commit time."},
			"datacontenttype": obj{"const": "application/json"},
			"entity":          obj{"type": "string", "description": "The document's class."},
			"operation":       obj{"enum": []string{"create", "update", "delete"}},
			"tenant":          obj{"type": "string", "description": "The organization."},
			"user_id":         str,
			"version":         obj{"type": "string", "description": "The version the change gave the document (of a deletion: the deletion's); a later read of the document answers the same until it changes again. Absent when the same commit changes the document again later: that state has no version."},
			"data":            obj{"type": "object"},
		},
	}
}

// classSchema returns the JSON Schema of a class's documents (or
// subdocuments) as the role sees them.
func classSchema(s *sluice.Schema, c *sluice.Class, role sluice.Role) obj {
	props := obj{}
	var required []string
	switch c.Kind {
	case sluice.KindSubdocument:
		props["@type"] = obj{"const": c.Name}
	case sluice.KindDocument:
		// Class names are letters and digits: no regex quoting needed.
		props["@id"] = obj{"type": "string", "pattern": "^" + c.Name + "/"}
		props["@type"] = obj{"const": c.Name}
		required = append(required, "@id", "@type")
	default: // abstract: its documents belong to its document subclasses
		var types []string
		for _, sub := range s.Descendants(c.Name) {
			if s.Classes[sub].Kind == sluice.KindDocument {
				types = append(types, sub)
			}
		}
		props["@id"] = obj{"type": "string", "pattern": "^(" + strings.Join(types, "|") + ")/"}
		props["@type"] = obj{"enum": types}
		required = append(required, "@id", "@type")
	}
	for _, f := range c.Fields {
		if f.ReadRole > role {
			continue
		}
		v := fieldSchema(s, f)
		if f.List {
			v = obj{"type": "array", "items": v}
		}
		if f.Description != "" {
			v["description"] = f.Description
		}
		props[f.Name] = v
		if f.Required {
			required = append(required, f.Name)
		}
	}
	out := obj{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	if c.Description != "" {
		out["description"] = c.Description
	}
	return out
}

func fieldSchema(s *sluice.Schema, f *sluice.Field) obj {
	switch f.Type.Kind {
	case sluice.TypeEnum:
		return obj{"type": "string", "enum": s.Enums[f.Type.Name].Values}
	case sluice.TypeReference:
		return obj{"type": "string", "description": "The id of a " + f.Type.Name + " document (or of a subclass)."}
	case sluice.TypeSubdocument:
		return obj{"$ref": "#/components/schemas/" + f.Type.Name}
	}
	switch f.Type.Name {
	case sluice.ScalarInt:
		return obj{"type": "integer", "minimum": -2147483648, "maximum": 2147483647}
	case sluice.ScalarFloat:
		return obj{"type": "number"}
	case sluice.ScalarBoolean:
		return obj{"type": "boolean"}
	case sluice.ScalarDateTime:
		return obj{"type": "string", "format": "date-time"}
	case sluice.ScalarBigInt:
		return obj{"type": "string", "pattern": `^-?[0-9]+$`}
	case sluice.ScalarJSON:
		return obj{}
	default:
		return obj{"type": "string"}
	}
}

// errorSchema is the JSON Schema of an error as the REST routes answer it,
// and the REST change stream's event: error carries it.
func errorSchema() obj {
	return obj{
		"type":     "object",
		"required": []string{"api:status", "api:error", "api:message"},
		"properties": obj{
			"api:status": obj{"const": "api:failure"},
			"api:error": obj{
				"type":       "object",
				"required":   []string{"@type"},
				"properties": obj{"@type": obj{"type": "string", "description": "api:NotFound, api:Forbidden, api:Gone…"}},
			},
			"api:message": obj{"type": "string"},
		},
	}
}
