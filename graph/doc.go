// Package graph is Sluice's GraphQL engine: it generates a GraphQL schema
// from each database's schema (SDL, BuildSchema), executes queries and
// mutations against it (ExecutableSchema, gqlgen's graphql.ExecutableSchema)
// and serves them over HTTP (Handler, HTTPTransport; the GraphiQL page is
// internal/graphiql).
//
// # Execution
//
// A class query compiles to one SQL statement (internal/postgres
// QueryDocuments: filter, order and paging in SQL, reading only the
// selected columns). References are then loaded level by level: every id
// that the selections of one level reference, whatever the number of
// documents, is read with one statement (DocumentsByID), so a query costs
// one statement per level of references. Results are written as JSON
// directly in selection order.
//
// Field protection is applied by the schema: each (database, schema
// version, role) gets its own generated schema that leaves out the fields
// the role may not read, from output types, filters and orderings alike.
//
// Mutations: every mutation field of a request runs in one transaction and
// makes one commit (engine.WriteBatch); any error rolls the whole request
// back.
//
// # Limits
//
// Limits bound what one request may cost. The document limits (size,
// tokens, depth, aliases, fields with fragments expanded, fragment
// definitions) are checked on the query text by a gqlgen extension
// (documentBounds) before gqlparser validates it, on every transport,
// since some validation rules cost more than linear time. While a query
// runs, the documents it reads are bounded in the SQL (LIMIT) and the
// bytes of its answer by the JSON writer.
//
// # Subscriptions
//
// The schema includes the Subscription type. Execution over plain HTTP
// answers with an error; the event-stream transport (internal/gqltransport,
// registered through Options.Transports, before HTTPTransport) prepares a
// Subscription with ExecutableSchema.NewSubscription and evaluates each
// commit with Subscription.Events: filters with filter.Match (the same
// semantics as the SQL compilation), payloads resolved like queries from
// the change's after (or, for deletions, before) document.
package graph
