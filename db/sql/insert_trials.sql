-- The PENDING trials of sweep $1 (priority $2, created at $3), a row per
-- element of the arrays $4-$11; config_pb ($11) in hex.
INSERT INTO trials (sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, variant,
    config, config_pb, priority, state, created_at)
  SELECT $1, u.i, u.p, u.w, u.lr, u.s, u.v, u.c::jsonb, decode(u.pb, 'hex'), $2, 'PENDING',
    ('epoch'::timestamptz + $3::bigint * interval '1 microsecond')
  FROM unnest($4::int[], $5::text[], $6::int[], $7::float8[], $8::int[], $9::text[], $10::text[],
    $11::text[]) AS u(i, p, w, lr, s, v, c, pb)
