package rest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/webhook"
)

// The webhooks of a database (docs/webhooks.md): its admins manage them
// under /api/webhooks/{org}/{db}.

// maxAttempts is how many attempts GET …/attempts answers at most (the
// log keeps 100), and statusAttempts how many a webhook's status shows.
const (
	maxAttempts    = 100
	statusAttempts = 10
)

// defaultGrace is how long a rotated secret keeps signing by default.
const defaultGrace = 24 * time.Hour

func (a *api) webhooks(w http.ResponseWriter, r *http.Request) (*webhook.Service, bool) {
	if a.Webhooks == nil {
		writeError(w, r, sluice.Errorf(sluice.CodeUnavailable, "webhooks are not running on this server"))
		return nil, false
	}
	return a.Webhooks, true
}

// webhookInput reads the settings of a webhook of org/db from r's body,
// once the user is known to be an admin of the database (the service
// checks it again), and within webhookBodyMax: read before either check,
// a body of max_body_bytes decoded to tens of millions of strings for
// any signed-in user. It answers the request and reports false when it
// cannot.
func (a *api) webhookInput(w http.ResponseWriter, r *http.Request, org, db string) (webhook.Input, bool) {
	var in webhook.Input
	if _, _, err := a.Engine.Database(r.Context(), userFrom(r), org, db, sluice.RoleAdmin); err != nil {
		writeError(w, r, err)
		return in, false
	}
	if err := decodeJSONWithin(w, r, &in, webhookBodyMax, "a webhook's settings"); err != nil {
		writeError(w, r, err)
		return in, false
	}
	return in, true
}

// webhookID returns the {id} path parameter.
func webhookID(r *http.Request) (int64, error) {
	s := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, sluice.Errorf(sluice.CodeNotFound, "webhook %s does not exist: webhook ids are numbers", sluice.Echo(s))
	}
	return id, nil
}

func timeJSON(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// webhookJSON is a webhook as the API shows it; its secrets never are.
func webhookJSON(h *sluice.Webhook) map[string]any {
	status := string(h.State)
	if h.State == sluice.WebhookActive && h.Attempt > 0 {
		status = "retrying"
	}
	var f any
	if h.Filter != nil {
		f = json.RawMessage(h.Filter)
	}
	// Every class is null, as a request gives it: [] would be refused
	// sent back (an empty list names no class).
	var classes any
	if len(h.Classes) > 0 {
		classes = h.Classes
	}
	return map[string]any{
		"id": h.ID, "database": h.Database.Path(), "url": h.URL, "description": h.Description,
		"classes": classes, "ops": h.Ops, "filter": f, "batch": h.Batch,
		"state": h.State, "status": status, "status_message": h.StatusMessage, "position": h.Position.String(),
		"creator": h.CreatorName, "attempt": h.Attempt, "next_attempt_at": timeJSON(h.NextAttemptAt),
		"delivered": h.Delivered, "delivered_events": h.DeliveredEvents, "failed": h.Failed,
		"last_success_at": timeJSON(h.LastSuccessAt), "old_secret_until": timeJSON(h.OldSecretUntil),
		"created_at": timeJSON(h.CreatedAt), "updated_at": timeJSON(h.UpdatedAt),
	}
}

func attemptsJSON(as []sluice.WebhookAttempt) []map[string]any {
	out := make([]map[string]any, 0, len(as))
	for _, at := range as {
		out = append(out, map[string]any{
			"n": at.N, "at": timeJSON(at.At), "message_id": at.MessageID, "events": at.Events, "attempt": at.Attempt,
			"status": at.Status, "error": at.Error, "duration_ms": float64(at.Duration.Microseconds()) / 1000, "response": at.Response,
		})
	}
	return out
}

func (a *api) createWebhook(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	org, db := dbPath(r)
	in, ok := a.webhookInput(w, r, org, db)
	if !ok {
		return
	}
	h, secret, err := svc.Create(r.Context(), userFrom(r), org, db, in)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := webhookJSON(h)
	out["secret"] = secret
	w.Header().Set("Location", "/api/webhooks/"+h.Database.Path()+"/"+strconv.FormatInt(h.ID, 10))
	writeJSON(w, http.StatusCreated, success(out))
}

func (a *api) listWebhooks(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	org, db := dbPath(r)
	hs, err := svc.List(r.Context(), userFrom(r), org, db)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(hs))
	for _, h := range hs {
		out = append(out, webhookJSON(h))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) getWebhook(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	id, err := webhookID(r)
	if err == nil {
		_, err = query(r)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, db := dbPath(r)
	d, err := svc.Get(r.Context(), userFrom(r), org, db, id, statusAttempts)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := webhookJSON(d.Webhook)
	out["lag"] = map[string]any{"commits": d.Lag.Commits, "seconds": d.Lag.Age.Seconds()}
	out["attempts"] = attemptsJSON(d.Attempts)
	writeJSON(w, http.StatusOK, success(out))
}

func (a *api) webhookAttempts(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	id, err := webhookID(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	q, err := query(r, "limit")
	if err != nil {
		writeError(w, r, err)
		return
	}
	limit, err := boundedParam(q, "limit", maxAttempts, maxAttempts)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, db := dbPath(r)
	as, err := svc.Attempts(r.Context(), userFrom(r), org, db, id, int(limit))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, attemptsJSON(as))
}

func (a *api) updateWebhook(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	id, err := webhookID(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, db := dbPath(r)
	in, ok := a.webhookInput(w, r, org, db)
	if !ok {
		return
	}
	h, err := svc.Update(r.Context(), userFrom(r), org, db, id, in)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(webhookJSON(h)))
}

func (a *api) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	id, err := webhookID(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := a.noBody(w, r, "deleting a webhook"); err != nil {
		writeError(w, r, err)
		return
	}
	org, db := dbPath(r)
	if err := svc.Delete(r.Context(), userFrom(r), org, db, id); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"id": id}))
}

