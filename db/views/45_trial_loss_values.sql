-- One rule for a seed of the sensitivity measures (lr_sensitivity,
-- grid_importance): a trial that SUCCEEDED with a finite final validation
-- loss counts with that loss; one that DIVERGED, or SUCCEEDED with a NaN,
-- infinite or missing loss, counts as its own l0 (the paper: a run that blew
-- up is worth no more than the untrained model, not infinity). FAILED (an
-- error, not the model) and CANCELLED trials are left out of every mean. l0
-- is trial_l0's; a seed that must count as l0 but has none is not known, and
-- its cell waits (cell_loss_values).
--
-- One row per trial: its l0 and the value it contributes to a mean.
--   final_state  SUCCEEDED or DIVERGED: the trial counts
--   open         PENDING or RUNNING: its cell is not final yet
--   at_l0        it counts as l0 (diverged, or no finite final loss)
--   value        the final loss, or l0 when at_l0 (NULL: at_l0 without l0,
--                or not counted)
--   failure      why the trial failed to train by the one rule
--                (normsweep_training_failure, migration 0020; docs/sql.md):
--                'diverged', 'no_finite_loss', 'plateau' (final loss above
--                unigram_loss - 0.1 and no longer falling),
--                'above_max_val_loss' (the sweep's boundary search's); or
--                'not_converged' (near the unigram loss but still learning:
--                not a failure); '' when it trained, NULL when not judged
--                (PENDING, RUNNING, FAILED, CANCELLED)
-- The sweep is joined for its max_val_loss only (a LEFT JOIN on its key,
-- which PostgreSQL leaves out of a query that does not read failure).
CREATE VIEW trial_loss_values AS
SELECT t.sweep_id, t.trial_id, t.variant, t.placement, t.warmup_steps, t.peak_lr, t.seed, t.state,
       t.state IN ('SUCCEEDED', 'DIVERGED') AS final_state,
       t.state IN ('PENDING', 'RUNNING') AS open,
       t.l0,
       t.state IN ('SUCCEEDED', 'DIVERGED') AND NOT u.usable AS at_l0,
       CASE WHEN u.usable THEN t.final_val_loss
            WHEN t.state IN ('SUCCEEDED', 'DIVERGED') THEN t.l0 END AS value,
       normsweep_training_failure(t.state, t.final_val_loss, t.unigram_loss, t.val_loss_progress, s.max_val_loss)
         AS failure
FROM trial_l0 t
LEFT JOIN sweeps s ON s.id = t.sweep_id
CROSS JOIN LATERAL (SELECT normsweep_usable_loss(t.state, t.final_val_loss) AS usable) AS u;
