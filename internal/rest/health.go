package rest

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/connlimit"

	"github.com/sluice-dev/sluice"
)

func (a *api) ok(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, success(map[string]any{}))
}

// readyz answers 200 only while the daemon can serve.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	if a.Ready == nil || !a.Ready() {
		writeError(w, r, sluice.Errorf(sluice.CodeUnavailable, "not ready"))
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{}))
}

func (a *api) info(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r)
	writeJSON(w, http.StatusOK, success(map[string]any{
		"version":   a.Version,
		"user":      u.Name,
		"org":       u.Org,
		"superuser": u.Superuser,
	}))
}

// authorizeMetrics lets through a request for /metrics from the super
// user (any of its credentials) or with the bearer metrics_token. The
// metrics name databases and show their activity, so they are not public
// by default; a scraper on a private network can be given a listener of
// its own instead (metrics_listen).
func (a *api) authorizeMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The token counts only as the request's one Authorization
		// header: of two, which counts would be a guess, and Authenticate
		// refuses them (it was served the token given first).
		if hs := r.Header.Values("Authorization"); a.MetricsToken != "" && len(hs) == 1 {
			scheme, token, _ := strings.Cut(hs[0], " ")
			if strings.EqualFold(scheme, "bearer") {
				// Guesses of the token are throttled as other bearer
				// tokens are: a throttled address is refused before the
				// comparison, the right token included (else the throttle
				// would only slow the guessing down). A token that does
				// not match is checked as an API token or a JWT below,
				// which counts it when it fails.
				if th := a.Engine.Auth().Throttle(); th != nil {
					if err := th.CheckAddress(a.Engine.Auth().ClientAddr(r)); err != nil {
						writeError(w, r, err)
						return
					}
				}
				if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(a.MetricsToken)) == 1 {
					connlimit.Authenticated(r.Context())
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		c, err := a.Engine.Auth().Authenticate(r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if !c.User.Superuser {
			writeError(w, r, sluice.Errorf(sluice.CodeForbidden, "only the super user, or a scraper with the bearer metrics_token, may read /metrics"))
			return
		}
		connlimit.Authenticated(r.Context())
		next.ServeHTTP(w, r)
	})
}
