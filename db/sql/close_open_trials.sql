-- A CTE for statements that make trials final: takes them off their sweeps'
-- open_trials and completes a RUNNING sweep that reaches 0
-- (0006_open_trials.sql). It reads a CTE d(sweep_id, n, finished_at): per
-- sweep, how many trials became final, and the sweep's finished_at should it
-- complete.
s AS (UPDATE sweeps s SET open_trials = s.open_trials - d.n,
  state = CASE WHEN s.open_trials = d.n AND s.state = 'RUNNING' THEN 'COMPLETED' ELSE s.state END,
  finished_at = CASE WHEN s.open_trials = d.n AND s.state = 'RUNNING' THEN d.finished_at ELSE s.finished_at END
  FROM d WHERE s.id = d.sweep_id)
