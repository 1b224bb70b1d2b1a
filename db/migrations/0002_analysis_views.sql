-- The mission's question in SQL: how each placement fares, and the
-- (warm-up x peak lr) grid of final validation loss over seeds.

-- Per sweep, variant (extra-axis values) and placement.
CREATE VIEW placement_summary AS
SELECT sweep_id,
       variant,
       placement,
       count(*) AS trials,
       count(*) FILTER (WHERE state = 'SUCCEEDED') AS converged,
       count(*) FILTER (WHERE state = 'DIVERGED') AS diverged,
       count(*) FILTER (WHERE state = 'FAILED') AS failed,
       count(*) FILTER (WHERE state = 'CANCELLED') AS cancelled,
       count(*) FILTER (WHERE state IN ('PENDING', 'RUNNING')) AS unfinished,
       min(final_val_loss) FILTER (WHERE state = 'SUCCEEDED') AS best_final_val_loss,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY final_val_loss)
         FILTER (WHERE state = 'SUCCEEDED') AS median_final_val_loss
FROM trials
GROUP BY sweep_id, variant, placement;

-- Mean/std/count of the final validation loss over seeds, per grid cell.
-- Diverged trials are counted, not averaged.
CREATE VIEW warmup_lr_grid AS
SELECT sweep_id,
       variant,
       placement,
       warmup_steps,
       peak_lr,
       count(*) AS trials,
       count(*) FILTER (WHERE state = 'SUCCEEDED') AS converged,
       count(*) FILTER (WHERE state = 'DIVERGED') AS diverged,
       avg(final_val_loss) FILTER (WHERE state = 'SUCCEEDED') AS mean_final_val_loss,
       stddev_samp(final_val_loss) FILTER (WHERE state = 'SUCCEEDED') AS std_final_val_loss,
       count(final_val_loss) FILTER (WHERE state = 'SUCCEEDED') AS n_final_val_loss
FROM trials
GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr;
