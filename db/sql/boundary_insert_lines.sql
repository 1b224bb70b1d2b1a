-- A new boundary_search sweep's lines, inside CreateSweep's transaction:
-- sets the line ($3) of its trials by index ($2) in sweep $1, then a row per
-- line, from its trials.
WITH u AS (UPDATE trials t SET boundary_line = l.line
    FROM unnest($2::int[], $3::int[]) AS l(i, line)
    WHERE t.sweep_id = $1 AND t.trial_index = l.i
    RETURNING t.boundary_line, t.variant, t.placement, t.warmup_steps, t.seed)
INSERT INTO boundary_lines (sweep_id, line, variant, placement, warmup_steps, seed)
  SELECT DISTINCT ON (boundary_line) $1, boundary_line, variant, placement, warmup_steps, seed
  FROM u ORDER BY boundary_line
