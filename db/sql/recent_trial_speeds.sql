-- For each live worker (a heartbeat at or after $1 epoch microseconds, not
-- superseded): its last $2 trials finished SUCCEEDED with a tokens_per_s
-- above 0, newest first (finished_at, then id), those of its earlier
-- registrations included (the same name and hostname: a restarted worker).
-- One row per trial: the live worker's id, then the trial's columns. One
-- scan of the SUCCEEDED trials (no index on worker_id; SubmitSweep's
-- estimate is its only caller).
WITH live AS (SELECT id, name, hostname FROM workers
    WHERE superseded_by IS NULL
      AND last_heartbeat_at >= ('epoch'::timestamptz + $1::bigint * interval '1 microsecond')),
  ranked AS (SELECT t.*, live.id AS live_worker_id,
      row_number() OVER (PARTITION BY live.id ORDER BY t.finished_at DESC, t.id DESC) AS n
    FROM live JOIN workers w ON w.name = live.name AND w.hostname = live.hostname
    JOIN trials t ON t.worker_id = w.id
    WHERE t.state = 'SUCCEEDED' AND t.tokens_per_s > 0 AND t.finished_at IS NOT NULL)
SELECT t.live_worker_id, {{trial_columns}}
  FROM ranked t WHERE t.n <= $2::integer
  ORDER BY t.live_worker_id, t.n
