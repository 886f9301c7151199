// Package gqltransport serves GraphQL subscriptions and live queries: the
// graphql-sse protocol in distinct connections mode (one HTTP request per
// operation), with server-sent events or NDJSON framing, and, on the same
// URLs, the other transports mainstream clients use (see the last
// section). Server.Transport is a gqlgen transport registered before the
// GraphQL-over-HTTP one (graph.Options.Transports); it claims the requests
// that internal/protocol.Of, the one place that decides a request's
// protocol, does not call plain HTTP: GET and POST requests whose Accept
// header prefers text/event-stream (SSE), application/x-ndjson (NDJSON)
// or multipart/mixed, and single connection mode's. Server.Socket serves
// graphql-ws. Each operation's stream is served by the stream server
// (internal/stream): this package parses, validates and frames.
//
// # Messages
//
// A subscription is registered by the stream server (internal/stream)
// before anything is written, then the readiness frame is sent: the comment `: connected`
// (SSE) or the line `null` (NDJSON). Any commit that starts after the client
// has read it is delivered. Each event is an SSE `event: next` with
// `id: <position>` and `data: <ExecutionResult>` on one line, or one
// ExecutionResult line in NDJSON. The end is `event: complete` with an
// empty `data:` line, or an empty NDJSON line.
//
// The named `event: connected` / `data: null` of the source document is
// sent only with ?connected=true: the graphql-sse npm client treats any
// event other than next and complete as a protocol error and fails the
// subscription, while the `: connected` comment is ignored by every SSE
// parser and signals the same readiness.
//
// Queries and mutations over a stream give one next and complete; a
// request that does not validate gives a next with {"errors":[…]} and
// complete, on a 200 stream. A malformed request (body, parameters, a
// position that does not parse, ?heartbeat=) is a 400 JSON error before
// any stream starts; a mutation over GET is a 405.
//
// # Keep-alive
//
// SSE streams send the comment `: ping` every heartbeat (config key
// heartbeat, 12s by default; ?heartbeat= overrides). NDJSON has no
// comments and its empty line means complete, so its keep-alive is a
// `null` line, the same "no result" value as its first line: NDJSON
// clients skip every `null` line.
//
// # Delivery
//
// Events follow commit order, then change order within a commit; each
// carries its position (the change's, or the commit's last change's for
// _ChangeSet). Last-Event-ID, ?lastEventId= or extensions.lastEventId
// resume after a position, replayed from the log; a position that is
// expired or from another epoch gives an error next (extensions.code
// POSITION_EXPIRED) and complete. When the hub shuts down every open
// stream gets its queued events and complete.
//
// # Other transports on the same URLs
//
// The same streams serve, through a framer per transport (framing.go):
// Apollo's multipart subscriptions (multipart.go), graphql-sse single
// connection mode (sse_single.go: a reservation and one event stream per
// client, which lives in one process, so a client's requests must be
// routed to it), and graphql-ws sockets (graphqlws.go, the
// graphql-transport-ws subprotocol, served by Server.Socket). The last
// two carry many operations on one connection: each operation is
// authorized and dispatched by the connection itself to the executor of
// its database's current schema (graph.Handler.Operation), is guarded,
// capped, shared and resumed like a stream of its own, and appends its
// messages to the connection's bounded output (mux.go). Close ends those
// connections once the hub is closed.
package gqltransport
