package rest

import (
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/connlimit"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/protocol"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// Stream tickets (see internal/auth/ticket.go for the design): a page gets
// one with an authenticated fetch and opens a native EventSource with it
// in the URL, where EventSource cannot send an Authorization header.

// ticketParam is the query parameter that carries a stream ticket.
const ticketParam = "ticket"

// createTicket serves POST /api/stream-tickets: a stream ticket carrying
// the request's credential, for the database the optional body names
// ({"database":"org/name"}; "_system" for the system database), which the
// caller must be able to read.
func (a *api) createTicket(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	var body struct {
		Database string `json:"database"`
	}
	if r.ContentLength != 0 {
		if err := decodeSmallJSON(w, r, &body); err != nil && !isEmptyBody(err) {
			writeError(w, r, err)
			return
		}
	}
	path := ""
	if body.Database != "" {
		org, name, err := parseDatabasePath(body.Database)
		if err != nil {
			writeError(w, r, err)
			return
		}
		// Checked now so that a page learns of a missing database or role
		// here, not from an EventSource that can only say "error".
		d, _, err := a.Engine.Database(r.Context(), userFrom(r), org, name, sluice.RoleRead)
		if err != nil {
			writeError(w, r, err)
			return
		}
		path = d.Path()
	}
	t, err := a.Engine.Auth().CreateTicket(r.Context(), auth.CredentialFrom(r.Context()), path)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := map[string]any{
		"ticket": t.Secret,
		// Milliseconds, as JavaScript's Date keeps them.
		"expires":    t.Expires.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"expires_in": int64(time.Until(t.Expires).Round(time.Second) / time.Second),
	}
	if path != "" {
		out["database"] = path
	}
	// The answer is a secret: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, success(out))
}

// parseDatabasePath splits "org/name" (or "_system").
func parseDatabasePath(s string) (string, string, error) {
	if s == sluice.SystemDB {
		return sluice.SystemOrg, sluice.SystemDB, nil
	}
	org, name, ok := strings.Cut(s, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") {
		return "", "", sluice.Errorf(sluice.CodeInvalid, "database %s: want org/name, or _system", sluice.Echo(s))
	}
	return org, name, nil
}

// refuseTickets answers 400 to a request that is not a stream but carries
// ?ticket=: a ticket opens streams only, so one that reached another URL
// is a mistake the client should hear of, not a credential. A query that
// cannot be read is left to the route, whose parameter check (query)
// refuses it.
func refuseTickets(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q, err := streamparam.Query(r); err == nil && q.Has(ticketParam) {
			refuse(w, r, errTicketNotStream())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func errTicketNotStream() error {
	return sluice.Errorf(sluice.CodeInvalid, "?ticket= authenticates only a stream: GET /api/subscribe/… or GET /api/graphql/… with Accept: text/event-stream (as EventSource sends); authenticate other requests with the Authorization header")
}

// authenticateStream authenticates the stream routes: like authenticate,
// or with a stream ticket in ?ticket= when the request is an event stream
// (GET, Accept preferring text/event-stream: protocol.SSE, as the GraphQL
// transport will serve it). The ticket is spent, then removed from
// the URL the handlers see, so their parameter checks and any URL they
// log or echo never hold it. A request it refuses is answered in the
// shape of its URL (refuse), as authenticate answers; so is a query that
// cannot be read (streamparam.Query), before a ticket in it is spent:
// re-encoded without the pair it mangled, it would reach the handler as
// a stream the client did not ask for.
func (a *api) authenticateStream(next http.Handler) http.Handler {
	plain := a.authenticate(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := streamparam.Query(r)
		if err != nil {
			refuse(w, r, err)
			return
		}
		if !q.Has(ticketParam) {
			plain.ServeHTTP(w, r)
			return
		}
		switch {
		case r.Method != http.MethodGet || protocol.Of(r) != protocol.SSE:
			refuse(w, r, errTicketNotStream())
			return
		case len(q[ticketParam]) > 1:
			refuse(w, r, sluice.Errorf(sluice.CodeInvalid, "query parameter %q is given %d times", ticketParam, len(q[ticketParam])))
			return
		case r.Header.Get("Authorization") != "":
			refuse(w, r, sluice.Errorf(sluice.CodeInvalid, "the request has both an Authorization header and ?ticket=: send one"))
			return
		}
		c, err := a.Engine.Auth().RedeemTicket(r.Context(), a.Engine.Auth().ClientAddr(r), q.Get(ticketParam), routeDatabase(r))
		if err != nil {
			refuse(w, r, err)
			return
		}
		connlimit.Authenticated(r.Context())
		ctx, end, ok := a.beginRequest(w, r, c)
		if !ok {
			return
		}
		defer end()
		q.Del(ticketParam)
		u := *r.URL
		u.RawQuery = q.Encode()
		r = r.WithContext(auth.WithCredential(ctx, c))
		r.URL = &u
		r.RequestURI = u.RequestURI()
		next.ServeHTTP(w, r)
	})
}

// routeDatabase returns the path ("org/name") of the database a stream
// route names.
func routeDatabase(r *http.Request) string {
	org, name := dbPath(r)
	if org == "" && name == "" && strings.HasSuffix(chi.RouteContext(r.Context()).RoutePattern(), "/_system") {
		org, name = sluice.SystemOrg, sluice.SystemDB
	}
	return org + "/" + name
}