func (a *api) pauseWebhook(w http.ResponseWriter, r *http.Request) {
	if err := a.noBody(w, r, "pausing a webhook"); err != nil {
		writeError(w, r, err)
		return
	}
	a.webhookAction(w, r, func(svc *webhook.Service, org, db string, id int64) (*sluice.Webhook, error) {
		return svc.Pause(r.Context(), userFrom(r), org, db, id)
	})
}

func (a *api) resumeWebhook(w http.ResponseWriter, r *http.Request) {
	var body struct {
		After *string `json:"after"`
	}
	if err := a.optionalBody(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	a.webhookAction(w, r, func(svc *webhook.Service, org, db string, id int64) (*sluice.Webhook, error) {
		return svc.Resume(r.Context(), userFrom(r), org, db, id, body.After)
	})
}

func (a *api) replayWebhook(w http.ResponseWriter, r *http.Request) {
	var body struct {
		After *string `json:"after"`
	}
	if err := a.optionalBody(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if body.After == nil {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "after is required: the position to deliver what follows (a webhook-id, an event id, or a read's position)"))
		return
	}
	a.webhookAction(w, r, func(svc *webhook.Service, org, db string, id int64) (*sluice.Webhook, error) {
		return svc.Replay(r.Context(), userFrom(r), org, db, id, *body.After)
	})
}

// webhookAction answers the webhook that do returns.
func (a *api) webhookAction(w http.ResponseWriter, r *http.Request, do func(svc *webhook.Service, org, db string, id int64) (*sluice.Webhook, error)) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	id, err := webhookID(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, db := dbPath(r)
	h, err := do(svc, org, db, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(webhookJSON(h)))
}

func (a *api) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.webhooks(w, r)
	if !ok {
		return
	}
	id, err := webhookID(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var body struct {
		Grace *string `json:"grace"`
	}
	if err := a.optionalBody(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	grace := defaultGrace
	if body.Grace != nil {
		if grace, err = time.ParseDuration(*body.Grace); err != nil {
			if err := sluice.DurationTooLong(*body.Grace); err != nil {
				writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "grace %s: %v", sluice.Echo(*body.Grace), err))
				return
			}
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "grace %s: want a duration such as 24h, or 0 to stop the old secret at once", sluice.Echo(*body.Grace)))
			return
		}
	}
	org, db := dbPath(r)
	// oldUntil is the end of the grace as stored, by Postgres' clock (this
	// process's clock plus the grace would differ from what the status
	// shows by the skew between them); zero with no grace, shown null
	// as listings show it, since no old secret is kept.
	secret, oldUntil, err := svc.Rotate(r.Context(), userFrom(r), org, db, id, grace)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"id": id, "secret": secret, "old_secret_until": timeJSON(oldUntil)}))
}
