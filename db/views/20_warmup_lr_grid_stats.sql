-- One row per grid cell: (sweep, variant, placement, warm-up, peak lr).
-- A trial's loss counts only when it SUCCEEDED with a finite final
-- validation loss (normsweep_usable_loss); a DIVERGED seed counts in
-- `diverged`, never in a mean.
--   trials           every trial of the cell, whatever its state
--   n_seeds          the seeds the mean is over (succeeded, finite loss)
--   mean_val_loss    mean final validation loss over those seeds (NULL: none)
--   std_val_loss     their sample standard deviation (NULL with one seed)
--   divergence_rate  diverged / (succeeded + diverged): the share of the
--                    trials that trained to the end or blew up which blew up;
--                    FAILED (an error, not the model), CANCELLED and
--                    unfinished trials are left out (NULL when none is left)
--   cancelled        CANCELLED trials
--   unfinished       PENDING or RUNNING trials
--   plateaued        SUCCEEDED trials that failed to train all the same:
--                    no finite loss, stalled at the unigram plateau, or above
--                    the sweep's boundary-search max_val_loss
--                    (normsweep_training_failure, migration 0020: the one
--                    rule for "failed to train"; docs/sql.md)
--   failure_rate     (diverged + plateaued) / (succeeded + diverged): the
--                    share of the trials that ran to their end which failed
--                    to train (NULL when none did)
--   not_converged    SUCCEEDED trials that ended near the unigram loss while
--                    still learning: not failures, and not in plateaued
-- `normsweep results` and the report read every figure of a cell from here
-- (GetSweepAnalysis); placement_sensitivity_at reads it by column name.
-- New columns go last: readers outside this repository may read by position.
CREATE VIEW warmup_lr_grid_stats AS
SELECT sweep_id,
       variant,
       placement,
       warmup_steps,
       peak_lr,
       count(*) AS trials,
       count(*) FILTER (WHERE state = 'SUCCEEDED') AS succeeded,
       count(*) FILTER (WHERE state = 'DIVERGED') AS diverged,
       count(*) FILTER (WHERE state = 'FAILED') AS failed,
       avg(final_val_loss) FILTER (WHERE usable) AS mean_val_loss,
       stddev_samp(final_val_loss) FILTER (WHERE usable) AS std_val_loss,
       count(*) FILTER (WHERE usable) AS n_seeds,
       count(*) FILTER (WHERE state = 'DIVERGED')::double precision
         / NULLIF(count(*) FILTER (WHERE state IN ('SUCCEEDED', 'DIVERGED')), 0) AS divergence_rate,
       min(final_val_loss) FILTER (WHERE usable) AS min_val_loss,
       max(final_val_loss) FILTER (WHERE usable) AS max_val_loss,
       count(*) FILTER (WHERE state = 'CANCELLED') AS cancelled,
       count(*) FILTER (WHERE state IN ('PENDING', 'RUNNING')) AS unfinished,
       count(*) FILTER (WHERE state = 'SUCCEEDED' AND normsweep_failed_to_train(failure)) AS plateaued,
       count(*) FILTER (WHERE normsweep_failed_to_train(failure))::double precision
         / NULLIF(count(*) FILTER (WHERE state IN ('SUCCEEDED', 'DIVERGED')), 0) AS failure_rate,
       count(*) FILTER (WHERE failure = 'not_converged') AS not_converged
FROM (SELECT t.*, normsweep_usable_loss(t.state, t.final_val_loss) AS usable,
             normsweep_training_failure(t.state, t.final_val_loss, t.unigram_loss, t.val_loss_progress,
                                        s.max_val_loss) AS failure
      FROM trials t JOIN sweeps s ON s.id = t.sweep_id) AS t
GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr;
