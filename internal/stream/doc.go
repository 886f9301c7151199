// Package stream is the stream server: it serves every stream of events a
// client holds open, whatever its protocol (the REST change stream,
// GraphQL subscriptions and live queries over SSE, NDJSON, Apollo
// multipart, graphql-ws and graphql-sse's single connection mode), from
// the change feed's hub (internal/changefeed). A transport is a Sink that
// frames and writes; it hands Server.Serve (or Open, then Stream.Serve) a
// Spec saying what to deliver, to whom and how, and the server owns the
// stream's whole life, the same way for every transport:
//
//   - admission: the spec's budget (Admit), then the access guard, which
//     enforces the stream caps and from then on ends the stream when an
//     access change takes its grant away, before any later commit reaches
//     it; a refusal is the sink's (Refuse);
//   - registration: a share of identical subscribers joined, or a
//     subscription of its own from a resume position; what a resumed live
//     query is owed first (Prepare); a failure, such as an expired
//     position, is the sink's (Fail): never a silent gap;
//   - readiness: the readiness frame is flushed only once the stream is
//     registered, so a commit that starts after the client read it is
//     delivered;
//   - serving: a share member takes the share's prepared entries and
//     writes them, flushing once; a member that fell out of its share's
//     history continues on a subscription of its own from where it was
//     (lossless); a subscription of its own batches up to MaxBatch pieces
//     per flush; heartbeats only after a quiet spell; the end (shutdown,
//     access lost, the database deleted, an expired history) written
//     once; the delivered counter and the commit-to-delivery latency;
//   - release, on every path: the share left, the subscription closed,
//     the guard and the budget released.
//
// # Shares and feeds
//
// Subscribers with the same events (a GraphQL query with its variables
// and access, a REST class with its operations and role) join one share
// (share.go): one hub subscription whose pieces an Evaluator turns into
// events once, framed once, kept in a bounded history that every member
// takes from at its own pace. A share is evaluated by a feed (feed.go): a
// hub subscription of its own, or, for the distinct subscriptions of one
// multiplexed connection (Spec.Conn), the connection's, one subscription
// evaluated for each of its shares. Live queries' shares are shares of
// results (ShareOptions.Latest), evaluated together by a Batcher. A feed
// has no goroutine while idle.
//
// # Who serves a stream
//
// A stream is served by whoever serves it cheapest:
//
//   - an operation of a multiplexed connection (Spec.Conn) that shares its
//     events, by the connection's pump (pump.go): no goroutine each;
//   - a stream of an HTTP/1.1 response without TLS that shares its events,
//     parked (park.go): its connection is taken from net/http once ready,
//     a few workers for the whole process write what its share publishes
//     without blocking, and one epoll instance notices its client hanging
//     up; an idle parked stream holds no goroutine and none of net/http's
//     buffers;
//   - any other (a resume, a member detached for falling behind, a slow
//     reader, a response over TLS or HTTP/2), on a goroutine of its own.
//
// The server's methods are safe for concurrent use; a Stream is used by
// whoever serves it, one at a time.
package stream
