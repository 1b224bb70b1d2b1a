-- The lease slow path: trial $1 to worker $2 until $3 (now $4).
UPDATE trials t SET state = 'RUNNING', attempts = attempts + 1, worker_id = $2,
  lease_expires_at = ('epoch'::timestamptz + $3::bigint * interval '1 microsecond'),
  started_at = COALESCE(started_at, ('epoch'::timestamptz + $4::bigint * interval '1 microsecond')),
  last_step = 0, last_train_loss = NULL, last_val_loss = NULL,
  update_seq = nextval('trial_update_seq') WHERE t.id = $1 RETURNING {{trial_columns}}
