-- Leases that ended before $1: PENDING again while attempts remain, else
-- FAILED (CANCELLED in a cancelled sweep), each recorded as an attempt.
-- Returns how many went to each state.
-- The expired leases' holders, read before the update clears them.
WITH cur AS (SELECT id, attempts, worker_id FROM trials
    WHERE state = 'RUNNING' AND lease_expires_at < ('epoch'::timestamptz + $1::bigint * interval '1 microsecond')
    FOR UPDATE),
  expired AS (UPDATE trials t SET
    state = CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED'
      WHEN t.attempts >= s.max_attempts THEN 'FAILED' ELSE 'PENDING' END,
    error = CASE WHEN s.state <> 'CANCELLED' AND t.attempts >= s.max_attempts
      THEN 'lease expired after ' || t.attempts || ' attempts' ELSE t.error END,
    worker_id = CASE WHEN s.state <> 'CANCELLED' AND t.attempts < s.max_attempts THEN NULL
      ELSE t.worker_id END,
    finished_at = CASE WHEN s.state = 'CANCELLED' OR t.attempts >= s.max_attempts
      THEN ('epoch'::timestamptz + $1::bigint * interval '1 microsecond') ELSE NULL END,
    lease_expires_at = NULL, update_seq = nextval('trial_update_seq')
    FROM sweeps s, cur WHERE s.id = t.sweep_id AND t.id = cur.id
    RETURNING t.id, t.state, t.sweep_id, cur.attempts, cur.worker_id),
  a AS (INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason)
    SELECT id, attempts, worker_id, ('epoch'::timestamptz + $1::bigint * interval '1 microsecond'), state,
    'lease expired' FROM expired),
  -- Those made final leave their sweeps' open trials.
  d AS (SELECT sweep_id, count(*) AS n, ('epoch'::timestamptz + $1::bigint * interval '1 microsecond') AS finished_at
    FROM expired WHERE state <> 'PENDING' GROUP BY sweep_id),
  {{close_open_trials}}
SELECT state, count(*) FROM expired GROUP BY state
