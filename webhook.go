package sluice

import (
	"encoding/json"
	"time"
)

// WebhookState says whether a webhook delivers.
type WebhookState string

// The states of a webhook. Only an active webhook delivers, and only an
// active one holds history back from pruning.
const (
	// WebhookActive delivers (or retries its next delivery).
	WebhookActive WebhookState = "active"
	// WebhookPaused was paused by an admin of its database.
	WebhookPaused WebhookState = "paused"
	// WebhookFailing was paused by Sluice after its retry schedule ran out
	// (or a gap in history): its position is the last delivery answered
	// 2xx, and the next one is what failed.
	WebhookFailing WebhookState = "failing"
	// WebhookRevoked was paused by Sluice because its creator lost the
	// access it delivers with.
	WebhookRevoked WebhookState = "revoked"
)

// WebhookBatch says how a webhook groups events into requests.
type WebhookBatch string

// The batching modes of a webhook.
const (
	// BatchEvent sends one request per event.
	BatchEvent WebhookBatch = "event"
	// BatchCommit sends one request per commit (a commit larger than a
	// request may hold is split into several).
	BatchCommit WebhookBatch = "commit"
)

// Webhook is a database's webhook: where its commits are pushed, which of
// their events, and how far delivery got. Its signing secrets are kept
// apart (sealed) and never part of it.
type Webhook struct {
	ID       int64
	Database *Database
	URL      string
	// Description is the admin's note.
	Description string
	// Classes selects document classes, each with its subclasses; empty
	// selects every class.
	Classes []string
	// Ops are the operation tokens selected ("create", "update",
	// "delete"), in that order.
	Ops []string
	// Filter is the filter input as given (a <Class>_Filter object of the
	// one class in Classes), nil without one.
	Filter json.RawMessage
	Batch  WebhookBatch

	// CreatorID, CreatorName and CreatorTokenID (0: not created with an
	// API token) are whose read access the webhook delivers with.
	CreatorID      int64
	CreatorName    string
	CreatorTokenID int64
	// CreatorJWTKey identifies the key that verified the JWT the creator
	// made it with (Credential.JWTKey), empty for any other credential:
	// removing that key from the key set pauses the webhook as revoked.
	// Never shown.
	CreatorJWTKey string

	State WebhookState
	// StatusMessage says why a webhook is not active, or what its last
	// failure was while it retries.
	StatusMessage string
	// Position is the last position delivered (answered 2xx), or the
	// position delivery starts after.
	Position Position
	// Attempt counts the failed attempts of the next delivery; while it is
	// not zero, NextAttemptAt is when the next attempt is due.
	Attempt       int
	NextAttemptAt time.Time
	// Delivered counts requests answered 2xx and DeliveredEvents the
	// events they carried; Failed counts failed attempts.
	Delivered       int64
	DeliveredEvents int64
	Failed          int64
	LastSuccessAt   time.Time
	// OldSecretUntil, while in the future, is when the secret in use
	// before the last rotation stops signing too.
	OldSecretUntil time.Time
	// Version increases with every change of state or position made
	// through the API (pause, resume, replay), and with a change of
	// settings or a rotation while a binary before migration 25 holds the
	// deliverer lease (it notices changes by Version alone): a delivery
	// recorded under an older version is refused.
	Version   int64
	CreatedAt time.Time
	// UpdatedAt moves forward with every change, of settings (PATCH,
	// secret rotation) too: the deliverer takes those up after the
	// request in flight (see postgres.Delivery).
	UpdatedAt time.Time
}

// WebhookAttempt is one attempt to deliver a request of a webhook.
type WebhookAttempt struct {
	// N numbers the webhook's attempts from 1.
	N  int64
	At time.Time
	// MessageID is the request's webhook-id: the position of its last
	// event.
	MessageID string
	Events    int
	// Attempt is 1 for the first attempt of a request.
	Attempt int
	// Status is the HTTP status answered, 0 when there was none.
	Status int
	// Error says what failed; empty for a 2xx.
	Error    string
	Duration time.Duration
	// Response is the start of the response body (at most a few hundred
	// bytes), for the admin.
	Response string
}

// WebhookLag is how far a webhook is behind its database's log.
type WebhookLag struct {
	// Commits is the number of commits after its position.
	Commits int64
	// Age is how long ago the first commit after its position was made,
	// by Postgres' clock alone (the commit's time and the time of the
	// read): a process's clock against the commit's time would count the
	// skew between them. Zero when it is caught up.
	Age time.Duration
}
