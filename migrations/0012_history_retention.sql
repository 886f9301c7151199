-- A database may keep its commit log longer than the server's
-- log_retention, so that its past stays readable (reads as of a position,
-- a document's history, diffs): log_retention_seconds is how long its
-- commits are kept, 0 for ever; NULL keeps them for log_retention.
-- Pruning keeps a database's commits for the longer of the two
-- (postgres.Prune).
--
-- No readable-by header: a binary that does not know this column would
-- prune such a database by log_retention alone, so it may not run beside
-- one that does.
ALTER TABLE sluice.databases ADD COLUMN log_retention_seconds bigint
    CHECK (log_retention_seconds >= 0);
