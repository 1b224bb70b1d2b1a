-- A new sweep, RUNNING; no row when its request_id ($1) was used before.
INSERT INTO sweeps (request_id, name, spec, state, priority, max_attempts,
    max_concurrent_trials, trial_count, open_trials, created_at, max_interruptions, submitted_by)
  VALUES ($1, $2, $3::jsonb, 'RUNNING', $4, $5, $6, $7, $7,
    ('epoch'::timestamptz + $8::bigint * interval '1 microsecond'), $9, $10)
  ON CONFLICT (request_id) DO NOTHING RETURNING id
