-- 0017: how far a transcript is indexed also records a hash of the bytes just before that offset
-- (`transcript.TAIL_BYTES`), so a file replaced by one with the same first kilobytes and a line end at
-- the same offset is seen as rewritten and read again from its start. NULL (rows written before): the
-- check is the head's alone, as it was.

ALTER TABLE index_state ADD COLUMN tail_hash TEXT;
