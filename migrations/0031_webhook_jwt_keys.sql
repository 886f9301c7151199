-- sluice:readable-by 16
-- A webhook made, or last re-pointed, with a JWT records the identity of
-- the key that verified the JWT (sluice.Credential.JWTKey: the algorithm
-- and a digest of the public key, or of the HS256 secret's HMAC; never a
-- secret), as a stream ticket does (migration 19): removing the key from
-- the key set, how an operator answers its compromise, pauses the webhook
-- as revoked, as revoking an API token pauses a webhook made with it.
-- NULL for any other credential. Binaries of migrations 16 to 30 do not
-- know the column and run beside it unchanged (they name the columns they
-- insert and read); a webhook one of them re-points keeps the key it
-- had, and is paused with it (the side of caution).
ALTER TABLE sluice.webhooks ADD COLUMN creator_jwt_key text;

-- The keys a replica's reload or fetch took out of the key set, kept in
-- Postgres so that every replica judges a webhook by them (the replica
-- that delivers may still hold the key, or have restarted since), until a
-- reload or fetch brings the key back. Keys are few: an operator removes
-- them by hand, or an identity provider retires one at a rotation.
CREATE TABLE sluice.removed_jwt_keys (
    key         text PRIMARY KEY,
    removed_at  timestamptz NOT NULL DEFAULT now()
);
