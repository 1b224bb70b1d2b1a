-- Every worker (only the live ones when $2; live: a heartbeat at or after
-- $1, not superseded), one row per (worker, device) in device order; a worker
-- without devices has one row with a NULL device. One statement, so one
-- snapshot.
WITH running AS (SELECT worker_id, count(*) AS n FROM trials WHERE state = 'RUNNING'
    AND worker_id IS NOT NULL GROUP BY worker_id)
SELECT w.id, w.name, w.hostname, (extract(epoch FROM w.registered_at) * 1000000)::bigint,
  (extract(epoch FROM w.last_heartbeat_at) * 1000000)::bigint,
  w.last_heartbeat_at >= ('epoch'::timestamptz + $1::bigint * interval '1 microsecond') AND w.superseded_by IS NULL,
  COALESCE(running.n, 0), d.device, COALESCE(w.superseded_by, 0)
  FROM workers w LEFT JOIN running ON running.worker_id = w.id
  LEFT JOIN LATERAL unnest(w.devices) WITH ORDINALITY AS d(device, n) ON true
  WHERE NOT $2::boolean OR (w.last_heartbeat_at >= ('epoch'::timestamptz + $1::bigint * interval '1 microsecond')
    AND w.superseded_by IS NULL)
  ORDER BY w.id, d.n
