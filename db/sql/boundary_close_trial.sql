-- The finished trial leaves sweep $1's open trials (after any follow-up
-- joined them); the sweep completes when none are left (now $2), as
-- close_open_trials.sql does for the batched statements.
UPDATE sweeps s SET open_trials = s.open_trials - 1,
  state = CASE WHEN s.open_trials = 1 AND s.state = 'RUNNING' THEN 'COMPLETED' ELSE s.state END,
  finished_at = CASE WHEN s.open_trials = 1 AND s.state = 'RUNNING'
    THEN 'epoch'::timestamptz + $2::bigint * interval '1 microsecond' ELSE s.finished_at END
  WHERE s.id = $1
