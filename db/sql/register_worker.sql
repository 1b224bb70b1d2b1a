-- One statement: the new row, the earlier registrations of the same name
-- and hostname marked superseded by it, and their leases ended: the
-- restarted worker runs none of their trials (its trainers died with the old
-- process), so the next expiry queues them again instead of letting them wait
-- out the lease.
WITH w AS (INSERT INTO workers (name, hostname, devices, registered_at, last_heartbeat_at)
    VALUES ($1, $2, $3::text[], ('epoch'::timestamptz + $4::bigint * interval '1 microsecond'),
      ('epoch'::timestamptz + $4::bigint * interval '1 microsecond')) RETURNING id),
  old AS (UPDATE workers o SET superseded_by = w.id FROM w
    WHERE o.name = $1 AND o.hostname = $2 AND o.superseded_by IS NULL AND o.id <> w.id RETURNING o.id),
  released AS (UPDATE trials t
    SET lease_expires_at = ('epoch'::timestamptz + ($4::bigint - 1) * interval '1 microsecond')
    FROM old WHERE t.worker_id = old.id AND t.state = 'RUNNING')
SELECT id FROM w
