package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Where the public keys come from, and how long they are trusted. An
// identity provider (Auth0, Keycloak, Clerk, Supabase Auth…) publishes
// its JWKS at a URL and rotates keys by publishing the new one before
// signing with it; so a JWT whose kid is unknown is the cue to fetch the
// set again, and otherwise the response's Cache-Control says when to.
const (
	// jwksMinTTL and jwksMaxTTL bound the refresh interval a response's
	// Cache-Control sets (no-cache counts as 0); jwksDefaultTTL applies
	// without max-age.
	jwksMinTTL     = time.Minute
	jwksMaxTTL     = 24 * time.Hour
	jwksDefaultTTL = 15 * time.Minute
	// jwksMaxStale is how long past its refresh time a set whose URL
	// fails is still used. Past it JWTs are refused: a key the provider
	// revoked meanwhile must not be accepted for ever.
	jwksMaxStale = 24 * time.Hour
	// jwksKidInterval is the least time between two fetches caused by
	// unknown kids: a stream of JWTs with made-up kids costs the provider
	// one request per interval, not one each.
	jwksKidInterval = 10 * time.Second
	// jwksFetchTimeout bounds one fetch; jwksKidWait bounds how long a
	// request whose JWT has an unknown kid waits for the fetch it caused.
	jwksFetchTimeout = 10 * time.Second
	jwksKidWait      = 5 * time.Second
	// jwksMaxBytes bounds a JWKS response: real ones are a few KiB.
	jwksMaxBytes = 1 << 20
	// jwksRetryMin and jwksRetryMax bound the delay between retries of a
	// failed scheduled refresh.
	jwksRetryMin = 5 * time.Second
	jwksRetryMax = 5 * time.Minute
	// jwksRemovedFor is how long a key that left the set is remembered
	// as removed (keySet.removed), and jwksMaxRemoved how many are at
	// most (the oldest are forgotten first). The record only has to
	// outlive what was authenticated with the key before it left: a
	// stream ticket made then (on this replica or another) and redeemed
	// after, which lives about a minute (stream_ticket_ttl), and a stream
	// whose JWT was verified just before the removal and whose guard
	// registers just after. A JWT presented afterwards is refused by
	// Verify whatever this record says. The cap bounds the memory a
	// provider that keeps publishing new sets can take.
	jwksRemovedFor = time.Hour
	jwksMaxRemoved = 1024
)

// keySet is the JWKS that verifies JWTs: fixed, read from a file (again
// on Reload), or fetched from a URL and kept fresh. It is safe for
// concurrent use.
type keySet struct {
	file   string // jwt_jwks_file, or ""
	url    string // jwt_jwks_url, or ""
	client *http.Client
	now    func() time.Time
	logger *slog.Logger
	// onChange, when set, is called after the keys changed (see
	// JWT.OnKeysChanged), with s.mu not held.
	onChange atomic.Pointer[func()]

	mu   sync.Mutex
	keys []publicKey
	// removed holds the identities (keyID) of keys that a reload or
	// fetch took out of the set, with when: a credential of such a key
	// opens no stream and its streams end (JWT.KeyRemoved). A key this
	// set never held is not removed: another replica may have learnt it
	// first, from a newer set. A key that comes back leaves it; entries
	// are forgotten after jwksRemovedFor, the oldest first past
	// jwksMaxRemoved.
	removed   map[string]time.Time
	digest    [sha256.Size]byte // of the set's JSON the keys came from
	gen       atomic.Uint64     // moves when the keys change
	fresh     time.Time         // URL: when to fetch again
	fetched   time.Time         // URL: the last successful fetch
	kidFetch  time.Time         // URL: the last fetch an unknown kid caused
	fetching  chan struct{}     // URL: closed when the fetch in flight ends; nil when none
	lastError error             // URL: why the last fetch failed, nil after a success
}

// current returns the keys to verify with, or an error saying why there
// are none usable.
func (s *keySet) current() ([]publicKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.url != "" && s.now().After(s.fresh.Add(jwksMaxStale)) {
		// This answers any client that presents a JWT: why the fetches
		// fail (the provider's answer, its address) is for the log, where
		// every failed refresh is written (run).
		return nil, fmt.Errorf("the key set of jwt_jwks_url is stale: it could not be refreshed for more than %d hours (the server's log says why)", int(jwksMaxStale.Hours()))
	}
	return s.keys, nil
}

// has reports whether the set holds the key identified by id (keyID).
func (s *keySet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.id == id {
			return true
		}
	}
	return false
}

