-- Per line: its bracket, trials spent and finished, and its state. A line is
-- decided when one of its trials is finished through FinishTrial; a trial
-- that ends otherwise (FAILED after its last lease expired, CANCELLED with
-- its sweep) stops a line still SEARCHING here, by the search's order
-- (FAILED before CANCELLED).
CREATE VIEW lr_boundary AS
SELECT b.sweep_id, b.line, b.variant, b.placement, b.warmup_steps, b.seed,
  CASE WHEN b.state <> 'SEARCHING' THEN b.state
    WHEN c.failed > 0 THEN 'FAILED'
    WHEN c.cancelled > 0 OR s.state = 'CANCELLED' THEN 'CANCELLED'
    ELSE 'SEARCHING' END AS state,
  b.max_trainable_lr, b.min_untrainable_lr, c.trials, c.finished
FROM boundary_lines b
JOIN sweeps s ON s.id = b.sweep_id
CROSS JOIN LATERAL (
  SELECT count(*)::int AS trials,
    (count(*) FILTER (WHERE t.state NOT IN ('PENDING', 'RUNNING')))::int AS finished,
    count(*) FILTER (WHERE t.state = 'FAILED') AS failed,
    count(*) FILTER (WHERE t.state = 'CANCELLED') AS cancelled
  FROM trials t WHERE t.sweep_id = b.sweep_id AND t.boundary_line = b.line) c;
