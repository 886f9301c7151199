-- sluice:readable-by 16
-- A row written in SQL holds at most 1,000,000 values in its fields, as
-- a document written through the API (schema.MaxValues): every field's
-- value, and every element, member and value inside a list, a
-- subdocument or a JSON value, at any depth (null columns, _id and
-- _commit_uid not counted). A row of 16 MiB, the most recorded, could hold
-- 5.5 million small numbers ([0, 0, …]), and reading it built a value for
-- each: about 560 MB for one GET.
--
-- Counting reads the row's text, so it runs only for a row of more than
-- 1,000,000 bytes in memory (every value takes more than one). Rows
-- written before are left as they are (a field past the bound reads as
-- missing, as any value its type cannot hold).
--
-- check_document is that of migration 20 with the count. Expand: its
-- signature is the same, and binaries that know migration 16 run beside
-- it unchanged.

CREATE OR REPLACE FUNCTION sluice.check_document(class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 3 SET TimeZone = 'UTC' SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres' SET standard_conforming_strings = on AS $$
DECLARE
    id text := doc ->> '_id';
    key text;
    n bigint;
    txt text;
BEGIN
    IF id IS NULL OR left(id, length(class) + 1) <> class || '/' THEN
        RAISE EXCEPTION 'document id % of class %: an id is "%/<key>"', coalesce(quote_literal(id), 'NULL'), class, class
            USING ERRCODE = 'check_violation';
    END IF;
    key := substr(id, length(class) + 2);
    -- What schema.CheckKey refuses: Go's unicode.IsControl (U+0000 to
    -- U+001F, U+007F to U+009F) and unicode.IsSpace (tab to carriage
    -- return, space, U+0085, U+00A0, U+1680, U+2000 to U+200A, U+2028,
    -- U+2029, U+202F, U+205F, U+3000), by code point whatever the locale.
    -- (Text holds no U+0000; a UTF8 database holds no invalid UTF-8.)
    IF key = '' OR octet_length(key) > 255
        OR key ~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]' THEN
        RAISE EXCEPTION 'document id %: the key must be 1 to 255 bytes without whitespace or control characters', quote_literal(id)
            USING ERRCODE = 'check_violation';
    END IF;
    -- No deeper than the API lets a document nest (schema.MaxDepth, 512,
    -- the row's own object counted): an item at level 512 that is an
    -- object or an array is the 513th level.
    IF jsonb_path_exists(doc, 'strict $.**{512} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION 'document %: it nests objects and arrays deeper than 512 levels, the most a document may', id
            USING ERRCODE = 'check_violation';
    END IF;
    -- No more values than the API lets a document hold (schema.MaxValues),
    -- counted in the row's text as the Go side counts JSON text: one
    -- value for the row's own object, one more for each comma and each
    -- non-empty array or object outside strings; less the row's own
    -- object, _id, _commit_uid and null columns. Each value takes a byte
    -- at least, so a smaller row is within the bound; and each comma or
    -- opening bracket, strings counted, is one value at most, so a row
    -- with fewer is too. (jsonb_path_query's $.** takes quadratic time
    -- over many values; these are linear.)
    IF pg_column_size(doc) > 1000000 THEN
        txt := doc::text;
        IF octet_length(txt) - octet_length(replace(replace(replace(txt, ',', ''), '[', ''), '{', '')) > 1000000 THEN
            -- Each string becomes one letter (so that [""] stays
            -- non-empty), and the spaces jsonb writes go.
            txt := replace(regexp_replace(txt, '"([^"\\]|\\.)*"', 's', 'g'), ' ', '');
            n := octet_length(txt) - octet_length(replace(txt, ',', ''))
                + octet_length(txt) - octet_length(replace(replace(txt, '[', ''), '{', ''))
                - (octet_length(txt) - octet_length(replace(replace(txt, '[]', ''), '{}', ''))) / 2
                - (SELECT count(*) FROM jsonb_each(doc) f WHERE f.key IN ('_id', '_commit_uid') OR jsonb_typeof(f.value) = 'null');
            IF n > 1000000 THEN
                RAISE EXCEPTION 'document %: it holds % values in its fields (every string, number, boolean, null, list and object counted, at any depth), more than 1000000, the most a document may', id, n
                    USING ERRCODE = 'program_limit_exceeded';
            END IF;
        END IF;
    END IF;
    -- spec[first] is the database id (a trigger's TG_ARGV starts at 0).
    PERFORM sluice.check_fields(id, class, doc, spec[array_lower(spec, 1) + 1:]);
END
$$;
