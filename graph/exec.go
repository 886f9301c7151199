package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// Store is what the GraphQL engine needs from the service layer.
// *engine.Engine implements it. The read methods do no authorization: the
// caller has authorized the reader with GraphQLDatabase, and the generated
// schema leaves out the fields the reader's role may not see.
type Store interface {
	GraphQLDatabase(ctx context.Context, u *sluice.User, org, name string) (*sluice.Database, *sluice.Schema, sluice.Role, error)
	QueryDocuments(ctx context.Context, d *sluice.Database, s *sluice.Schema, q engine.DocQuery) ([]engine.QueryDoc, error)
	// QueryDocumentsEach runs several document queries with one
	// statement.
	QueryDocumentsEach(ctx context.Context, d *sluice.Database, s *sluice.Schema, qs []engine.DocQuery) ([][]engine.QueryDoc, error)
	// Backlinks returns the documents pointing at each of q.Targets, in
	// one statement.
	Backlinks(ctx context.Context, d *sluice.Database, s *sluice.Schema, q engine.BacklinkQuery) ([][]engine.QueryDoc, error)
	// Aggregate returns a count and aggregates, in one statement.
	Aggregate(ctx context.Context, d *sluice.Database, s *sluice.Schema, q engine.AggregateQuery) (engine.AggregateResult, error)
	// DocumentsByID returns at most limit documents (< 0: no limit).
	DocumentsByID(ctx context.Context, d *sluice.Database, s *sluice.Schema, ids []string, limit int) ([]engine.QueryDoc, error)
	// CommitChanges returns a commit with at most maxChanges changes and
	// maxBytes bytes of change images read (< 0: no bound), Partial when
	// it holds more.
	CommitChanges(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, seq int64, maxChanges int, maxBytes int64) (*sluice.Commit, error)
	// ReadSnapshot returns ctx carrying a snapshot of d that the reads
	// above made with it run in, and the snapshot.
	ReadSnapshot(ctx context.Context, d *sluice.Database) (context.Context, *engine.Snapshot)
	RedactCommit(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, c *sluice.Commit) (*sluice.Commit, error)
	// HiddenSince returns the fields, by class, that the images of
	// commit seq no longer show a reader with role because of a schema
	// change since (protected, or their values dropped), each with the
	// message of its refusal (see engine.Engine.HiddenSince).
	HiddenSince(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, seq int64) (map[string]map[string]string, error)
	// SchemaThen returns the schema commit c was made under when that is
	// an older version than d's, nil otherwise; LeftSince the error that
	// ends a stream meeting a change of it that today's schema cannot
	// show as it was (see engine.Engine.SchemaThen and LeftSince).
	SchemaThen(ctx context.Context, d *sluice.Database, c *sluice.Commit) (*sluice.Schema, error)
	LeftSince(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, pos sluice.Position, class, under, outcome string) error
	// Regrouped returns how commit c, a schema change, changed the set
	// of document classes under one of under (see
	// engine.Engine.Regrouped), nil when it did not.
	Regrouped(ctx context.Context, d *sluice.Database, c *sluice.Commit, under []string) (*engine.Regroup, error)
	// SchemaChange returns the schema versions before and after commit
	// c, a schema change (see engine.Engine.SchemaChange).
	SchemaChange(ctx context.Context, d *sluice.Database, c *sluice.Commit) (before, after *sluice.Schema, err error)
	// CurrentDatabase returns database d and its schema as they are
	// now, read from Postgres, or NotFound when d was deleted.
	CurrentDatabase(ctx context.Context, d *sluice.Database) (*sluice.Database, *sluice.Schema, error)
	// ForgetDatabase makes the next GraphQLDatabase of org/name read it
	// from Postgres.
	ForgetDatabase(org, name string)
	// ReadAsOf makes the reads of snap (carried by ctx) read the state
	// as of pos, given as the argument param, and returns what of it the
	// reader cannot be shown (see engine.Engine.ReadAsOf).
	ReadAsOf(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, snap *engine.Snapshot, param string, pos sluice.Position) (*engine.Past, error)
	// ReadAsOfEvent is ReadAsOf for a subscription's event, as of its
	// commit, whose range past ReadAsOf's bound is an
	// *engine.PastRangeError (see engine.Engine.ReadAsOfEvent).
	ReadAsOfEvent(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, snap *engine.Snapshot, param string, pos sluice.Position) (*engine.Past, error)
	WriteBatch(ctx context.Context, u *sluice.User, org, name string, ops []engine.WriteOp, opt engine.WriteOptions) (*engine.BatchResult, error)
	// Replayed returns the commit and recorded answer of an earlier
	// write of u whose Idempotency-Key was key and whose request hashed
	// to request, a nil commit when there is none, or Conflict while
	// another request with the key still runs.
	Replayed(ctx context.Context, u *sluice.User, d *sluice.Database, key string, request []byte) (*sluice.Commit, []byte, error)
}

