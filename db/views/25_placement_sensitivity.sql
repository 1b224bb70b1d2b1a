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
-- plateaued and failure_rate are warmup_lr_grid_stats' over the placement's
-- trials: the SUCCEEDED trials that failed to train all the same, and
-- (diverged + plateaued) / (succeeded + diverged), by the one rule for
-- "failed to train" (normsweep_training_failure, migration 0020;
-- docs/sql.md); not_converged the SUCCEEDED trials that ended near the
-- unigram loss while still learning (not failures).
--
-- tolerance is the tolerance the row was computed with. tolerance_used, the
-- last column, is the same value under its old name: deprecated, kept for
-- one release (docs/sql.md, "Deprecated names"); the column in its place was
-- tolerance_used before, so a reader by position reads the same value.
--
-- The function's current definition lives here with the view, its default
-- tolerance (within 5% of the best cell): it is dropped and created again
-- with the views (db/migrations.h), after the view that reads it is gone.
-- 0004_sensitivity_views.sql created its first version. Its argument is
-- relative_tolerance (a column of the result is named tolerance). New
-- columns go last: readers outside this repository may read by position.
DROP FUNCTION IF EXISTS placement_sensitivity_at(double precision);

CREATE FUNCTION placement_sensitivity_at(relative_tolerance double precision)
RETURNS TABLE (sweep_id bigint, variant text, placement text,
               trials bigint, succeeded bigint, diverged bigint, failed bigint,
               best_val_loss double precision, median_val_loss double precision,
               grid_cells bigint, cells_near_best bigint, share_near_best double precision,
               cancelled bigint, unfinished bigint, divergence_rate double precision,
               best_cell_val_loss double precision, tolerance double precision,
               plateaued bigint, failure_rate double precision, not_converged bigint,
               tolerance_used double precision)
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
             FILTER (WHERE t.usable) AS median_val_loss,
           count(*) FILTER (WHERE t.state = 'SUCCEEDED' AND normsweep_failed_to_train(t.failure)) AS plateaued,
           count(*) FILTER (WHERE normsweep_failed_to_train(t.failure)) AS failures,
           count(*) FILTER (WHERE t.failure = 'not_converged') AS not_converged
    FROM (SELECT tr.*, normsweep_usable_loss(tr.state, tr.final_val_loss) AS usable,
                 normsweep_training_failure(tr.state, tr.final_val_loss, tr.unigram_loss,
                                            tr.val_loss_progress, s.max_val_loss) AS failure
          FROM trials tr JOIN sweeps s ON s.id = tr.sweep_id) AS t
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
         n.best_cell, normsweep_check_tolerance($1),
         o.plateaued, o.failures::double precision / NULLIF(o.succeeded + o.diverged, 0),
         o.not_converged, normsweep_check_tolerance($1)
  FROM outcomes o
  JOIN near n USING (sweep_id, variant, placement)
$$;

CREATE VIEW placement_sensitivity AS
SELECT * FROM placement_sensitivity_at(0.05);