// wasRemoved reports whether a reload or fetch took the key identified by
// id out of the set, less than jwksRemovedFor ago, and it did not come
// back since.
func (s *keySet) wasRemoved(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.removed[id]
	return ok && s.now().Sub(at) < jwksRemovedFor
}

// changed calls onChange, if set. The caller must not hold s.mu: what
// onChange does asks has.
func (s *keySet) changed() {
	if f := s.onChange.Load(); f != nil {
		(*f)()
	}
}

// source names the config key the keys come from, for error messages.
func (s *keySet) source() string {
	if s.url != "" {
		return "jwt_jwks_url"
	}
	return "jwt_jwks_file"
}

// load reads the file or fetches the URL, and replaces the keys. A set
// that cannot be read or parsed leaves the keys as they were.
func (s *keySet) load(ctx context.Context) error {
	if s.url != "" {
		return s.fetch(ctx)
	}
	if s.file == "" {
		return nil
	}
	b, err := os.ReadFile(s.file)
	if err != nil {
		return fmt.Errorf("jwt_jwks_file: %w", err)
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return fmt.Errorf("jwt_jwks_file: %w", err)
	}
	s.mu.Lock()
	changed := s.replace(keys, b)
	s.mu.Unlock()
	if changed {
		s.changed()
	}
	return nil
}

// replace makes keys, parsed from the set's JSON b, the keys in use. When
// b differs from the set they replace, the generation moves: credentials
// remembered before then count no more (a key removed from the set stops
// verifying at once); it then reports true, and the caller calls changed
// once it released s.mu (streams of a removed key end). The caller holds
// s.mu.
func (s *keySet) replace(keys []publicKey, b []byte) bool {
	s.noteRemoved(s.keys, keys)
	s.keys = keys
	if d := sha256.Sum256(b); d != s.digest {
		s.digest = d
		s.gen.Add(1)
		return true
	}
	return false
}

// noteRemoved records in s.removed the keys of old that are not in keys,
// and forgets those of keys (a key that comes back is no longer removed)
// and those past jwksRemovedFor or jwksMaxRemoved. The caller holds s.mu.
func (s *keySet) noteRemoved(old, keys []publicKey) {
	now := s.now()
	in := make(map[string]bool, len(keys))
	for _, k := range keys {
		in[k.id] = true
		delete(s.removed, k.id)
	}
	for _, k := range old {
		if !in[k.id] {
			if s.removed == nil {
				s.removed = map[string]time.Time{}
			}
			s.removed[k.id] = now
		}
	}
	for id, at := range s.removed {
		if now.Sub(at) >= jwksRemovedFor {
			delete(s.removed, id)
		}
	}
	for len(s.removed) > jwksMaxRemoved {
		oldest, first := "", time.Time{}
		for id, at := range s.removed {
			if oldest == "" || at.Before(first) {
				oldest, first = id, at
			}
		}
		delete(s.removed, oldest)
	}
}

// changes returns the keys removed less than jwksRemovedFor ago, and the
// keys of the set (see JWT.KeyChanges).
func (s *keySet) changes() (removed, held []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, at := range s.removed {
		if now.Sub(at) < jwksRemovedFor {
			removed = append(removed, id)
		}
	}
	for _, k := range s.keys {
		held = append(held, k.id)
	}
	return removed, held
}

// fetch fetches the URL's set, unless a fetch is in flight, in which case
// it waits for that one. Only one request reaches the provider at a time.
func (s *keySet) fetch(ctx context.Context) error {
	s.mu.Lock()
	if wait := s.fetching; wait != nil {
		s.mu.Unlock()
		return s.await(ctx, wait)
	}
	done := make(chan struct{})
	s.fetching = done
	s.mu.Unlock()
	return s.fetchStarted(ctx, done)
}

