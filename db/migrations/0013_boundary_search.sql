-- Boundary-search sweeps (issue 17): each trial's line, a row per line that
-- serialises the finishes of its trials (locked FOR UPDATE in the
-- transaction that records a finish and creates the follow-up,
-- db/boundary_store.cc) and keeps the line's state and bracket as the search
-- (db/boundary_search.h) last decided them, and the view lr_boundary.
ALTER TABLE trials ADD COLUMN boundary_line integer;
CREATE INDEX trials_boundary_line ON trials (sweep_id, boundary_line) WHERE boundary_line IS NOT NULL;

CREATE TABLE boundary_lines (
  sweep_id           bigint NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  line               integer NOT NULL,
  variant            text NOT NULL,
  placement          text NOT NULL,
  warmup_steps       integer NOT NULL,
  seed               integer NOT NULL,
  -- SEARCHING, FOUND, TRAINABLE_EVERYWHERE, NOWHERE_TRAINABLE, CANCELLED, FAILED
  state              text NOT NULL DEFAULT 'SEARCHING',
  max_trainable_lr   double precision,  -- L: the largest trainable probe
  min_untrainable_lr double precision,  -- U: the smallest untrainable probe above L
  PRIMARY KEY (sweep_id, line)
);

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
