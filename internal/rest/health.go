package rest

import (
	"net/http"

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
