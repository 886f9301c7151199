-- sluice:readable-by 16
-- A reference written in SQL is checked as the API checks one: an id
-- "<Class>/<key>" whose class is the field's type or one that inherits
-- from it, with documents of its own, and whose key follows
-- schema.CheckKey (1 to 255 bytes, no whitespace or control character,
-- by code point as check_document checks a row's own key). Nothing was
-- checked: a single reference's column took any text ('garbage',
-- 'Pet/ has space', a key of 5,000 bytes, 'Person/a' for a Pet), a list
-- or a subdocument's reference any string; GET returned them, and
-- putting back what was read was refused with 400.
--
-- The check is a new spec item of each capture trigger,
-- "ref:<field>:<Class>|<Class>…", in a class's spec or a subdocument
-- type's (internal/postgres/capture.go), for a reference and a list of
-- them alike; check_fields is that of migration 17 with it, and is_ref
-- checks one value. Rows written before are left as they are.
--
-- Expand: check_fields keeps its signature, and triggers made by older
-- binaries have no ref: item, which it ignores as before; this binary
-- makes the triggers again when it starts (their recorded arguments
-- differ).

-- is_ref: v is a JSON string "<Class>/<key>" (split at the first "/", as
-- schema.ParseID splits an id), Class one of classes. Like is_value, it
-- runs inside check_document, under its settings
-- (standard_conforming_strings = on, which the \u escapes need).
CREATE FUNCTION sluice.is_ref(v jsonb, classes text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'string' AND strpos(v #>> '{}', '/') > 0
        THEN split_part(v #>> '{}', '/', 1) = ANY (classes)
            AND substr(v #>> '{}', strpos(v #>> '{}', '/') + 1) <> ''
            AND octet_length(substr(v #>> '{}', strpos(v #>> '{}', '/') + 1)) <= 255
            AND substr(v #>> '{}', strpos(v #>> '{}', '/') + 1) !~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]'
        ELSE false END
$$;

CREATE OR REPLACE FUNCTION sluice.check_fields(id text, class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    types jsonb;
    -- The work list: what each object is (a class, or Class.field...),
    -- the object, and its subdocument type (NULL: the row itself).
    whats text[] := ARRAY[class];
    objs jsonb[] := ARRAY[doc];
    typs text[] := ARRAY[NULL::text];
    n int;
    what text;
    obj jsonb;
    typ text;
    items text[];
    item text;
    kind text;
    field text;
    v jsonb;
    e jsonb;
    bad jsonb;
    allowed text[];
BEGIN
    SELECT substr(x, 7)::jsonb INTO types FROM unnest(spec) x WHERE x LIKE 'types:%' LIMIT 1;
    LOOP
        n := coalesce(array_length(objs, 1), 0);
        EXIT WHEN n = 0;
        what := whats[n];
        obj := objs[n];
        typ := typs[n];
        whats := whats[1:n - 1];
        objs := objs[1:n - 1];
        typs := typs[1:n - 1];
        IF typ IS NULL THEN
            items := spec;
        ELSE
            items := ARRAY(SELECT jsonb_array_elements_text(types -> typ));
            SELECT k INTO field FROM jsonb_object_keys(obj) k
                WHERE k <> '@type' AND NOT k = ANY (ARRAY(SELECT split_part(x, ':', 2) FROM unnest(items) x)) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'document %: %.% is not a field of the subdocument', id, what, field USING ERRCODE = 'check_violation';
            END IF;
            IF obj ? '@type' AND obj -> '@type' IS DISTINCT FROM to_jsonb(typ) THEN
                RAISE EXCEPTION 'document %: % is a subdocument of type %, not %', id, what, typ, obj -> '@type' USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        FOREACH item IN ARRAY items LOOP
            kind := split_part(item, ':', 1);
            field := split_part(item, ':', 2);
            v := obj -> field;
            IF v = 'null'::jsonb THEN
                v := NULL;
            END IF;
            IF kind = 'req' AND v IS NULL THEN
                RAISE EXCEPTION 'document %: field %.% is required', id, what, field USING ERRCODE = 'not_null_violation';
            ELSIF v IS NULL THEN
                CONTINUE;
            ELSIF kind = 'list' AND jsonb_typeof(v) <> 'array' THEN
                RAISE EXCEPTION 'document %: field %.% is a list: a JSON array, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'obj' AND jsonb_typeof(v) <> 'object' THEN
                RAISE EXCEPTION 'document %: field %.% is a subdocument: a JSON object, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'enum' THEN
                allowed := string_to_array(split_part(item, ':', 3), '|');
                IF jsonb_typeof(v) = 'array' THEN
                    IF EXISTS (SELECT 1 FROM jsonb_array_elements(v) x WHERE jsonb_typeof(x) <> 'string' OR NOT (x #>> '{}') = ANY (allowed)) THEN
                        RAISE EXCEPTION 'document %: field %.% holds a value that is not one of %', id, what, field, allowed USING ERRCODE = 'check_violation';
                    END IF;
                ELSIF jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') = ANY (allowed) THEN
                    RAISE EXCEPTION 'document %: field %.% is %, not one of %', id, what, field, v, allowed USING ERRCODE = 'check_violation';
                END IF;
            ELSIF kind = 'float' AND NOT sluice.is_value(v, 'float') THEN
                -- to_jsonb gives NaN and the infinities as strings.
                RAISE EXCEPTION 'document %: field %.% is a Float: a finite number, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'bigint' AND NOT sluice.is_value(v, 'bigint') THEN
                RAISE EXCEPTION 'document %: field %.% is a BigInt: a whole number, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'time' AND NOT sluice.is_value(v, 'column time') THEN
                RAISE EXCEPTION 'document %: field %.% is a DateTime: a time in years 1 to 9999 (UTC), not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'elems' AND jsonb_typeof(v) = 'array' THEN
                SELECT x INTO bad FROM jsonb_array_elements(v) x WHERE NOT sluice.is_value(x, split_part(item, ':', 3)) LIMIT 1;
                IF FOUND THEN
                    RAISE EXCEPTION 'document %: field %.% holds %, which is not a % (list elements are never null)', id, what, field, bad, split_part(item, ':', 3)
                        USING ERRCODE = 'check_violation';
                END IF;
            ELSIF kind = 'val' AND NOT sluice.is_value(v, split_part(item, ':', 3)) THEN
                RAISE EXCEPTION 'document %: field %.% holds %, which is not a %', id, what, field, v, split_part(item, ':', 3)
                    USING ERRCODE = 'check_violation';
            ELSIF kind = 'ref' THEN
                -- A reference, or a list of them (whose elements are
                -- strings by its elems: item).
                allowed := string_to_array(split_part(item, ':', 3), '|');
                SELECT x INTO bad FROM jsonb_array_elements(CASE jsonb_typeof(v) WHEN 'array' THEN v ELSE jsonb_build_array(v) END) x
                    WHERE NOT sluice.is_ref(x, allowed) LIMIT 1;
                IF FOUND THEN
                    RAISE EXCEPTION 'document %: field %.% holds %, which is not a reference: "<Class>/<key>", the class one of %, the key 1 to 255 bytes without whitespace or control characters',
                        id, what, field, left(bad::text, 300), allowed USING ERRCODE = 'check_violation';
                END IF;
            ELSIF kind = 'sub' THEN
                -- A subdocument, or a list of them: onto the work list
                -- (a value that is not an object fails its obj: or
                -- elems: item).
                FOR e IN SELECT x FROM jsonb_array_elements(CASE jsonb_typeof(v) WHEN 'array' THEN v ELSE jsonb_build_array(v) END) x LOOP
                    IF jsonb_typeof(e) = 'object' THEN
                        whats := whats || (what || '.' || field);
                        objs := objs || e;
                        typs := typs || split_part(item, ':', 3);
                    END IF;
                END LOOP;
            END IF;
        END LOOP;
    END LOOP;
END
$$;

-- Like every function of Sluice's but the column defaults', no other role
-- may execute it (migration 11).
REVOKE EXECUTE ON FUNCTION sluice.is_ref(jsonb, text[]) FROM PUBLIC;
