package graph

import (
	"sync"

	"github.com/sluice-dev/sluice"
)

// paramsBudget bounds the bytes the parameters of plain HTTP requests
// (query, variables, extensions) hold while their operations run, in the
// process and for each user: a request waiting its turn for a Postgres
// connection keeps its decoded variables meanwhile, and sixty
// concurrent POSTs of 8 MiB held 1.5 GB before this budget. A request is
// charged once its body is read (paramsCost) and released when it is
// answered; past the process's budget it is refused with a 503, past its
// user's (a quarter) with a 429, each with Retry-After, having run
// nothing. The super user is held to the process's budget only. Streams
// charge what they keep to their own budgets (stream_variables_bytes).
type paramsBudget struct {
	max int64
	mu  sync.Mutex
	// held is the bytes charged in all; users, to each user (by id).
	held  int64
	users map[int64]int64
}

// paramsShare is the part of the budget one user may hold: as many as
// four users' requests of the largest bodies fit at once.
const paramsShare = 4

// newParamsBudget returns a budget of max bytes; nil (no bound) when max
// is 0.
func newParamsBudget(max int64) *paramsBudget {
	if max <= 0 {
		return nil
	}
	return &paramsBudget{max: max, users: map[int64]int64{}}
}

// take charges n bytes to u and returns the function that releases them,
// or the error of a budget that has no room for them.
func (b *paramsBudget) take(u *sluice.User, n int64) (func(), error) {
	if b == nil || n <= 0 {
		return func() {}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.max {
		return nil, sluice.Errorf(sluice.CodeUnavailable, "the GraphQL requests this server runs hold %d bytes of parameters, and this one's would hold %d more, past %d (config graphql_request_bytes); retry shortly, or on another replica", b.held, n, b.max)
	}
	if share := b.max / paramsShare; !u.Superuser && b.users[u.ID]+n > share {
		return nil, sluice.Errorf(sluice.CodeTooMany, "user %s's GraphQL requests on this server hold %d bytes of parameters, and this one's would hold %d more, past a user's share of %d (a quarter of config graphql_request_bytes); wait for them to be answered, or send smaller variables", u.Name, b.users[u.ID], n, share)
	}
	b.held += n
	b.users[u.ID] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.held -= n
			if b.users[u.ID] -= n; b.users[u.ID] <= 0 {
				delete(b.users, u.ID)
			}
		})
	}, nil
}

// valueCost is what a JSON value of the parameters is charged once
// decoded, beyond its text: small values cost up to about twenty times
// their few bytes (an interface, a map entry or a slice element each).
const valueCost = 80

// paramsCost is the charge of a request's parameters read from text of
// n bytes holding values JSON values.
func paramsCost(n, values int) int64 { return int64(n) + valueCost*int64(values) }

// ParamsCost is what the parameters decoded from payload, a GraphQL
// request's JSON (a graphql-ws subscribe message's), are charged to the
// budget of requests' parameters (Handler.TakeParams).
func ParamsCost(payload []byte) int64 { return paramsCost(len(payload), jsonValues(payload)) }

// TakeParams charges cost, what an operation's parameters hold (ParamsCost),
// to user u's budget of requests' parameters, shared with the plain HTTP
// requests (Options.RequestBytes), and returns the function that gives it
// back; past the budget, the error to answer. A graphql-ws socket charges
// the queries and mutations it holds while they wait and run.
func (h *Handler) TakeParams(u *sluice.User, cost int64) (func(), error) {
	return h.budget.take(u, cost)
}
