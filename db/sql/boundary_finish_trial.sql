-- FinishTrial of one boundary_search trial, with its line locked (trial $1,
-- worker $2, attempt $3, outcome $4, final/best val loss $5/$6, final train
-- loss $7, val accuracy $8, diverged step $9, tokens/s $10, error $11, now
-- $12, init_val_loss $13, unigram_loss $14, val_loss_progress $15): as finish_trials.sql, for the
-- lease's holder only.
-- Returns what a follow-up copies; no row when the lease is not held.
UPDATE trials t SET state = $4, final_val_loss = $5::float8, best_val_loss = $6::float8,
    final_train_loss = $7::float8, final_val_accuracy = $8::float8, diverged_step = $9::int,
    tokens_per_s = $10::float8, error = $11, init_val_loss = $13::float8, unigram_loss = $14::float8,
    val_loss_progress = $15::float8, lease_expires_at = NULL,
    finished_at = 'epoch'::timestamptz + $12::bigint * interval '1 microsecond',
    update_seq = nextval('trial_update_seq')
  WHERE t.id = $1 AND t.worker_id = $2 AND t.attempts = $3 AND t.state = 'RUNNING'
    AND t.boundary_line IS NOT NULL
  RETURNING encode(t.config_pb, 'hex') AS config_pb
