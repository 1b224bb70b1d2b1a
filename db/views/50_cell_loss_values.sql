-- One row per grid cell (sweep, variant, placement, warm-up, peak lr): its
-- seeds' values (trial_loss_values) taken together, the cells that
-- lr_sensitivity and grid_importance both read. Each decides which cells it
-- counts (a diverged seed without l0 holds back both; a succeeded one
-- without l0 only lr_sensitivity, whose line l0 is the mean of its seeds').
--   final               no trial PENDING or RUNNING, one at least SUCCEEDED
--                       or DIVERGED
--   n_open              trials PENDING or RUNNING
--   n                   trials SUCCEEDED or DIVERGED (the cell's seeds)
--   n_without_l0        of those, the ones without an l0
--   n_at_l0             of those, the ones that count as l0
--   n_at_l0_without_l0  ... and have none (their value is unknown)
--   mean_value          the mean of the seeds' values
--   value_var           their population variance
--   l0_sum              the sum of the seeds' l0s
CREATE VIEW cell_loss_values AS
SELECT sweep_id, variant, placement, warmup_steps, peak_lr,
       count(*) FILTER (WHERE open) = 0 AND count(*) FILTER (WHERE final_state) > 0 AS final,
       count(*) FILTER (WHERE open) AS n_open,
       count(*) FILTER (WHERE final_state) AS n,
       count(*) FILTER (WHERE final_state AND l0 IS NULL) AS n_without_l0,
       count(*) FILTER (WHERE at_l0) AS n_at_l0,
       count(*) FILTER (WHERE at_l0 AND l0 IS NULL) AS n_at_l0_without_l0,
       avg(value) FILTER (WHERE final_state) AS mean_value,
       var_pop(value) FILTER (WHERE final_state) AS value_var,
       sum(l0) FILTER (WHERE final_state) AS l0_sum
FROM trial_loss_values
GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr;
