package sluice

import "time"

// User is an account. Superusers have every role on every database.
type User struct {
	ID        int64
	Name      string
	Org       string
	Superuser bool
}

// Token is an API token's public description; the secret is shown once, at
// creation, and only its hash is stored.
type Token struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}
