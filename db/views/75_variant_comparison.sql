-- "Does QK-norm help Pre-LN, and where?": per sweep, placement and variant,
-- the variant's figures beside the placement's baseline variant, the one of
-- the placement's lowest trial index (the first in the spec's expansion
-- order: every variant of a seed comes before the next seed's). The columns
-- are proto VariantComparison's (GetSweepAnalysisResponse.variants), and
-- every figure is another view's, never computed a second time:
--   trials               the variant's trials, whatever their state
--   mean_lr_sensitivity  lr_sensitivity_summary's (lines from two lrs or more)
--   best_val_loss        l*: the smallest l* of the variant's lr_sensitivity
--   best_lr              lines (any line with one, from one lr or more), with
--   best_warmup_steps    that line's best lr and warm-up (ties: the smaller
--                        warm-up)
--   failure_rate         placement_sensitivity's: (diverged + plateaued) /
--                        (succeeded + diverged) over the variant's trials
--   max_trainable_lr     boundary_search sweeps: the median (percentile_cont:
--                        with an even count, the mean of the middle two) of
--                        lr_boundary's max_trainable_lr over the variant's
--                        lines FOUND or TRAINABLE_EVERYWHERE; boundary_lines
--                        counts those lines (0 and NULL in other sweeps)
--   delta_mean_lr_sensitivity, delta_best_val_loss, delta_failure_rate
--                        the variant's figure minus the baseline's
--   best_lr_ratio, max_trainable_lr_ratio
--                        the variant's lr over the baseline's (lrs compare by
--                        ratio: they are swept on a log scale)
-- The baseline's own row has deltas 0 and ratios 1 where its figure exists;
-- a delta or ratio is NULL when either figure is. A sweep with one variant
-- has one row per placement, its own baseline.
-- A query for one sweep (WHERE sweep_id = $1) reaches down to that sweep's
-- rows of every view it reads: each is grouped or partitioned by sweep_id.
-- New columns go last: readers outside this repository may read by position.
CREATE VIEW variant_comparison AS
WITH variants AS (
  SELECT sweep_id, placement, variant, count(*) AS trials, min(trial_index) AS first_index
  FROM trials
  GROUP BY sweep_id, placement, variant
),
best_lines AS (
  SELECT sweep_id, placement, variant,
         min(best_val_loss) AS best_val_loss,
         (array_agg(best_lr ORDER BY best_val_loss, warmup_steps) FILTER (WHERE best_val_loss IS NOT NULL))[1]
           AS best_lr,
         (array_agg(warmup_steps ORDER BY best_val_loss, warmup_steps) FILTER (WHERE best_val_loss IS NOT NULL))[1]
           AS best_warmup_steps
  FROM lr_sensitivity
  GROUP BY sweep_id, placement, variant
),
boundaries AS (
  SELECT sweep_id, placement, variant,
         count(*) FILTER (WHERE found) AS boundary_lines,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY max_trainable_lr) FILTER (WHERE found) AS max_trainable_lr
  FROM (SELECT b.*, b.state IN ('FOUND', 'TRAINABLE_EVERYWHERE') AND b.max_trainable_lr IS NOT NULL AS found
        FROM lr_boundary b) AS b
  GROUP BY sweep_id, placement, variant
),
figures AS (
  SELECT v.sweep_id, v.placement, v.variant, v.first_index, v.trials,
         s.mean_lr_sensitivity, l.best_val_loss, l.best_lr, l.best_warmup_steps, p.failure_rate,
         b.max_trainable_lr, coalesce(b.boundary_lines, 0) AS boundary_lines
  FROM variants v
  LEFT JOIN lr_sensitivity_summary s USING (sweep_id, placement, variant)
  LEFT JOIN best_lines l USING (sweep_id, placement, variant)
  LEFT JOIN placement_sensitivity p USING (sweep_id, placement, variant)
  LEFT JOIN boundaries b USING (sweep_id, placement, variant)
),
based AS (
  SELECT f.*,
         first_value(variant) OVER placement_line AS baseline_variant,
         first_value(mean_lr_sensitivity) OVER placement_line AS base_mean_lr_sensitivity,
         first_value(best_val_loss) OVER placement_line AS base_best_val_loss,
         first_value(best_lr) OVER placement_line AS base_best_lr,
         first_value(failure_rate) OVER placement_line AS base_failure_rate,
         first_value(max_trainable_lr) OVER placement_line AS base_max_trainable_lr
  FROM figures f
  WINDOW placement_line AS (PARTITION BY sweep_id, placement ORDER BY first_index)
)
SELECT sweep_id, placement, variant, baseline_variant,
       trials::integer AS trials,
       mean_lr_sensitivity, best_val_loss, best_lr, best_warmup_steps, failure_rate, max_trainable_lr,
       boundary_lines::integer AS boundary_lines,
       mean_lr_sensitivity - base_mean_lr_sensitivity AS delta_mean_lr_sensitivity,
       best_val_loss - base_best_val_loss AS delta_best_val_loss,
       best_lr / NULLIF(base_best_lr, 0) AS best_lr_ratio,
       failure_rate - base_failure_rate AS delta_failure_rate,
       max_trainable_lr / NULLIF(base_max_trainable_lr, 0) AS max_trainable_lr_ratio
FROM based;
