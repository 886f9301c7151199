package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

const singleJWTSecret = "the-hs256-secret-of-the-single-mode-tests-is-long"

// singleAccessFixture is a daemon whose user rita reads admin/<db> and
// may authenticate with HS256 JWTs; max_streams_per_user is maxPerUser
// (0: the default).
func singleAccessFixture(t *testing.T, db string, maxPerUser int64) *dt.Daemon {
	t.Helper()
	d := dt.Start(t, func(c *config.Config) {
		c.JWTHS256Secret = singleJWTSecret
		c.JWTLeeway = time.Second
		if maxPerUser > 0 {
			c.MaxStreamsPerUser = maxPerUser
		}
	})
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"rita","role":"read"}`)
	return d
}

// ritaJWT returns an HS256 JWT naming rita that expires at exp.
func ritaJWT(t *testing.T, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "rita", "exp": exp.Unix(), "iat": time.Now().Unix()}).SignedString([]byte(singleJWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// singleSubscribe POSTs a Dog_added subscription with operation id to
// reservation tok on admin/<db>.
func singleSubscribe(t *testing.T, d *dt.Daemon, auth dt.Auth, db, tok, id string) {
	t.Helper()
	d.MustDo(t, 202, auth, "POST", "/api/graphql/admin/"+db, body("subscription { Dog_added { name } }", "extensions", map[string]any{"operationId": id}),
		"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
}

// expectSingleEnd waits for the event stream st to end and checks that
// each operation of ids got a next carrying an error with code, then its
// complete.
func expectSingleEnd(t *testing.T, st *stream, code string, ids ...string) {
	t.Helper()
	frames := st.Ended()
	all := ""
	for _, f := range frames {
		all += f.String() + "\n"
	}
	for _, id := range ids {
		errNext := fmt.Sprintf("event: next\ndata: {\"id\":%q,\"payload\":{\"errors\":[", id)
		complete := fmt.Sprintf("event: complete\ndata: {\"id\":%q}", id)
		i := strings.Index(all, errNext)
		if i < 0 || !strings.Contains(all[i:], `"code":"`+code+`"`) || !strings.Contains(all[i:], complete) {
			t.Errorf("operation %s: want a next with a %s error, then complete; the stream sent:\n%s", id, code, all)
		}
	}
}

// TestSingleStreamEndsAtJWTExpiry: a single connection mode stream
// reserved with a JWT ends when the JWT expires (exp plus the leeway),
// after an UNAUTHENTICATED error for each of its subscriptions, that
// POSTed with a JWT that still holds among them (found by review: the
// reservation's grant carried no credential, so its expiry ended the
// subscriptions sent with it and the event stream went on pinging).
func TestSingleStreamEndsAtJWTExpiry(t *testing.T) {
	t.Parallel()
	d := singleAccessFixture(t, "singlejwt", 0)
	// Whole seconds, as exp is; long enough to open the stream and
	// subscribe on a loaded machine (running the whole suite, -race):
	// past exp the subscriptions are refused, and the test fails.
	exp := time.Now().Add(15 * time.Second).Truncate(time.Second)
	short := dt.Bearer(ritaJWT(t, exp))
	long := dt.Bearer(ritaJWT(t, time.Now().Add(time.Hour)))
	tok := reserve(t, d, short, "singlejwt")
	st := mustOpen(t, d, short, "GET", "/api/graphql/admin/singlejwt", "", nil, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
	st.connected()
	singleSubscribe(t, d, short, "singlejwt", tok, "short")
	singleSubscribe(t, d, long, "singlejwt", tok, "long")
	insertDog(t, d, "singlejwt", "a")
	for range 2 {
		if f := st.Event().String(); !strings.Contains(f, `"Dog_added":{"name":"a"}`) {
			t.Fatalf("before exp: %q", f)
		}
	}
	expectSingleEnd(t, st, "UNAUTHENTICATED", "short", "long")
	if ended := time.Now(); ended.Before(exp.Add(time.Second)) {
		t.Errorf("the stream ended at %v, before the JWT expired at %v", ended, exp.Add(time.Second))
	}
}

// TestSingleRoleChangeEndsStreams: with max_streams_per_user 2, a user's
// two claimed single connection mode streams end when her role goes to
// none, so once it is read again she holds two new ones and a third PUT
// is refused (found by review: the guard's end dropped only unclaimed
// reservations, so the streams went on, counted out of the caps, and she
// held four).
func TestSingleRoleChangeEndsStreams(t *testing.T) {
	t.Parallel()
	d := singleAccessFixture(t, "singlerole", 2)
	rita := dt.Basic("rita", "rita-password")
	var streams []*stream
	for range 2 {
		tok := reserve(t, d, rita, "singlerole")
		st := mustOpen(t, d, rita, "GET", "/api/graphql/admin/singlerole", "", nil, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
		st.connected()
		streams = append(streams, st)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/singlerole", `{"user":"rita","role":"none"}`)
	for _, st := range streams {
		expectSingleEnd(t, st, "FORBIDDEN")
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/singlerole", `{"user":"rita","role":"read"}`)
	for range 2 {
		tok := reserve(t, d, rita, "singlerole")
		st := mustOpen(t, d, rita, "GET", "/api/graphql/admin/singlerole", "", nil, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
		st.connected()
	}
	if r := d.Do(t, rita, "PUT", "/api/graphql/admin/singlerole", nil); r.Status != 429 {
		t.Fatalf("a third reservation: %d %s, want 429", r.Status, r.Body)
	}
}

// TestSingleRevokedTokenEndsStream: a single connection mode stream
// reserved with an API token ends when the token is revoked, after an
// UNAUTHENTICATED error for its subscription, POSTed with a password that
// still holds; its places among the streams are then free (found by
// review: the reservation's grant carried no credential, so the stream
// went on and its user's next PUT was refused with 429).
func TestSingleRevokedTokenEndsStream(t *testing.T) {
	t.Parallel()
	d := singleAccessFixture(t, "singletoken", 2)
	rita := dt.Basic("rita", "rita-password")
	var apiToken struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, rita, "POST", "/api/tokens", `{"name":"single"}`).Body, &apiToken); err != nil {
		t.Fatal(err)
	}
	bearer := dt.Bearer(apiToken.Token)
	tok := reserve(t, d, bearer, "singletoken")
	st := mustOpen(t, d, bearer, "GET", "/api/graphql/admin/singletoken", "", nil, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
	st.connected()
	// The reservation and this subscription: both of rita's places.
	singleSubscribe(t, d, rita, "singletoken", tok, "s")
	d.MustDo(t, 200, rita, "DELETE", fmt.Sprintf("/api/tokens/%d", apiToken.ID), nil)
	expectSingleEnd(t, st, "UNAUTHENTICATED", "s")
	reserve(t, d, rita, "singletoken")
	reserve(t, d, rita, "singletoken")
}
