-- sluice:readable-by 16
-- A BigInt in a list or a subdocument written in SQL has at most 131,072
-- digits, as the API's (schema.maxBigIntDigits: as many as a Postgres
-- numeric holds before the decimal point, which bounds a BigInt column
-- already). is_value checked its form only, so a list or a subdocument
-- took a BigInt string of any length, which GET returned and PUT of what
-- was read then refused.
-- The sign is not counted, as the API does not count it. Rows written
-- before are left as they are.
--
-- is_value is that of migration 20 with the length checked. Expand: its
-- signature is the same, and binaries that know migration 16 run beside
-- it unchanged.

-- is_value: see migrations 17 and 20.
CREATE OR REPLACE FUNCTION sluice.is_value(v jsonb, kind text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN false
        -- ParseFloat rounds a number to an infinity, and refuses it, from
        -- halfway between the largest float64 and 2^1024 on (a tie
        -- rounds to the even one, the infinity); one under is the
        -- largest float64. (A constant: folded when the query is planned.)
        WHEN kind = 'float' THEN CASE WHEN jsonb_typeof(v) = 'number'
            THEN abs(v::numeric) < 2::numeric ^ 1024 - 2::numeric ^ 970 ELSE false END
        WHEN kind = 'int' THEN CASE WHEN jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]{1,10}$'
            THEN v::text::bigint BETWEEN -2147483648 AND 2147483647 ELSE false END
        -- At most 131,072 digits, the sign not counted (the API's
        -- maxBigIntDigits).
        WHEN kind = 'bigint' THEN v::text ~ '^(0|-?[1-9][0-9]*)$' AND length(ltrim(v::text, '-')) <= 131072
            OR jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^(0|-?[1-9][0-9]*)$' AND length(ltrim(v #>> '{}', '-')) <= 131072
        WHEN kind = 'bool' THEN jsonb_typeof(v) = 'boolean'
        WHEN kind = 'string' THEN jsonb_typeof(v) = 'string'
        WHEN kind = 'obj' THEN jsonb_typeof(v) = 'object'
        -- A timestamptz column as to_jsonb gives it (in UTC: capture_change
        -- fixes the time zone): within years 1 to 9999 in UTC; four digits
        -- first: not infinity, nor year 10000 and later; a year before 1
        -- reads as before 0001-01-01.
        WHEN kind = 'column time' THEN CASE WHEN jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^[0-9]{4}-'
            THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
            ELSE false END
        -- A DateTime held as JSON (in a list, a subdocument): RFC 3339 as
        -- the API writes it (Postgres reads far more as times), then
        -- within years 1 to 9999 in UTC.
        WHEN kind = 'time' THEN CASE WHEN jsonb_typeof(v) = 'string'
                AND (v #>> '{}') ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$'
            THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
            ELSE false END
        ELSE true
    END
$$;