// Request is the per-request state the executable schema reads from the
// context: who asks, and which database (at the schema version the
// executable schema was built for).
type Request struct {
	User *sluice.User
	DB   *sluice.Database
	// IdempotencyKey is the request's Idempotency-Key header, "" without
	// one: a mutation is then idempotent under it (see
	// engine.Idempotency).
	IdempotencyKey string

	// try, set by the Handler on a plain HTTP request, lets it serve the
	// request once more when the schema DB was read at turned out to be
	// out of date (see Handler.ServeHTTP).
	try *attempt
	// replayed is set when the answer is an earlier request's, replayed
	// under the same IdempotencyKey.
	replayed bool
	// replay, set by the Handler on a plain HTTP request with an
	// IdempotencyKey, is called by the transport with the request's
	// parameters before the operation is parsed: it answers the request
	// and reports true when an earlier one recorded an answer under the
	// key (see Handler.replay).
	replay func(w http.ResponseWriter, r *http.Request, media string, p *graphql.RawParams) bool
	// hash, with an IdempotencyKey, is the hash of the parameters a
	// stream's transport read (NoteParams); a plain request's is its
	// try's.
	hash []byte
	// budget, set by the Handler, is the budget of requests' parameters
	// that a stream's transport charges (ReadChargedParams); nil: none.
	budget *paramsBudget
}

// NoteParams records, on the Request of ctx when it has an
// IdempotencyKey, the hash of the parameters its transport read (a
// stream's: SSE, NDJSON, multipart), so that its mutation records the key
// with the hash a plain HTTP request of the same parameters makes. Hashed
// once parsed instead, its variables had their defaults added and no
// variables were {} rather than null: a retry of the same request over
// the other transport was refused as another request's (UNPROCESSABLE).
func NoteParams(ctx context.Context, p *graphql.RawParams) error {
	req := RequestFrom(ctx)
	if req == nil || req.IdempotencyKey == "" {
		return nil
	}
	h, err := requestHash(req.DB, p)
	if err != nil {
		return err
	}
	req.hash = h
	return nil
}

// Replayed returns the response that an earlier request recorded under
// the Idempotency-Key of the stream's request in ctx (SSE, NDJSON,
// multipart, single connection mode), whose parameters NoteParams
// hashed, marking the request replayed; nil when there is none, the
// request has no key, or its user may no longer write the database (its
// mutation then runs, and is refused as any of theirs). A transport
// calls it before it parses and validates the operation, as the Handler
// does for a plain request (Handler.replay): a retry answers its first
// answer even when a schema change since would refuse it now.
func (es *ExecutableSchema) Replayed(ctx context.Context) (*graphql.Response, error) {
	req := RequestFrom(ctx)
	if req == nil || req.IdempotencyKey == "" || req.hash == nil {
		return nil, nil
	}
	return recorded(ctx, es.store, req, req.hash)
}

// Replayed reports whether r was answered with an earlier request's
// answer, recorded under its Idempotency-Key.
func (r *Request) Replayed() bool { return r != nil && r.replayed }

// attempt is the state of a plain HTTP request across the Handler's
// attempts to serve it.
type attempt struct {
	// params are the request's parameters, read by the first attempt
	// (its body is gone after it).
	params *graphql.RawParams
	// hash, with an IdempotencyKey, is the hash of params as read
	// (requestHash), which the key was looked up with before the
	// operation was parsed, and is recorded with.
	hash []byte
	// again asks the Handler for another attempt; last is set on it.
	again, last bool
	// moved reports whether the request's database has another schema
	// version than the one it was served with, reading it.
	moved func(context.Context) bool
}

