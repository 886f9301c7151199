-- sluice:readable-by 16
-- The capture triggers number each row a SQL statement writes after the
-- changes its commit holds so far (next_change, migration 11). It took
-- max(idx) over the commit's change rows: Postgres reads that from the
-- end of the primary key's range only when it expects a commit to hold
-- several changes; when its statistics say about one (a log of writes of
-- one document, the usual one), it reads every change row of the commit,
-- for every row written, and a statement of n rows reads n²/2 entries (a
-- 200,000-row INSERT ran for more than 18 minutes). Asked for the last
-- entry of the range, it reads one whatever the statistics.
CREATE OR REPLACE FUNCTION sluice.next_change(u bigint) RETURNS integer
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT idx FROM sluice.changes WHERE commit_uid = u ORDER BY idx DESC LIMIT 1) + 1, 0)
$$;
