-- sluice:readable-by 16
-- A recorded idempotency key (sluice.idempotency_keys, migration 13) no
-- longer checks its user by a foreign key. A key is recorded in the last
-- round trip of its write's commit, behind the commit rows: when its user
-- had been deleted while the write waited, the check failed there, and in
-- a group-commit batch it failed every write of the batch. Locking the
-- user's row when the key is claimed instead made a user's deletion wait
-- for the user's writes, a trickled upload's for hours. A key recorded
-- for a user deleted meanwhile is harmless (user ids are not reused) and
-- pruned with the others after idempotency_retention. The foreign key's
-- other half, a user's keys deleted with it, is kept by a trigger, so
-- binaries of migrations 16 and 17 run beside it unchanged.
ALTER TABLE sluice.idempotency_keys DROP CONSTRAINT idempotency_keys_user_id_fkey;

CREATE FUNCTION sluice.delete_user_keys() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM sluice.idempotency_keys WHERE user_id = OLD.id;
    RETURN NULL;
END
$$;
-- Like every function of Sluice's but the column defaults', no other role
-- may execute it (migration 11).
REVOKE EXECUTE ON FUNCTION sluice.delete_user_keys() FROM PUBLIC;

CREATE TRIGGER delete_keys AFTER DELETE ON sluice.users
    FOR EACH ROW EXECUTE FUNCTION sluice.delete_user_keys();
