-- 0004: resumable reading of a transcript whose last line is huge and has no end yet (a sparse
-- or runaway file). scan_offset > byte_offset: the bytes between them are one oversized line
-- without a newline, already scanned; the next read resumes there. 0 = nothing pending.

ALTER TABLE index_state ADD COLUMN scan_offset INTEGER NOT NULL DEFAULT 0;
