-- Fused trials: those of trials $1 of sweep $2 still PENDING, in index order,
-- at most $6 of them (NULL: no limit), leased to worker $3 until $4 (now $5),
-- as lease_trial.sql leases one. SKIP LOCKED passes over a trial another
-- leaser holds; the UPDATE's own PENDING check over one it leased and
-- committed meanwhile (READ COMMITTED re-reads the row): never two leases.
WITH c AS (SELECT t.id FROM trials t
    WHERE t.id = ANY($1::bigint[]) AND t.sweep_id = $2 AND t.state = 'PENDING'
    ORDER BY t.trial_index LIMIT $6::bigint FOR UPDATE OF t SKIP LOCKED)
UPDATE trials t SET state = 'RUNNING', attempts = t.attempts + 1, worker_id = $3,
  lease_expires_at = ('epoch'::timestamptz + $4::bigint * interval '1 microsecond'),
  started_at = COALESCE(started_at, ('epoch'::timestamptz + $5::bigint * interval '1 microsecond')),
  last_step = 0, last_train_loss = NULL, last_val_loss = NULL,
  update_seq = nextval('trial_update_seq')
  FROM c WHERE t.id = c.id AND t.state = 'PENDING' RETURNING {{trial_columns}}
