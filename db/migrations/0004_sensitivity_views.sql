-- The mission's question answered in SQL, beyond 0002's summaries: how much
-- of the (warm-up x peak lr) grid each placement gets close to the best
-- result, the grid with mean/std/divergence rate over seeds, and the paper's
-- Figure 3 (step-0 FFN gradient norms per layer). Grafana's PostgreSQL panels
-- and the README's queries read exactly these names.
--
-- A trial's loss counts only when it SUCCEEDED with a finite final
-- validation loss; a DIVERGED seed counts in `diverged`, never in a mean.
CREATE FUNCTION normsweep_usable_loss(state text, final_val_loss double precision) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT state = 'SUCCEEDED' AND final_val_loss IS NOT NULL
     AND final_val_loss < 'Infinity'::double precision     -- NaN sorts above Infinity
     AND final_val_loss > '-Infinity'::double precision
$$;

-- One row per grid cell: (sweep, variant, placement, warm-up, peak lr).
--   trials           every trial of the cell, whatever its state
--   n_seeds          the seeds the mean is over (succeeded, finite loss)
--   mean_val_loss    mean final validation loss over those seeds (NULL: none)
--   std_val_loss     their sample standard deviation (NULL with one seed)
--   divergence_rate  diverged / (succeeded + diverged): the share of the
--                    trials that trained to the end or blew up which blew up;
--                    FAILED (an error, not the model), CANCELLED and
--                    unfinished trials are left out (NULL when none is left)
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
       max(final_val_loss) FILTER (WHERE usable) AS max_val_loss
FROM (SELECT t.*, normsweep_usable_loss(t.state, t.final_val_loss) AS usable FROM trials t) AS t
GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr;

-- A bad tolerance is an error that names it, not an empty answer.
CREATE FUNCTION normsweep_check_tolerance(tolerance double precision) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF tolerance IS NULL OR NOT (tolerance >= 0 AND tolerance < 'Infinity'::double precision) THEN
    RAISE EXCEPTION 'tolerance must be a finite number >= 0 (a fraction of the best loss: 0.05 is 5%%), got %',
      coalesce(tolerance::text, 'NULL')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN tolerance;
END
$$;

-- Per sweep, variant and placement: trial outcomes, best and median final
-- validation loss over succeeded trials, and how much of the grid is "near
-- the best".
--
-- A grid cell's value is its mean_val_loss (warmup_lr_grid_stats). A cell is
-- near the best when
--     mean_val_loss <= best_cell_val_loss * (1 + tolerance)
-- where best_cell_val_loss is the lowest cell mean of the same sweep and
-- variant over BOTH placements: the placements are measured against one
-- yardstick, so "Post-LN reaches the best in 1 of 9 cells, Pre-LN in 6" says
-- how far each is from the best anyone reached, not from its own best (a
-- placement that never trains would otherwise be "near its best" everywhere).
-- The tolerance is relative (a fraction of the best loss) so that it means
-- the same on tasks with different loss scales; the view uses 5% (0.05),
-- placement_sensitivity_at(t) any other. Cells without a mean (every seed
-- diverged, failed or unfinished) count in grid_cells but are never near the
-- best; a cell whose surviving seeds are near the best counts even when
-- another seed diverged (divergence_rate says how often that happened).
CREATE FUNCTION placement_sensitivity_at(tolerance double precision)
RETURNS TABLE (sweep_id bigint, variant text, placement text,
               trials bigint, succeeded bigint, diverged bigint, failed bigint,
               best_val_loss double precision, median_val_loss double precision,
               grid_cells bigint, cells_near_best bigint, share_near_best double precision,
               cancelled bigint, unfinished bigint, divergence_rate double precision,
               best_cell_val_loss double precision, tolerance_used double precision)
