-- One row per trial with its l0, the validation loss at initialisation
-- (before the first update). The one rule for l0, read by the analysis
-- views (trial_loss_values) and the boundary search
-- (db/sql/boundary_line_trials.sql) alike; db::TrialL0 (db/store.h) is its
-- C++ twin, for MemoryStore:
--   l0 = the trial's init_val_loss (FinishTrial's result) when finite,
--        else the val_loss of its step-0 metric row when finite,
--        else NULL (no l0).
-- A client may report l0 only as that step-0 point (ReportProgress).
-- The trial's columns that those readers need come along, so that each of
-- them reads the trials once.
--
-- The step-0 val_loss is read as trial_metrics gives it (the batch's value
-- first, then a late row's), but from its two tables by primary key, and
-- only for a trial without a finite init_val_loss: the view would unnest
-- every step of the trial to find step 0. A step-0 row is the first of a
-- batch that starts at 0 (batches are in step order). OFFSET 0 keeps the
-- look-up one per trial (PostgreSQL would otherwise copy it into every
-- column that uses l0).
CREATE VIEW trial_l0 AS
SELECT t.id AS trial_id, t.sweep_id, t.trial_index, t.variant, t.placement, t.warmup_steps, t.peak_lr, t.seed,
       t.state, t.final_val_loss, t.boundary_line, t.unigram_loss,
       coalesce(normsweep_finite(t.init_val_loss), normsweep_finite(step0.val_loss)) AS l0,
       t.val_loss_progress
FROM trials t
LEFT JOIN LATERAL (
  SELECT coalesce((SELECT b.val_loss[1] FROM trial_metric_batches b
                    WHERE b.trial_id = t.id AND b.first_step = 0 AND b.steps[1] = 0),
                  (SELECT m.val_loss FROM trial_metric_late m WHERE m.trial_id = t.id AND m.step = 0)) AS val_loss
  WHERE normsweep_finite(t.init_val_loss) IS NULL
  OFFSET 0) AS step0 ON true;
