-- sluice:readable-by 16
-- A DateTime in a list or a subdocument written in SQL is one the API
-- reads: is_value checked its shape only, then cast it, and Postgres
-- takes hour 24 and a second 60 (2020-01-01T24:00:00Z), which the API
-- refuses: GET left such a list out and served such a subdocument's
-- value as stored, which a PUT of what was read then refused. A day its
-- month does not have (02-30), a month 13 or an offset past 15:59 made
-- the cast raise Postgres's own error, naming no document or field; they
-- are refused now as any value of the wrong type, naming the field.
-- Rows written before are left as they are.
--
-- is_value is that of migration 24 with the time checked so. Expand: its
-- signature is the same, and binaries that know migration 16 run beside
-- it unchanged.

-- is_value: see migrations 17, 20 and 24.
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
        -- the API reads it (Postgres reads far more as times: hour 24, a
        -- second 60, which Go refuses), on a day its month has, with an
        -- offset Postgres takes (within 15:59; past it the cast raised
        -- an error naming no field), then within years 1 to 9999 in UTC.
        -- The day is checked before the cast, which raises on 02-30.
        WHEN kind = 'time' THEN CASE WHEN jsonb_typeof(v) = 'string'
                AND (v #>> '{}') ~ '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-5]):[0-5][0-9])$'
                AND left(v #>> '{}', 4) <> '0000'
            THEN CASE WHEN substr(v #>> '{}', 9, 2)::int <= extract(day from make_date(left(v #>> '{}', 4)::int, substr(v #>> '{}', 6, 2)::int, 1) + interval '1 month - 1 day')
                THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
                ELSE false END
            ELSE false END
        ELSE true
    END
$$;
