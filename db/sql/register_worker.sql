-- One statement: the new row, and the earlier registrations of the same
-- name and hostname marked superseded by it.
WITH w AS (INSERT INTO workers (name, hostname, devices, registered_at, last_heartbeat_at)
    VALUES ($1, $2, $3::text[], ('epoch'::timestamptz + $4::bigint * interval '1 microsecond'),
      ('epoch'::timestamptz + $4::bigint * interval '1 microsecond')) RETURNING id),
  old AS (UPDATE workers o SET superseded_by = w.id FROM w
    WHERE o.name = $1 AND o.hostname = $2 AND o.superseded_by IS NULL AND o.id <> w.id)
SELECT id FROM w
