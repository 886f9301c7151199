package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
)

// Stream tickets let a browser's native EventSource authenticate: it can
// send no Authorization header, and a long-lived secret (a password, an API
// token, a JWT) in a URL leaks into proxy logs, browser history and
// Referer headers. A page asks for a ticket with an ordinary authenticated
// fetch (POST /api/stream-tickets) and puts it in the stream URL as
// ?ticket=. A ticket is:
//
//   - short-lived (stream_ticket_ttl, 60 s by default) and single use, so a
//     URL that leaks is worthless by the time anyone reads it;
//   - good only for a stream request (the REST middleware refuses it on
//     anything else), and, when asked, for one database only;
//   - bound to the credential that made it: the stream it opens holds that
//     credential (its API token, its password hash, its user, its expiry,
//     the key that verified its JWT), so revoking the token, changing the
//     password, deleting the user or removing the JWT's key from the key
//     set ends the stream like any other (changefeed.Guard). The ticket's
//     own lifetime bounds only its redemption, not the stream.
//
// Tickets are rows in Postgres (migrations/0006_stream_tickets.sql),
// stored as the SHA-256 of the secret like API tokens, rather than
// self-contained signed values: a signed ticket would need a replay guard
// shared by every replica to be single use, which is a table in Postgres
// anyway, plus a signing key shared by every replica. A row redeemed by
// DELETE … RETURNING is single use on every replica by construction, needs
// no key, and is revocable with its credential.

// TicketPrefix starts every stream ticket. It differs from TokenPrefix
// before any random character, so no API token can look like a ticket.
const TicketPrefix = "sluice-st_"

// DefaultTicketTTL is how long a stream ticket may be redeemed when
// stream_ticket_ttl is not set.
const DefaultTicketTTL = time.Minute

// maxTicketsPerUser bounds the live tickets of one user, and so the table.
const maxTicketsPerUser = 1000

// ticketBytes is the entropy of a ticket secret.
const ticketBytes = 32

// Ticket is a new stream ticket. Secret is shown to its maker once and is
// stored only hashed.
type Ticket struct {
	Secret string
	// Expires is when it can no longer be redeemed: TicketTTL after it was
	// made, or the expiry of the credential that made it if sooner.
	Expires time.Time
	// Database is the path ("org/name") it may open a stream on; "" for
	// any database c may read.
	Database string
}

// CreateTicket makes a stream ticket that carries credential c, for
// database dbPath ("org/name"; "" for any). The caller has checked that c
// may read dbPath. It returns TooMany when c's user holds too many unused
// tickets, Unavailable when Postgres cannot be reached.
func (a *Authenticator) CreateTicket(ctx context.Context, c *sluice.Credential, dbPath string) (*Ticket, error) {
	if c == nil || c.User == nil {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "a stream ticket is made by an authenticated request")
	}
	b := make([]byte, ticketBytes)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	secret := TicketPrefix + base64.RawURLEncoding.EncodeToString(b)
	exp, err := a.store.CreateStreamTicket(ctx, HashToken(secret), c, dbPath, a.ticketTTL, maxTicketsPerUser)
	if err != nil {
		return nil, err
	}
	return &Ticket{Secret: secret, Expires: exp, Database: dbPath}, nil
}

var errBadTicket = sluice.Errorf(sluice.CodeUnauthenticated, "invalid stream ticket: unknown, already used or expired; get a new one with POST /api/stream-tickets")

// RedeemTicket spends the stream ticket secret for a stream on database
// dbPath ("org/name") and returns the credential it carries, as it is now.
// Only one redemption of a ticket ever succeeds, on any replica. It returns
// an Unauthenticated error for a ticket that is unknown, used or expired or
// whose credential no longer holds, and Forbidden when the ticket is for
// another database (it is spent all the same: a ticket tried in the wrong
// place may have leaked).
func (a *Authenticator) RedeemTicket(ctx context.Context, remoteAddr, secret, dbPath string) (*sluice.Credential, error) {
	// Anything that cannot be a ticket is refused without a round trip,
	// and so is a client whose guesses are throttled (throttle.go).
	if !strings.HasPrefix(secret, TicketPrefix) || base64.RawURLEncoding.DecodedLen(len(secret)-len(TicketPrefix)) != ticketBytes {
		return nil, errBadTicket
	}
	// It is admitted before its round trip, as a bearer token is
	// (Authenticate), so tickets guessed at once are bounded too. A
	// ticket is single-use, so concurrent redemptions share no lookup
	// (a bearer credential's do).
	settle, err := a.admitAddress(ctx, remoteAddr)
	if err != nil {
		return nil, err
	}
	failed := false
	// Deferred, so that a panic below cannot keep the place for good.
	defer func() { settle(failed) }()
	c, scope, err := a.store.RedeemStreamTicket(ctx, HashToken(secret))
	failed = sluice.ErrorCode(err) == sluice.CodeUnauthenticated
	if err != nil {
		return nil, err
	}
	if scope != "" && scope != dbPath {
		return nil, sluice.Errorf(sluice.CodeForbidden, "this stream ticket is for database %s, not %s", scope, dbPath)
	}
	return c, nil
}