// outdated reports whether the request, refused as it was served,
// should be served once more with the current schema, and then asks the
// Handler for it: its schema was out of date (read from the cache before
// a schema change another replica made).
func (r *Request) outdated(ctx context.Context) bool {
	if r == nil || r.try == nil || r.try.last || !r.try.moved(ctx) {
		return false
	}
	r.try.again = true
	return true
}

// retrying reports whether the Handler serves the request again, so that
// nothing of this attempt must be answered.
func (r *Request) retrying() bool { return r != nil && r.try != nil && r.try.again }

type requestKey struct{}

// WithRequest returns ctx carrying r, for Exec.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the Request carried by ctx, or nil.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// ExecutableSchema is gqlgen's graphql.ExecutableSchema for one database
// schema version seen with one role. It is immutable and safe for
// concurrent use; per-request state comes from the context (WithRequest).
type ExecutableSchema struct {
	store  Store
	schema *sluice.Schema
	role   sluice.Role
	gql    *ast.Schema
	intro  *introspection.Schema
	logger *slog.Logger
	// sat caches, for each object type, the type names fragments on it
	// match (itself and its interfaces).
	sat map[string][]string
	// limits bound the queries and mutations Exec runs (the Handler sets
	// them); zero fields are unbounded.
	limits Limits
	// version is the schema version s is of, and handler the Handler
	// that built es (nil outside one), which gives the executable schema
	// of a later version (revise.go).
	version int
	handler *Handler
}

var _ graphql.ExecutableSchema = (*ExecutableSchema)(nil)

// NewExecutableSchema generates the GraphQL schema of s for role and
// returns its executor. An error means the generator has a bug.
func NewExecutableSchema(store Store, s *sluice.Schema, role sluice.Role, logger *slog.Logger) (*ExecutableSchema, error) {
	gql, err := BuildSchema(s, role)
	if err != nil {
		return nil, err
	}
	es := &ExecutableSchema{store: store, schema: s, role: role, gql: gql, intro: introspection.WrapSchema(gql), logger: logger, sat: map[string][]string{}}
	for name, def := range gql.Types {
		if def.Kind == ast.Object {
			es.sat[name] = append([]string{name}, def.Interfaces...)
		}
	}
	return es, nil
}

// Schema returns the generated schema.
func (es *ExecutableSchema) Schema() *ast.Schema { return es.gql }

// Role returns the role the schema was generated for.
func (es *ExecutableSchema) Role() sluice.Role { return es.role }

// Complexity leaves every field at gqlgen's default cost. No complexity
// limit uses it: gqlgen's walk expands every fragment spread, exponential
// in nested spreads; the document limits (documentBounds) bound cost
// instead.
func (es *ExecutableSchema) Complexity(context.Context, string, string, int, map[string]any) (int, bool) {
	return 0, false
}

// Exec returns the handler of the one response of the operation of the
// operation context in ctx, which runs it when called. Queries and
// mutations only: a subscription gets an error (they are served by the
// event-stream transport). It runs the operation in the handler, not here,
// because gqlgen's executor takes the response's extensions from the
// context the handler is called with.
func (es *ExecutableSchema) Exec(ctx context.Context) graphql.ResponseHandler {
	done := false
	return func(rctx context.Context) *graphql.Response {
		if done {
			return nil
		}
		done = true
		return es.exec(ctx, rctx)
	}
}

