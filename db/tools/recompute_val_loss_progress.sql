-- Fills trials.val_loss_progress (migration 0020) for trials stored before
-- the trainer reported it, from their stored metrics, by the trainer's own
-- rule (trainer/settings/val_loss_progress.h): the val_loss of the last evaluation at
-- or before step floor(0.75 * steps), minus the final evaluation's, for a
-- SUCCEEDED trial with 3 or more evaluations (step 0 counted) whose last
-- evaluation is at its last step and whose reference is not step 0. Trials that have a value keep it; trials
-- that cannot be judged stay NULL (and keep the plateau rule's label).
-- Not part of any migration (docs/upgrades.md: no backfill under the
-- migrations' locks); run it when you want stored labels re-judged:
--
--   psql "$DSN" -v sweep_id=ID -f db/tools/recompute_val_loss_progress.sql
--   psql "$DSN" -v sweep_id=0  -f db/tools/recompute_val_loss_progress.sql   (every sweep)
--
-- It prints the trials it updated. The views read the column at once.
\set ON_ERROR_STOP on
WITH unjudged AS (
  SELECT t.id, (t.config ->> 'steps')::bigint AS steps
  FROM trials t
  WHERE t.state = 'SUCCEEDED' AND t.val_loss_progress IS NULL
    AND (:sweep_id = 0 OR t.sweep_id = :sweep_id)
),
evals AS (
  SELECT d.id, d.steps, m.step, m.val_loss
  FROM unjudged d
  JOIN trial_metrics m ON m.trial_id = d.id
  WHERE m.val_loss IS NOT NULL
),
progress AS (
  SELECT id, steps, count(*) AS evaluations, max(step) AS last_step,
         max(step) FILTER (WHERE step <= (3 * steps) / 4) AS reference_step,
         (array_agg(val_loss ORDER BY step DESC) FILTER (WHERE step <= (3 * steps) / 4))[1]
           - (array_agg(val_loss ORDER BY step DESC))[1] AS progress
  FROM evals
  GROUP BY id, steps
)
-- update_seq: watchers and export cursors see the trial changed.
UPDATE trials t SET val_loss_progress = p.progress, update_seq = nextval('trial_update_seq')
FROM progress p
WHERE t.id = p.id AND p.evaluations >= 3 AND p.last_step = p.steps AND p.reference_step > 0
  AND p.progress > '-Infinity'::double precision AND p.progress < 'Infinity'::double precision
RETURNING t.id AS trial_id, t.sweep_id, t.placement, t.warmup_steps, t.peak_lr, t.seed, t.val_loss_progress;
