-- FinishTrial with retry (trial $1, worker $2, attempt $3, reason $4, the
-- interruption's cause $5: '' for the trial's own failure; now $6): the
-- attempt is recorded and the trial re-queued, failed (its count spent) or
-- cancelled (its sweep was) in one statement, by the rule of
-- MemoryStore::EndAttempt: an own failure counts against max_attempts
-- (attempts - interruptions), an interruption against max_interruptions.
-- The errors' words are RetriedAttemptError's and InterruptedError's. No row
-- when the lease is not held.
WITH cur AS (SELECT t.id, t.attempts, t.worker_id, n.interruptions, t.attempts - n.interruptions AS own,
    CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED'
      WHEN $5 = '' AND t.attempts - n.interruptions >= s.max_attempts THEN 'FAILED'
      WHEN $5 <> '' AND n.interruptions >= s.max_interruptions THEN 'FAILED'
      ELSE 'PENDING' END AS next_state
    FROM trials t JOIN sweeps s ON s.id = t.sweep_id,
      LATERAL (SELECT t.interruptions + CASE WHEN $5 = '' THEN 0 ELSE 1 END AS interruptions) n
    WHERE t.id = $1 AND t.worker_id = $2 AND t.attempts = $3 AND t.state = 'RUNNING' FOR UPDATE OF t),
  a AS (INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason, cause)
    SELECT id, attempts, worker_id, ('epoch'::timestamptz + $6::bigint * interval '1 microsecond'), next_state, $4, $5
    FROM cur),
  u AS (UPDATE trials t SET state = cur.next_state, interruptions = cur.interruptions,
    error = CASE WHEN cur.next_state <> 'FAILED' THEN t.error
      WHEN $5 = '' THEN $4 || ' after ' || cur.own || CASE WHEN cur.own = 1 THEN ' attempt' ELSE ' attempts' END
      ELSE 'interrupted ' || cur.interruptions || CASE WHEN cur.interruptions = 1 THEN ' time' ELSE ' times' END
        || ' (max_interruptions), the last by ' || $5 END,
    worker_id = CASE WHEN cur.next_state = 'PENDING' THEN NULL ELSE t.worker_id END,
    lease_expires_at = NULL,
    finished_at = CASE WHEN cur.next_state = 'PENDING' THEN NULL
      ELSE ('epoch'::timestamptz + $6::bigint * interval '1 microsecond') END,
    update_seq = nextval('trial_update_seq')
    FROM cur WHERE t.id = cur.id RETURNING {{trial_columns}}, t.sweep_id AS ns_sweep_id),
  d AS (SELECT ns_sweep_id AS sweep_id, count(*) AS n,
    ('epoch'::timestamptz + $6::bigint * interval '1 microsecond') AS finished_at FROM u
    WHERE (SELECT next_state FROM cur) <> 'PENDING' GROUP BY ns_sweep_id),
  {{close_open_trials}}
SELECT * FROM u
