-- Rolling upgrades: which binaries may run on the database as it is now.
--
-- readable_by is the oldest schema version a Sluice binary may know and
-- still run on the database after this migration: a binary that knows
-- fewer migrations than the database has runs all the same when it knows
-- at least readable_by (the newer migrations only added what it ignores:
-- "expand"), and refuses otherwise (they changed what it reads or writes:
-- "contract"). A migration file declares it in a header line
-- "-- sluice:readable-by N"; without one, only binaries that know the
-- migration may run. The value recorded is the highest of every applied
-- migration's, so a contract step is never undone by a later expand one.
--
-- Binaries from before this migration do not look at it: upgrading to the
-- release that brings it stops every replica, as before; from then on,
-- releases whose migrations are all expand ones roll (docs/operations.md).
ALTER TABLE sluice.schema_migrations ADD COLUMN readable_by integer;
UPDATE sluice.schema_migrations SET readable_by = version;
ALTER TABLE sluice.schema_migrations ALTER COLUMN readable_by SET NOT NULL;