// exec runs the operation of ctx; rctx is the response's context.
func (es *ExecutableSchema) exec(ctx, rctx context.Context) *graphql.Response {
	op := graphql.GetOperationContext(ctx)
	req := RequestFrom(ctx)
	x := &execution{ctx: ctx, op: op, es: es, req: req, cache: map[string]*object{}, maxRows: es.limits.MaxResultRows}
	resp := &graphql.Response{}
	switch {
	case req == nil:
		x.fail(nil, errors.New("graph: no request in context"))
	case op.Operation.Operation == ast.Query:
		// Every field reads in one snapshot, whose position the result
		// carries: a subscription resumed from it receives exactly the
		// commits the query did not see.
		var snap *engine.Snapshot
		x.limitReads()
		defer x.deadline()()
		x.ctx, snap = es.store.ReadSnapshot(x.ctx, req.DB)
		x.snap = snap
		defer snap.Close() // after a panic too (closed below as soon as it can be)
		asOf, err := x.asOf()
		switch {
		case err != nil:
			x.fail(nil, err)
		case asOf != nil:
			// A read of the past: its first statement checks the
			// position, in the snapshot the fields then read.
			if x.past, err = es.store.ReadAsOf(x.ctx, req.DB, es.schema, es.role, snap, argAsOf, *asOf); err != nil {
				x.fail(nil, err)
				break
			}
			resp.Data = x.query()
		default:
			if x.oneStatement(typeQuery) {
				snap.OneStatement() // ended in the round trip of its statement
			}
			resp.Data = x.query()
		}
		// A result without data reflects nothing; one of the past
		// reflects its position.
		if pos, ok := snap.Position(); ok && resp.Data != nil {
			if x.past != nil {
				pos = x.past.Position
			}
			graphql.RegisterExtension(rctx, "position", pos.String())
		}
		snap.Close()
		if x.outdated != nil && req.try != nil && !req.try.last {
			// Read through a schema that is not the current one any
			// more: the Handler serves the query again with it.
			req.try.again = true
		}
	case op.Operation.Operation == ast.Mutation:
		resp.Data = x.mutation()
		if x.outdated != nil && req.try != nil && !req.try.last {
			// Validated against a schema that is not the current one
			// any more, and so not written: the Handler serves the
			// mutation again, validated against the current one, as
			// every replica then does.
			req.try.again = true
		}
		if x.commit != nil {
			// What a read right after the commit answers: a stream
			// resumed from it receives exactly the later commits.
			graphql.RegisterExtension(rctx, "position", x.commit.End().String())
			graphql.RegisterExtension(rctx, "version", x.commit.Version())
		}
	default:
		x.fail(nil, errSubscriptionNeedsStream())
	}
	resp.Errors = x.errs
	return resp
}

// errSubscriptionNeedsStream answers a subscription sent as a plain
// request.
func errSubscriptionNeedsStream() *sluice.Error {
	return sluice.Errorf(sluice.CodeInvalid, "subscriptions need Accept: text/event-stream or application/x-ndjson (graphql-sse), Accept: multipart/mixed (Apollo multipart subscriptions) or a WebSocket (graphql-transport-ws)")
}

// execution is the state of one operation.
type execution struct {
	ctx   context.Context
	op    *graphql.OperationContext
	es    *ExecutableSchema
	req   *Request
	errs  gqlerror.List
	cache map[string]*object // documents by id; nil: known missing
	// rows counts the documents read from Postgres; maxRows (0: no bound)
	// bounds them.
	rows, maxRows int
	// walked counts the objects and references prefetch visited
	// (walkStep); selIDs numbers the selections it keys walks and
	// backlink reads by, and checkPast its walks (selKey); pastSteps
	// counts the calls of checkPastSelection (export_test.go: what the
	// check costs).
	walked    int
	selIDs    map[ast.Selection]uint64
	pastSteps int
	// out is the writer of the data queryOn is writing, if any: the
	// errors recorded meanwhile count against its bound (record).
	out *jsonWriter
	// introSteps counts the objects introspection visited
	// (export_test.go: at most one per byte of the response bound).
	introSteps int
	// decodes counts the change images the per-class fields of
	// _ChangeSet decoded (export_test.go: once per change, whatever the
	// number of fields).
	decodes int
	// walkEvents, when above 1, is the number of subscription events
	// resolved together: each holds at most maxBytes, so their walk may
	// visit maxBytes objects and references for each (walkBound).
	walkEvents int
	// bounds, when set, replaces the schema's limits on rows and response
	// bytes (a live query's read, see Bounds).
	bounds *Bounds
	// lookupErr is the error of a document read for a filter (lookup),
	// which filter.Match cannot return.
	lookupErr error
	// backlinks holds the documents of each backlink selection (field
	// node and collected selection set) on each document, read by
	// prefetch.
	backlinks map[backlinkKey][]*object
	// hidden is what HiddenSince answered for the commit hiddenSeq
	// (checkImageFilter): the fields its images no longer show the reader.
	hidden    map[string]map[string]string
	hiddenSeq int64
	// then is the schema the commit thenSeq was made under, when older
	// than es's (Store.SchemaThen; nil: es's), which its changes are
	// selected by (selectsChange).
	then    *sluice.Schema
	thenSeq int64
	// backlinkErrs holds the error of each backlink field node whose
	// arguments were refused (loadBacklinks), recorded where the field
	// is written (writeDocField).
	backlinkErrs map[*ast.Field]error
	// preread holds the documents of root class query fields (by alias)
	// read before the execution, with other queries' (RunEach).
	preread map[string][]engine.QueryDoc
	// outdated is the error of a read that found the schema moved past
	// es's version (engine.ErrSchemaChanged), if one did.
	outdated error
	// past, when set, is the past state the query reads (asOf).
	past *engine.Past
	// snap is the snapshot a query (or a live query's read) reads in,
	// nil for a subscription's event (readAsOfCommit).
	snap *engine.Snapshot
	// commit is the commit a mutation made (or, for an idempotent
	// retry, the first one made).
	commit *sluice.Commit
	// wantBoundary: the execution is a live query's read whose one root
	// field lists documents; boundary is then its result's (see
	// Boundary).
	wantBoundary bool
	boundary     *Boundary
	// jsonValues counts the JSON values of the strings the request's
	// mutations decode documents from (jsonDocuments).
	jsonValues int
	// timeout, once deadline set one, is the error of a read its
	// deadline ended.
	timeout *sluice.Error
	// incomplete: an error was recorded (fail) that says the result
	// could not be read or answered as asked (a refused argument, a
	// limit, a deadline, a failed statement), not only the errors of
	// values the documents read hold (failValue). A live query's result
	// with such an error ends it; one with only the others is sent.
	incomplete bool
	// path is the path to the value being written (writeObject), for the
	// error of a non-null field without a value (nullField).
	path []pathSeg
	// rootType and roots are the fields selected on the operation's root
	// of that type, collected once (rootFields).
	rootType string
	roots    []graphql.CollectedField
}

