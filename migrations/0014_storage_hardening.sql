-- sluice:readable-by 13
-- What another Postgres role can do to Sluice's tables, narrowed again.
--
--   * A row written in SQL must hold only values the API can read back:
--     check_document now also refuses a Float that is NaN or infinite, a
--     BigInt that is NaN, infinite or not a whole number, a DateTime that
--     is infinite or outside years 1 to 9999 (UTC), and list elements that
--     are null or not of the list's type. Each is refused with an error
--     naming the field, and the row is not written. (Postgres stores all
--     of these; JSON, and so the API and the log's images, cannot.) The
--     new checks are arguments of each table's capture trigger, which
--     Sluice makes again at start (internal/postgres/capture.go).
--   * capture_truncate read each row as row_to_json(t) over a table
--     aliased t: a column named t (a field may be named so) is taken
--     before the alias, and TRUNCATE of such a table failed. t.* always
--     names the row.
--   * A write with an Idempotency-Key held a transaction-scoped advisory
--     lock named by its user and key; any role that may log in can take
--     any advisory lock (and pg_locks shows every lock held), so it could
--     make a key answer "still running" for as long as it liked. The lock
--     is now a row lock on sluice.idempotency_claims, whose rows only
--     Sluice's role may lock (internal/postgres/idempotency.go).
--   * Other roles lose USAGE on schema sluice (given in migration 7).
--     Nothing needs it: the class tables' column defaults and triggers
--     call Sluice's functions by reference, not by name. With it, any role
--     could hold a lock on any of Sluice's tables for as long as its
--     transaction lasted (PREPARE takes a statement's locks before the
--     privileges are checked at EXECUTE), which stopped migrations.
--
-- Readable by 13: binaries that do not know this migration run beside
-- it. They make the capture triggers without the new checks when they
-- start (this binary makes them again when it starts), and take the
-- advisory lock of a key rather than its claim: a key used on an old and
-- a new replica at once then runs twice, and the second to commit fails
-- on the key's primary key, so neither writes twice.

-- check_document: see migration 7. Besides "req:", "list:", "obj:" and
-- "enum:", spec holds "float:<field>", "bigint:<field>" and
-- "time:<field>" for single Float, BigInt and DateTime fields, and
-- "elems:<field>:<kind>" for lists, kind being int, float, bool, string,
-- bigint, time, obj or any (a list of JSON values).
CREATE OR REPLACE FUNCTION sluice.check_document(class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id text := doc ->> '_id';
    key text;
    item text;
    kind text;
    field text;
    v jsonb;
    bad jsonb;
    allowed text[];
BEGIN
    IF id IS NULL OR left(id, length(class) + 1) <> class || '/' THEN
        RAISE EXCEPTION 'document id % of class %: an id is "%/<key>"', coalesce(quote_literal(id), 'NULL'), class, class
            USING ERRCODE = 'check_violation';
    END IF;
    key := substr(id, length(class) + 2);
    IF key = '' OR octet_length(key) > 255 OR key ~ '[[:space:][:cntrl:]]' THEN
        RAISE EXCEPTION 'document id %: the key must be 1 to 255 bytes without whitespace or control characters', quote_literal(id)
            USING ERRCODE = 'check_violation';
    END IF;
    -- spec[first] is the database id (a trigger's TG_ARGV starts at 0).
    FOR i IN array_lower(spec, 1) + 1 .. coalesce(array_upper(spec, 1), 0) LOOP
        item := spec[i];
        kind := split_part(item, ':', 1);
        field := split_part(item, ':', 2);
        v := doc -> field;
        IF v = 'null'::jsonb THEN
            v := NULL;
        END IF;
        IF kind = 'req' AND v IS NULL THEN
            RAISE EXCEPTION 'document %: field %.% is required', id, class, field USING ERRCODE = 'not_null_violation';
        ELSIF v IS NULL THEN
            CONTINUE;
        ELSIF kind = 'list' AND jsonb_typeof(v) <> 'array' THEN
            RAISE EXCEPTION 'document %: field %.% is a list: a JSON array, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'obj' AND jsonb_typeof(v) <> 'object' THEN
            RAISE EXCEPTION 'document %: field %.% is a subdocument: a JSON object, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'enum' THEN
            allowed := string_to_array(split_part(item, ':', 3), '|');
            IF jsonb_typeof(v) = 'array' THEN
                IF EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE jsonb_typeof(e) <> 'string' OR NOT (e #>> '{}') = ANY (allowed)) THEN
                    RAISE EXCEPTION 'document %: field %.% holds a value that is not one of %', id, class, field, allowed USING ERRCODE = 'check_violation';
                END IF;
            ELSIF jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') = ANY (allowed) THEN
                RAISE EXCEPTION 'document %: field %.% is %, not one of %', id, class, field, v, allowed USING ERRCODE = 'check_violation';
            END IF;
        ELSIF kind = 'float' AND NOT sluice.is_value(v, 'float') THEN
            -- to_jsonb gives NaN and the infinities as strings.
            RAISE EXCEPTION 'document %: field %.% is a Float: a finite number, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'bigint' AND NOT sluice.is_value(v, 'bigint') THEN
            RAISE EXCEPTION 'document %: field %.% is a BigInt: a whole number, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'time' AND NOT sluice.is_value(v, 'time') THEN
            RAISE EXCEPTION 'document %: field %.% is a DateTime: a time in years 1 to 9999 (UTC), not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'elems' AND jsonb_typeof(v) = 'array' THEN
            SELECT x INTO bad FROM jsonb_array_elements(v) x WHERE NOT sluice.is_value(x, split_part(item, ':', 3)) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'document %: field %.% holds %, which is not a % (list elements are never null)', id, class, field, bad, split_part(item, ':', 3)
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
    END LOOP;
END
$$;

-- is_value reports whether v, a column's value as to_jsonb gives it or an
-- element of a list column, is a value of kind (see check_document) the
-- API could have written. Lists hold BigInts as strings of digits and
-- DateTimes as RFC 3339 strings, as the API writes them; a DateTime string
-- that Postgres cannot read as a time fails the statement with Postgres's
-- own error.
CREATE FUNCTION sluice.is_value(v jsonb, kind text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN false
        WHEN kind = 'float' THEN jsonb_typeof(v) = 'number'
        WHEN kind = 'int' THEN CASE WHEN jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]{1,10}$'
            THEN v::text::bigint BETWEEN -2147483648 AND 2147483647 ELSE false END
        WHEN kind = 'bigint' THEN v::text ~ '^-?[0-9]+$'
            OR jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^-?[0-9]+$'
        WHEN kind = 'bool' THEN jsonb_typeof(v) = 'boolean'
        WHEN kind = 'string' THEN jsonb_typeof(v) = 'string'
        WHEN kind = 'obj' THEN jsonb_typeof(v) = 'object'
        -- Four digits first: not infinity, nor year 10000 and later; a
        -- year before 1 reads as before 0001-01-01 (its text ends "BC").
        WHEN kind = 'time' THEN CASE WHEN jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^[0-9]{4}-'
            THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
            ELSE false END
        ELSE true
    END
$$;

-- capture_truncate: see migration 11; the rows are named t.*, which a
-- column named t cannot take.
CREATE OR REPLACE FUNCTION sluice.capture_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u bigint;
BEGIN
    IF sluice.is_writer() THEN
        RETURN NULL;
    END IF;
    u := sluice.tx_uid(TG_ARGV[0]::bigint);
    EXECUTE format('INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        SELECT $1, $2 + (row_number() OVER (ORDER BY t._id COLLATE "C"))::integer - 1, ARRAY[t._id], ARRAY[3::smallint],
            ''['' || row_to_json(t.*)::text || '']'', NULL
        FROM %I.%I t', TG_TABLE_SCHEMA, TG_TABLE_NAME) USING u, sluice.next_change(u);
    RETURN NULL;
END
$$;

-- A write with an Idempotency-Key first makes sure its key has a row here
-- (a statement of its own, committed at once), then, in its transaction,
-- locks that row without waiting (FOR UPDATE SKIP LOCKED): a request that
-- finds it locked answers that the first is still running. The commit
-- that records the key deletes the row, and a write that fails deletes it
-- after; rows left by a process that died are pruned. Unlogged: a claim
-- matters only while its write runs, and a transaction that writes only
-- unlogged tables commits without waiting for the WAL to be flushed, so
-- the claim costs a keyed write a round trip but no second flush (a
-- claim lost in a crash is made again).
CREATE UNLOGGED TABLE sluice.idempotency_claims (
    user_id     bigint NOT NULL REFERENCES sluice.users (id) ON DELETE CASCADE,
    key         text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_claims_created ON sluice.idempotency_claims (created_at);

REVOKE EXECUTE ON FUNCTION sluice.is_value(jsonb, text) FROM PUBLIC;
REVOKE USAGE ON SCHEMA sluice FROM PUBLIC;
