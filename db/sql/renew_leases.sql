-- Heartbeat: worker $1's leases of trials $3 (attempts $4) until $2. Returns
-- each one renewed, and whether its sweep was cancelled.
UPDATE trials t SET lease_expires_at = ('epoch'::timestamptz + $2::bigint * interval '1 microsecond')
  FROM unnest($3::bigint[], $4::int[]) AS l(id, attempt), sweeps s
  -- COALESCE: by id, not through trials_leases (see report_progress.sql).
  WHERE t.id = l.id AND t.attempts = l.attempt AND t.worker_id = $1 AND COALESCE(t.state, '') = 'RUNNING'
  AND s.id = t.sweep_id RETURNING t.id, s.state = 'CANCELLED'
