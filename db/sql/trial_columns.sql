-- A trial's columns (of trials t), read by these names (ParseTrial in
-- db/pg_rows.cc). config: config_pb in hex after "\x" (encoded here,
-- whatever the server's bytea_output) or, for a trial stored before
-- 0007_trial_config_pb.sql, the config as JSON. Times are epoch microseconds,
-- exactly (no float rounding).
t.id, t.sweep_id, t.trial_index, COALESCE(E'\\x' || encode(t.config_pb, 'hex'), t.config::text) AS config,
t.variant, t.state, t.attempts, COALESCE(t.worker_id, 0) AS worker_id,
(extract(epoch FROM t.lease_expires_at) * 1000000)::bigint AS lease_expires_us, t.last_step,
t.last_train_loss, t.last_val_loss, t.final_val_loss, t.best_val_loss,
t.final_train_loss, t.final_val_accuracy, t.diverged_step, t.tokens_per_s, t.error, t.init_val_loss,
(extract(epoch FROM t.created_at) * 1000000)::bigint AS created_us,
(extract(epoch FROM t.started_at) * 1000000)::bigint AS started_us,
(extract(epoch FROM t.finished_at) * 1000000)::bigint AS finished_us,
t.update_seq, t.boundary_line, t.interruptions, t.unigram_loss, t.val_loss_progress
