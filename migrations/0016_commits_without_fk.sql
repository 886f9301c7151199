-- sluice:readable-by 14
-- A commit row no longer checks its database by a foreign key. The check
-- ran for every commit row inserted, on the path every commit of a
-- database goes through one at a time (the counter row's lock): about
-- 3 µs of Postgres per commit, a third of inserting the row with its
-- three indexes (docs/benchmarks.md). It guarded nothing a commit does
-- not already check: every commit row is inserted by a statement that
-- first updates its database's counter row, which goes with the database
-- (ON DELETE CASCADE), and that fails without it. The foreign key's other
-- half, a database's commits deleted with it, is kept by a trigger, so
-- binaries of migrations 14 and 15 run beside it unchanged (as after 15).
ALTER TABLE sluice.commits DROP CONSTRAINT commits_db_id_fkey;

CREATE FUNCTION sluice.delete_database_commits() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM sluice.commits WHERE db_id = OLD.id;
    RETURN NULL;
END
$$;
-- Like every function of Sluice's but the column defaults', no other role
-- may execute it (migration 11).
REVOKE EXECUTE ON FUNCTION sluice.delete_database_commits() FROM PUBLIC;

CREATE TRIGGER delete_commits AFTER DELETE ON sluice.databases
    FOR EACH ROW EXECUTE FUNCTION sluice.delete_database_commits();
