-- Changes are stored one row per batch of consecutive changes of a commit
-- (a chunk of a large write request, or one small request)
-- instead of one row per changed document. Measured on this project's
-- benchmark machine, the per-document rows (a heap tuple and an index entry
-- each) cost Postgres about as much as the documents' own rows; one row of
-- arrays costs about a quarter of that.
--
-- Change idx+i of commit commit_uid is doc_ids[i+1] with ops[i+1] (1 added,
-- 2 updated, 3 deleted); its class is the part of the id before the first
-- "/". befores and afters hold JSON arrays with one element per change (the
-- document in its API form, or null), or NULL when every element would be
-- null (the afters of a delete, the befores of an insert). They are text,
-- not json: Sluice writes them and parses them on every read anyway, and
-- Postgres checking the JSON on the way in doubled the cost of the row.
ALTER TABLE sluice.changes RENAME TO changes_v1;
ALTER INDEX sluice.changes_pkey RENAME TO changes_v1_pkey;

CREATE TABLE sluice.changes (
    commit_uid  bigint NOT NULL,
    idx         integer NOT NULL,
    doc_ids     text[] NOT NULL,
    ops         smallint[] NOT NULL,
    befores     text,
    afters      text,
    PRIMARY KEY (commit_uid, idx)
);

INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
SELECT commit_uid, idx, ARRAY[doc_id], ARRAY[op],
       CASE WHEN before IS NULL THEN NULL ELSE '[' || before::text || ']' END,
       CASE WHEN after IS NULL THEN NULL ELSE '[' || after::text || ']' END
FROM sluice.changes_v1;

DROP TABLE sluice.changes_v1;

-- lz4 compresses the image arrays several times faster than the default
-- pglz. A server built without lz4 refuses the setting; it keeps pglz.
DO $$
BEGIN
    ALTER TABLE sluice.changes
        ALTER COLUMN doc_ids SET COMPRESSION lz4,
        ALTER COLUMN befores SET COMPRESSION lz4,
        ALTER COLUMN afters SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END
$$;
