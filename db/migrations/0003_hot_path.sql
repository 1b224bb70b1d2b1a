-- Cheaper progress writes (measured with tests/bench/scheduler_load):
-- * ReportProgress updates last_step/last_*_loss/update_seq on every batch.
--   With none of those columns indexed the update is HOT (no index writes),
--   given free space on the page; WatchSweep reads changes through the
--   (sweep_id, state) index instead of its own.
-- * The metric tables' foreign keys cost one lookup per inserted row; the
--   rows are only ever written in the statement that checks the trial's
--   lease, and trials are never deleted, so the check is redundant.
DROP INDEX trials_sweep_seq;
ALTER TABLE trials SET (fillfactor = 70);
ALTER TABLE trial_metrics DROP CONSTRAINT trial_metrics_trial_id_fkey;
ALTER TABLE layer_grad_norms DROP CONSTRAINT layer_grad_norms_trial_id_fkey;
