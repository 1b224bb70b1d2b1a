-- A follow-up trial of line $2 of sweep $1 at lr $3 (config JSON $4, config_pb
-- in hex $5, now $6), a copy of trial $7's line settings: the sweep's next
-- trial_index, counted in its trial_count and open trials.
WITH s AS (UPDATE sweeps SET trial_count = trial_count + 1, open_trials = open_trials + 1
    WHERE id = $1 RETURNING trial_count - 1 AS idx)
INSERT INTO trials (sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, variant, config, config_pb,
    priority, state, created_at, boundary_line)
  SELECT $1, s.idx, src.placement, src.warmup_steps, $3::float8, src.seed, src.variant, $4::jsonb,
    decode($5, 'hex'), src.priority, 'PENDING', 'epoch'::timestamptz + $6::bigint * interval '1 microsecond', $2
  FROM s, trials src WHERE src.id = $7
  RETURNING id
