-- Leases that ended before $1, each an interruption (they never count
-- against max_attempts): PENDING again while the trial's interruptions stay
-- below its sweep's max_interruptions, else FAILED (CANCELLED in a cancelled
-- sweep), each recorded as an attempt with its cause: "lease_lost" when it
-- expired within [$2, $3] (the scheduler saw its database fail then, so its
-- worker could not renew it) and its worker was not superseded (restarted),
-- else "worker_lost". Returns how many went to each state, by cause. The
-- rule of MemoryStore::EndAttempt; the error's words are InterruptedError's.
-- The expired leases' holders, read before the update clears them.
WITH cur AS (SELECT t.id, t.attempts, t.worker_id, t.interruptions + 1 AS interruptions,
    CASE WHEN w.superseded_by IS NULL
      AND t.lease_expires_at >= ('epoch'::timestamptz + $2::bigint * interval '1 microsecond')
      AND t.lease_expires_at <= ('epoch'::timestamptz + $3::bigint * interval '1 microsecond')
      THEN 'lease_lost' ELSE 'worker_lost' END AS cause
    FROM trials t LEFT JOIN workers w ON w.id = t.worker_id
    WHERE t.state = 'RUNNING' AND t.lease_expires_at < ('epoch'::timestamptz + $1::bigint * interval '1 microsecond')
    FOR UPDATE OF t),
  expired AS (UPDATE trials t SET
    interruptions = cur.interruptions,
    state = CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED'
      WHEN cur.interruptions >= s.max_interruptions THEN 'FAILED' ELSE 'PENDING' END,
    error = CASE WHEN s.state <> 'CANCELLED' AND cur.interruptions >= s.max_interruptions
      THEN 'interrupted ' || cur.interruptions || CASE WHEN cur.interruptions = 1 THEN ' time' ELSE ' times' END
        || ' (max_interruptions), the last by ' || cur.cause ELSE t.error END,
    worker_id = CASE WHEN s.state <> 'CANCELLED' AND cur.interruptions < s.max_interruptions THEN NULL
      ELSE t.worker_id END,
    finished_at = CASE WHEN s.state = 'CANCELLED' OR cur.interruptions >= s.max_interruptions
      THEN ('epoch'::timestamptz + $1::bigint * interval '1 microsecond') ELSE NULL END,
    lease_expires_at = NULL, update_seq = nextval('trial_update_seq')
    FROM sweeps s, cur WHERE s.id = t.sweep_id AND t.id = cur.id
    RETURNING t.id, t.state, t.sweep_id, cur.attempts, cur.worker_id, cur.cause),
  a AS (INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason, cause)
    SELECT id, attempts, worker_id, ('epoch'::timestamptz + $1::bigint * interval '1 microsecond'), state,
    'lease expired', cause FROM expired),
  -- Those made final leave their sweeps' open trials.
  d AS (SELECT sweep_id, count(*) AS n, ('epoch'::timestamptz + $1::bigint * interval '1 microsecond') AS finished_at
    FROM expired WHERE state <> 'PENDING' GROUP BY sweep_id),
  {{close_open_trials}}
SELECT state, cause, count(*) FROM expired GROUP BY state, cause
