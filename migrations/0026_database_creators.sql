-- sluice:readable-by 16
-- A database records the user who made it, so that a user's databases
-- can be counted against max_databases_per_user (each is a Postgres
-- schema with a table per class: a user who could make any number of
-- them could fill the cluster's catalog).
--
-- Expand: older binaries do not set the column, and the databases made
-- before this migration, or by such a binary during a rolling upgrade,
-- have none; they are not counted against anyone's cap. No foreign key:
-- a deleted user's databases stay, and user ids are never reused.
ALTER TABLE sluice.databases ADD COLUMN creator_id bigint;
CREATE INDEX databases_creator_idx ON sluice.databases (creator_id) WHERE creator_id IS NOT NULL;