LANGUAGE sql STABLE AS $$
  WITH outcomes AS (
    SELECT t.sweep_id, t.variant, t.placement,
           count(*) AS trials,
           count(*) FILTER (WHERE t.state = 'SUCCEEDED') AS succeeded,
           count(*) FILTER (WHERE t.state = 'DIVERGED') AS diverged,
           count(*) FILTER (WHERE t.state = 'FAILED') AS failed,
           count(*) FILTER (WHERE t.state = 'CANCELLED') AS cancelled,
           count(*) FILTER (WHERE t.state IN ('PENDING', 'RUNNING')) AS unfinished,
           min(t.final_val_loss) FILTER (WHERE t.usable) AS best_val_loss,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY t.final_val_loss)
             FILTER (WHERE t.usable) AS median_val_loss
    FROM (SELECT tr.*, normsweep_usable_loss(tr.state, tr.final_val_loss) AS usable FROM trials tr) AS t
    GROUP BY t.sweep_id, t.variant, t.placement
  ),
  cells AS (
    SELECT g.sweep_id, g.variant, g.placement, g.mean_val_loss, g.succeeded, g.diverged,
           min(g.mean_val_loss) OVER (PARTITION BY g.sweep_id, g.variant) AS best_cell
    FROM warmup_lr_grid_stats g
  ),
  near AS (
    SELECT c.sweep_id, c.variant, c.placement,
           count(*) AS grid_cells,
           count(*) FILTER (WHERE c.mean_val_loss <= c.best_cell * (1 + normsweep_check_tolerance($1)))
             AS cells_near_best,
           min(c.best_cell) AS best_cell
    FROM cells c
    GROUP BY c.sweep_id, c.variant, c.placement
  )
  SELECT o.sweep_id, o.variant, o.placement,
         o.trials, o.succeeded, o.diverged, o.failed,
         o.best_val_loss, o.median_val_loss,
         n.grid_cells, n.cells_near_best, n.cells_near_best::double precision / n.grid_cells,
         o.cancelled, o.unfinished,
         o.diverged::double precision / NULLIF(o.succeeded + o.diverged, 0),
         n.best_cell, normsweep_check_tolerance($1)
  FROM outcomes o
  JOIN near n USING (sweep_id, variant, placement)
$$;

-- The default tolerance: within 5% of the best cell.
CREATE VIEW placement_sensitivity AS
SELECT * FROM placement_sensitivity_at(0.05);

-- The paper's Figure 3: the Frobenius norms of each layer's FFN weight
-- gradients (W1 = ffn.fc1, W2 = ffn.fc2) at step 0, before any update, mean
-- (and sample std) over seeds, per sweep, variant, placement, depth and
-- layer. Layers count from 0, so the last layer is `layer = layers - 1`:
--   SELECT placement, layers, w2_grad_norm FROM step0_grad_norms
--   WHERE sweep_id = 1 AND layer = layers - 1 ORDER BY placement, layers;
-- is "last-layer W2 across depths" when the sweep varies `layers`.
-- The step-0 gradient does not depend on warm-up or lr, so the trials of one
-- seed (one per grid cell) are averaged into that seed first: every seed
-- weighs the same however many cells it ran in. `layers` is the trial's
-- configured depth, or the number of layers it reported when the stored
-- config leaves it out.
CREATE VIEW step0_grad_norms AS
WITH per_trial AS (
  SELECT t.sweep_id, t.variant, t.placement, t.seed, g.trial_id, g.layer,
         avg(g.norm) FILTER (WHERE g.matrix = 'ffn.fc1') AS w1,
         avg(g.norm) FILTER (WHERE g.matrix = 'ffn.fc2') AS w2,
         coalesce((t.config ->> 'layers')::integer,
                  max(g.layer) OVER (PARTITION BY g.trial_id) + 1) AS layers
  FROM layer_grad_norms g
  JOIN trials t ON t.id = g.trial_id
  WHERE g.step = 0
  GROUP BY t.id, g.trial_id, g.layer
),
per_seed AS (
  SELECT sweep_id, variant, placement, layers, layer, seed, avg(w1) AS w1, avg(w2) AS w2
  FROM per_trial
  GROUP BY sweep_id, variant, placement, layers, layer, seed
)
SELECT sweep_id, variant, placement, layers, layer,
       avg(w1) AS w1_grad_norm,
       avg(w2) AS w2_grad_norm,
       count(*) AS n_seeds,
       stddev_samp(w1) AS w1_grad_norm_std,
       stddev_samp(w2) AS w2_grad_norm_std
FROM per_seed
GROUP BY sweep_id, variant, placement, layers, layer;
