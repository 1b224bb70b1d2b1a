-- The max_val_loss a sweep's trials are judged by (normsweep_max_val_loss of
-- its spec, 0016_training_failure.sql), kept beside the spec. The views that
-- classify each trial's failure (db/views 20, 25, 45) read this column: read
-- from the spec, the jsonb was de-TOASTed once per trial row, which was most
-- of GetSweepAnalysis's time on a 10,000-trial sweep (a large spec spans
-- several TOAST pages; 44,000 buffer reads for 10,000 trials).
--
-- Safe under an older replica (docs/upgrades.md): a generated column is
-- filled by PostgreSQL itself, so an older replica's INSERTs and UPDATEs that
-- do not name it still succeed; it rewrites only the small sweeps table.
ALTER TABLE sweeps ADD COLUMN max_val_loss double precision
  GENERATED ALWAYS AS (normsweep_max_val_loss(spec)) STORED;