// rootFields returns the fields the operation selects on its root of
// type root. A query reads them several times (asOf, oneStatement, then
// to run them); collecting them again each time was a percent of a
// lookup's CPU.
func (x *execution) rootFields(root string) []graphql.CollectedField {
	if x.roots == nil || x.rootType != root {
		x.rootType, x.roots = root, x.fields(x.op.Operation.SelectionSet, root)
	}
	return x.roots
}

// requestHash returns the hash of the operation's request: the one its
// transport looked its key up with, or, for a transport that did not,
// the hash of the operation as parsed.
func (x *execution) requestHash() ([]byte, error) {
	if x.req.try != nil && x.req.try.hash != nil {
		return x.req.try.hash, nil
	}
	if x.req.hash != nil {
		return x.req.hash, nil
	}
	return requestHash(x.req.DB, &graphql.RawParams{Query: x.op.RawQuery, OperationName: x.op.OperationName, Variables: x.op.Variables})
}

// requestHash returns the SHA-256 of what a GraphQL request of database d
// asks: its query, operation name and variables, so that a retry with
// the same Idempotency-Key is known to be the same request. The query
// counts by its own SHA-256, as a persisted query names it, so that a
// retry sending only that name (its text cached) is the same request as
// one sending the text. Made from the parameters as sent, it needs no
// schema: a key is looked up before the operation is parsed.
func requestHash(d *sluice.Database, p *graphql.RawParams) ([]byte, error) {
	vars, err := json.Marshal(p.Variables) // map keys sorted
	if err != nil {
		return nil, fmt.Errorf("hash variables: %w", err)
	}
	query := persistedHash(p)
	if p.Query != "" {
		sum := sha256.Sum256([]byte(p.Query))
		query = hex.EncodeToString(sum[:])
	}
	h := sha256.New()
	for _, part := range []string{"graphql", d.Path(), query, p.OperationName, string(vars)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum(nil), nil
}

// persistedHash returns the SHA-256 (hex) an automatic persisted query
// names its query by in extensions.persistedQuery, "" without one.
func persistedHash(p *graphql.RawParams) string {
	pq, _ := p.Extensions["persistedQuery"].(map[string]any)
	h, _ := pq["sha256Hash"].(string)
	return strings.ToLower(h)
}

// overRows reports whether the request has read more documents than its
// bound allows.
func (x *execution) overRows() bool {
	return x.maxRows > 0 && x.rows > x.maxRows
}

// rowBudget returns the most documents the next read may return: one more
// than the rows left, so that reading them all shows the bound is passed;
// -1 when unbounded.
func (x *execution) rowBudget() int {
	if x.maxRows <= 0 {
		return -1
	}
	return max(x.maxRows-x.rows, 0) + 1
}

// readRows counts n documents read and fails once they pass the bound.
func (x *execution) readRows(n int) error {
	x.rows += n
	if x.maxRows > 0 && x.rows > x.maxRows {
		return x.tooManyRows()
	}
	return nil
}

// tooManyRows returns the error of a read past the rows bound.
func (x *execution) tooManyRows() error {
	if x.bounds != nil && x.bounds.RowsKey != "" {
		return &resultLimitError{key: x.bounds.RowsKey, budget: true,
			msg: fmt.Sprintf("the live query's result holds more than the %d documents %s", x.maxRows, x.bounds.RowsWhy)}
	}
	return errTooManyRows(x.maxRows)
}

// maxBytes returns the bound of the response's data in bytes.
func (x *execution) maxBytes() int {
	if x.bounds != nil && x.bounds.Bytes > 0 {
		return x.bounds.Bytes
	}
	return x.es.limits.MaxResponseBytes
}

// tooLarge returns the error of a response past the bytes bound.
func (x *execution) tooLarge() error {
	if x.bounds != nil && x.bounds.BytesKey != "" {
		return &resultLimitError{key: x.bounds.BytesKey, budget: true,
			msg: fmt.Sprintf("the live query's result is larger than the %d bytes %s", x.maxBytes(), x.bounds.BytesWhy)}
	}
	return errResponseTooLarge(x.maxBytes())
}

// walkBound returns the most objects and references prefetch may visit
// (walkStep), 0 for no bound: one per byte of the response bytes bound,
// for each subscription event resolved together (walkEvents), each
// event's data being bounded by it on its own. The bound stays linear in
// what is sent.
func (x *execution) walkBound() int {
	max := x.maxBytes()
	if max > 0 && x.walkEvents > 1 {
		max *= x.walkEvents
	}
	return max
}

// tooMuchWalked returns the error of a prefetch that visited more objects
// and references than the response bytes bound (walkStep).
func (x *execution) tooMuchWalked() error {
	key, budget := keyMaxResponseBytes, false
	if x.bounds != nil && x.bounds.BytesKey != "" {
		key, budget = x.bounds.BytesKey, true
	}
	what, hold := "the response visits", "the response may hold"
	if x.walkEvents > 1 {
		what, hold = fmt.Sprintf("the %d events visits", x.walkEvents), "they may hold"
	}
	return &resultLimitError{key: key, budget: budget,
		msg: fmt.Sprintf("resolving the references of %s more than %d objects and references, one for each byte %s; select fewer levels of references, or use limit and offset to read the documents page by page", what, x.walkBound(), hold)}
}

// readFactor is how many times the response's bytes bound the documents
// an execution reads may hold together (limitReads). A reference is read
// whole whatever its selection, and a page with the columns its filter
// and order need, so a read holds more than its answer; four times leaves
// room for that and still bounds a request's memory by configuration.
const readFactor = 4

// limitReads bounds what x's reads of documents may hold together:
// readFactor times the response bytes bound, for each subscription event
// resolved together (walkBound). The reads fail past it (readErr).
func (x *execution) limitReads() {
	if max := x.walkBound(); max > 0 {
		x.ctx = engine.LimitReads(x.ctx, readFactor*int64(max))
	}
}

// readErr returns err, a read's error, as the error of a read past
// limitReads' bound when it is one.
func (x *execution) readErr(err error) error {
	if !errors.Is(err, engine.ErrReadBytes) {
		return err
	}
	return x.readLimitError(fmt.Sprintf("the documents the request reads are larger than %d bytes, %d times what its response may hold; select fewer documents or levels of references, or use limit and offset to read the documents page by page", readFactor*x.walkBound(), readFactor))
}

// readLimitError returns the error of a read past limitReads' bound,
// saying msg and naming the bound's key.
func (x *execution) readLimitError(msg string) error {
	key, budget := keyMaxResponseBytes, false
	if x.bounds != nil && x.bounds.BytesKey != "" {
		key, budget = x.bounds.BytesKey, true
	}
	return &resultLimitError{key: key, budget: budget, msg: msg}
}

// newWriter returns the writer of a response's data, bounded by the
// response bytes limit.
func (x *execution) newWriter() *jsonWriter {
	return &jsonWriter{max: x.maxBytes()}
}

// deadline bounds the time x's reads may run by Limits.RequestTimeout
// (none when it is zero) and returns the function that releases the
// deadline's timer. A read the deadline ends fails with the error
// naming the limit (fail), not with the driver's.
func (x *execution) deadline() context.CancelFunc {
	return x.deadlineSaying("the query ran longer than %s, the most one request may run (limit %s); select less, or split it into several requests")
}

// deadlineSaying is deadline with the error's message: format, of the
// limit's duration and its key.
func (x *execution) deadlineSaying(format string) context.CancelFunc {
	d := x.es.limits.RequestTimeout
	if d <= 0 {
		return func() {}
	}
	x.timeout = &sluice.Error{Code: sluice.CodeUnavailable, Message: fmt.Sprintf(format, d, keyRequestTimeout)}
	var cancel context.CancelFunc
	x.ctx, cancel = context.WithTimeoutCause(x.ctx, d, x.timeout)
	return cancel
}

// timedOut reports whether x's deadline (deadline) has passed: a read
// that failed then was ended by it.
func (x *execution) timedOut() bool {
	return x.timeout != nil && x.ctx.Err() != nil && context.Cause(x.ctx) == error(x.timeout)
}

// errNulled is what a writer returns when a non-null field had no value
// and the null reached the object it writes: the error is recorded
// already, at the field's path (nullField).
var errNulled = errors.New("graph: a non-null field has no value")

// takeErrors returns the errors recorded so far and forgets them (an
// event's: each event of a subscription carries its own).
func (x *execution) takeErrors() gqlerror.List {
	errs := x.errs
	x.errs = nil
	return errs
}

// fail records err as a GraphQL error at path. Domain errors show their
// message and code; anything else is logged and shown as internal. An
// error after x's deadline passed is the deadline's (a statement it
// cancelled, or a read it stopped).
func (x *execution) fail(path ast.Path, err error) {
	if err == errNulled {
		return // recorded where the null arose (nullField)
	}
	x.incomplete = true
	x.record(path, err)
}

// failValue records err, the error of a field whose value the documents
// read decide (a non-null field without a value that can be shown, a
// change set of a commit not made yet or pruned), at path: the result is
// whole as GraphQL answers it, nulls and errors included, and it may be
// another one once a commit changes those documents (see incomplete).
func (x *execution) failValue(path ast.Path, err error) {
	x.record(path, err)
}

// record records err as a GraphQL error at path (fail).
func (x *execution) record(path ast.Path, err error) {
	if x.timedOut() {
		err, x.incomplete = x.timeout, true
	}
	if errors.Is(err, engine.ErrSchemaChanged) {
		x.outdated, x.incomplete = err, true
	}
	ge := toGQLError(x.ctx, x.es.logger, path, err)
	if x.out != nil && !x.out.over {
		// The errors are sent with the data: a field error below a
		// nullable reference nulls only the reference, so the data of
		// each document read may bring one for each field, far past
		// the data's bytes (36 MB of errors for 2.5 MB of data).
		b, _ := json.Marshal(ge)
		x.out.reserve(len(b) + 1)
	}
	x.errs = append(x.errs, ge)
}

// toGQLError converts err to a GraphQL error with extensions.code.
func toGQLError(ctx context.Context, logger *slog.Logger, path ast.Path, err error) *gqlerror.Error {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		return ge
	}
	var le *resultLimitError
	if errors.As(err, &le) {
		return le.gqlError(path)
	}
	sh := sluice.Show(err)
	sh.Log(ctx, logger, "graphql request failed", err)
	ext := sh.GraphQLExtensions(sh.Code.GraphQLCode())
	if stale, ok := errors.AsType[*sluice.StaleError](err); ok {
		docs := make([]map[string]any, len(stale.Docs))
		for i, d := range stale.Docs {
			docs[i] = map[string]any{"_id": d.ID, "_version": nil}
			if d.Version != "" {
				docs[i]["_version"] = d.Version
			}
		}
		ext["documents"] = docs
	}
	return &gqlerror.Error{Message: sh.Message, Path: path, Extensions: ext}
}

// fieldPath returns the response path of a root field.
func fieldPath(f graphql.CollectedField) ast.Path {
	return ast.Path{ast.PathName(f.Alias)}
}

func errorf(format string, args ...any) error {
	return sluice.Errorf(sluice.CodeInvalid, format, args...)
}
