-- warmup_lr_grid_stats also counts each cell's cancelled and unfinished
-- (PENDING or RUNNING) trials, so that `normsweep results` and the report
-- read every figure of a cell from the view (GetSweepAnalysis) instead of
-- computing their own. New columns go last, as CREATE OR REPLACE VIEW requires;
-- placement_sensitivity_at reads the view by column name and is unchanged.
CREATE OR REPLACE VIEW warmup_lr_grid_stats AS
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
       count(*) FILTER (WHERE state IN ('PENDING', 'RUNNING')) AS unfinished
FROM (SELECT t.*, normsweep_usable_loss(t.state, t.final_val_loss) AS usable FROM trials t) AS t
GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr;
