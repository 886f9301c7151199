-- A row of sluice.changes that holds only insertions may leave doc_ids and
-- ops NULL: every op is then 1 (added) and change idx+i is the document
-- whose after image is element i of afters, its id being that image's
-- "@id". Sluice writes such rows for every batch of inserts. The arrays
-- repeated what the images hold, and building, sending and storing them
-- (a text[] of 1,000 ids for a 1,000-document request) cost a large write
-- about a twelfth of its throughput on this project's benchmark machine.
--
-- The checks are NOT VALID: rows written before hold both arrays (they
-- were NOT NULL), so scanning the table to prove it is not needed.
ALTER TABLE sluice.changes
    ALTER COLUMN doc_ids DROP NOT NULL,
    ALTER COLUMN ops DROP NOT NULL,
    ADD CONSTRAINT changes_ids_with_ops CHECK ((doc_ids IS NULL) = (ops IS NULL)) NOT VALID,
    ADD CONSTRAINT changes_ids_or_afters CHECK (doc_ids IS NOT NULL OR afters IS NOT NULL) NOT VALID;
