-- The literature's sensitivity measures (issue 16, parts 1 and 2):
-- `normsweep results`, the report and Grafana read these views (through
-- GetSweepAnalysis or directly), never a copy of the arithmetic.
--   lr_sensitivity          per line (sweep, variant, placement, warm-up):
--                           Wortsman et al. 2023 (arXiv 2309.14322, sec. 2.2)
--   lr_sensitivity_summary  per placement over its warm-ups
--   grid_importance         per placement: a functional ANOVA of the final
--                           validation loss over the (warm-up x peak lr) grid
-- Each reads the trials once (windows, not self-joins), and a query for one
-- sweep (WHERE sweep_id = $1) reaches down to that sweep's trials: every CTE
-- is used once (so inlined) and every window is partitioned by sweep_id. A
-- sweep of 10,000 trials takes 0.1-0.2 s per view (2 busy cores).
--
-- LR sensitivity of one line of the grid (sweep, variant, placement, warm-up):
--
--     LRS = mean over the line's counted lrs of ( min(l(lr), l0) - l* )
--
-- l(lr) is the mean over the cell's counted seeds of their value (above: a
-- diverged or non-finite seed is its own l0). l0 of the line is the mean l0
-- of the trials it counts. l* = min over lr of min(l(lr), l0): the paper's
-- min of l(lr) whenever some lr ends below l0 (the normal case), and l0 when
-- none does, so that LRS is never negative and is 0 for a model that stays
-- at l0 everywhere (the paper's first caveat: read it beside l* and the
-- loss curves, never alone).
--
-- A peak lr counts when its cell is final and known: no trial PENDING or
-- RUNNING, at least one trial SUCCEEDED or DIVERGED, and every one of those
-- with an l0 (LrSensitivity.lrs: "every seed final and with an l0"; l0 of
-- the line is their mean). Otherwise it is pending (lrs_pending) when a
-- trial is still open or a counted trial lacks l0 (older trainers reported
-- none: such an lr stays pending), and in neither count when all its trials
-- FAILED or were CANCELLED.
--   lrs            peak lrs counted
--   points_at_l0   seeds of the counted lrs that counted as l0
--   best_lr        the lr of the smallest l(lr) (the smaller lr on a tie)
--   best_val_loss  l*
--   init_val_loss  l0 of the line
--   lr_sensitivity NULL when no lr counts; 0 by the formula with one lr
--                  (`normsweep results` marks such a line)
--   lrs_pending    peak lrs left out for now
-- Random-search lines are its warm-up values, mostly with one lr each; a
-- boundary_search sweep's lrs are its search's points, not an even grid
-- (its lr_boundary view is the answer there).
CREATE VIEW lr_sensitivity AS
WITH cells AS (
  SELECT sweep_id, variant, placement, warmup_steps, peak_lr,
         final AND n_without_l0 = 0 AS counted,
         n_open > 0 OR n_without_l0 > 0 AS pending,
         n, n_at_l0, mean_value AS l, l0_sum
  FROM cell_loss_values
),
lined AS (
  SELECT c.*,
         sum(l0_sum) FILTER (WHERE counted) OVER line / sum(n) FILTER (WHERE counted) OVER line AS line_l0
  FROM cells c
  WINDOW line AS (PARTITION BY sweep_id, variant, placement, warmup_steps)
)
SELECT sweep_id, variant, placement, warmup_steps,
       (count(*) FILTER (WHERE counted))::integer AS lrs,
       coalesce(sum(n_at_l0) FILTER (WHERE counted), 0)::integer AS points_at_l0,
       (array_agg(peak_lr ORDER BY l, peak_lr) FILTER (WHERE counted))[1] AS best_lr,
       min(least(l, line_l0)) FILTER (WHERE counted) AS best_val_loss,
       min(line_l0) AS init_val_loss,
       avg(least(l, line_l0)) FILTER (WHERE counted) - min(least(l, line_l0)) FILTER (WHERE counted) AS lr_sensitivity,
       (count(*) FILTER (WHERE pending))::integer AS lrs_pending
FROM lined
GROUP BY sweep_id, variant, placement, warmup_steps;
