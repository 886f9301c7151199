// Package webhook pushes every commit of a database to HTTP endpoints:
// webhooks, made and managed by the database's admins (Service), and
// delivered by one replica at a time (Deliverer).
//
// Delivery is in commit order and at least once. A Deliverer delivers
// every webhook while its replica holds a lease in Postgres (renewed every
// third of its term; another replica takes it over once it expires). It
// runs one loop per active webhook, which reads the database's log from
// the webhook's recorded position (postgres.ReadLogWithin), selects and shapes
// the events as the REST change stream does for the webhook's creator
// (internal/cloudevent: CloudEvents envelopes, redacted for the creator's
// role), and POSTs them one request at a time with the Standard Webhooks
// headers (webhook-id: the position of the request's last event, the
// idempotency key). The next request starts only after a 2xx for the
// previous one, and the position is recorded after each 2xx, fenced by the
// lease's generation and the webhook's version: a crash between the 2xx
// and the record delivers that request again, and nothing else repeats.
// Failures are retried on a configurable schedule with jitter; when it
// runs out, the webhook is paused as failing, its position kept.
//
// Each webhook keeps its creator's read access for its whole life: the
// loop checks it when it starts and whenever the access log's version
// moves (the version is read with the commits, as streams do), and pauses
// the webhook as revoked when the creator was deleted, lost the read role,
// or the API token it was made with was revoked.
//
// Requests go only where Policy allows, checked on the address dialled
// (dial.go); responses are read up to a few KiB; redirects are not
// followed. Signing secrets are sealed in Postgres (secret.go).
package webhook