// await waits for the fetch in flight, whose done channel is wait, and
// returns its error.
func (s *keySet) await(ctx context.Context, wait chan struct{}) error {
	select {
	case <-wait:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastError
}

// fetchStarted makes the fetch registered as in flight (s.fetching is
// done, set under s.mu by the caller) and ends it.
func (s *keySet) fetchStarted(ctx context.Context, done chan struct{}) error {
	keys, b, ttl, err := s.get(ctx)

	s.mu.Lock()
	s.fetching = nil
	close(done)
	if err != nil {
		// The keys stay as they were: nothing changed.
		s.lastError = fmt.Errorf("jwt_jwks_url: %w", err)
		err = s.lastError
		s.mu.Unlock()
		return err
	}
	now := s.now()
	changed := s.replace(keys, b)
	s.fetched, s.fresh, s.lastError = now, now.Add(ttl), nil
	s.mu.Unlock()
	if changed {
		s.changed()
	}
	return nil
}

// get makes one request for the URL's set and returns its keys, its JSON
// and how long its Cache-Control says they may be used.
func (s *keySet) get(ctx context.Context) ([]publicKey, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	// The URL as errors show it (they go to the log, and Reload's to the
	// terminal): without the password it may hold. The client's own
	// errors hide it already.
	shown := req.URL.Redacted()
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, 0, fmt.Errorf("GET %s: %s", shown, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("GET %s: %w", shown, err)
	}
	if len(b) > jwksMaxBytes {
		return nil, nil, 0, fmt.Errorf("GET %s: the key set is larger than %d bytes", shown, jwksMaxBytes)
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("GET %s: %w", shown, err)
	}
	return keys, b, cacheTTL(resp.Header.Get("Cache-Control")), nil
}

// cacheTTL returns how long a response may be used by its Cache-Control
// header: max-age, no-cache or no-store as 0, jwksDefaultTTL without
// either; bounded by jwksMinTTL and jwksMaxTTL.
func cacheTTL(cacheControl string) time.Duration {
	ttl := jwksDefaultTTL
	for _, d := range strings.Split(cacheControl, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "no-cache", "no-store":
			return jwksMinTTL
		case "max-age":
			if n, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 64); err == nil && n >= 0 {
				ttl = time.Duration(min(n, int64(jwksMaxTTL/time.Second))) * time.Second
			}
		}
	}
	return min(max(ttl, jwksMinTTL), jwksMaxTTL)
}

// refreshForKid fetches the URL's set again because a JWT names kid, which
// the set does not hold, at most once per jwksKidInterval; a request that
// comes sooner waits for the fetch in flight, if any. It reports whether
// the keys may have changed.
func (s *keySet) refreshForKid(kid string) bool {
	if s.url == "" {
		return false
	}
	// Whether a fetch is in flight, and this one's start when none is,
	// are decided under one hold of s.mu: a request that found none in
	// flight but the last one just started (its fetching not set yet)
	// was refused at once rather than wait for it.
	s.mu.Lock()
	wait := s.fetching
	inFlight := wait != nil
	if !inFlight && s.now().Sub(s.kidFetch) < jwksKidInterval {
		s.mu.Unlock()
		return false
	}
	var done chan struct{}
	if !inFlight {
		s.kidFetch = s.now()
		done = make(chan struct{})
		s.fetching = done
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), jwksKidWait)
	defer cancel()
	var err error
	if inFlight {
		err = s.await(ctx, wait)
	} else {
		err = s.fetchStarted(ctx, done)
	}
	if err != nil {
		// Logged by the request that started the fetch, with the kid
		// cut short: the kid is the client's, and every request waiting
		// on a slow fetch logged its own whole (300 requests of 10 KB
		// kids wrote 3 MB).
		if !inFlight {
			s.logger.Warn("jwt: fetch the key set for an unknown kid", "kid", shortKid(kid), "err", err)
		}
		return false
	}
	return true
}

// shortKid returns kid, a client's, cut to at most 64 bytes for the log.
func shortKid(kid string) string {
	if len(kid) <= 64 {
		return kid
	}
	return strings.ToValidUTF8(kid[:64], "") + "…"
}

// run refreshes the URL's set when its Cache-Control says, until ctx
// ends. A failed refresh is retried with backoff; the keys it had stay in
// use for up to jwksMaxStale.
func (s *keySet) run(ctx context.Context) {
	if s.url == "" {
		return
	}
	retry := jwksRetryMin
	for {
		s.mu.Lock()
		wait := s.fresh.Sub(s.now())
		if s.lastError != nil {
			wait = retry
		}
		s.mu.Unlock()
		timer := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if err := s.fetch(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.logger.Warn("jwt: refresh the key set; the keys fetched before stay in use", "err", err, "retry_in", retry,
				"refused_after", s.staleLimit().UTC().Format(time.RFC3339))
			retry = min(2*retry, jwksRetryMax)
			continue
		}
		retry = jwksRetryMin
	}
}

// staleLimit returns when the current keys stop being used if no fetch
// succeeds.
func (s *keySet) staleLimit() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fresh.Add(jwksMaxStale)
}

// ErrNoKeySet is returned by JWT.Reload when no key set is configured
// (no jwt_jwks_file or jwt_jwks_url): there is nothing to reload.
var ErrNoKeySet = errors.New("no jwt_jwks_file or jwt_jwks_url is configured")
