-- ReportProgress for a group of requests (distinct trials), in one statement:
-- the lease checks, the trials' progress and the inserts commit together or
-- not at all. r: a row per request ($1-$11; lo..hi its points in the flat
-- arrays of m, $12-$18, $24 and $33); $19-$23 the layer gradient norms and
-- $25-$32 the layer diagnostics, by request (first value kept per (trial,
-- step, layer), so a re-sent batch stores nothing again). A
-- batch's steps above the trial's last_step (all of them, usually) become one
-- trial_metric_batches row, sliced from the flat arrays; its other steps (a
-- re-sent or late batch, an evaluation that missed its step's batch) go to
-- trial_metric_late one by one, with only the fields that the stored batches
-- lack (0005_metric_batches.sql). Returns (i, sweep cancelled) of each
-- request written.
WITH r AS (SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::int[], $5::int[], $6::int[],
    $7::float8[], $8::int[], $9::float8[], $10::int[], $11::int[])
    AS r(i, trial_id, worker_id, attempt, max_step, train_step, train_loss, val_step, val_loss, lo, hi)),
  m AS (SELECT $12::int[] AS step, $13::float8[] AS lr, $14::float8[] AS train_loss, $15::float8[] AS val_loss,
    $16::float8[] AS val_accuracy, $17::float8[] AS grad_norm, $18::float8[] AS tokens_per_s,
    $24::float8[] AS output_log_z, $33::float8[] AS z_term),
  t AS (UPDATE trials tr SET last_step = GREATEST(tr.last_step, r.max_step),
    last_train_loss = CASE WHEN r.train_step >= tr.last_step THEN r.train_loss ELSE tr.last_train_loss END,
    last_val_loss = CASE WHEN r.val_step >= tr.last_step THEN r.val_loss ELSE tr.last_val_loss END,
    update_seq = nextval('trial_update_seq')
    -- old is the trial's row as this statement's snapshot saw it; tr is
    -- re-read if a concurrent statement updated it meanwhile. Their
    -- last_step differ when another statement stored progress since the
    -- snapshot: what is new was decided on stale data, so the trial is
    -- left out here and the caller runs it again.
    -- The state test is written so that the planner cannot match it to the
    -- partial index trials_leases (WHERE state = 'RUNNING'): statistics
    -- from when the sweep was all PENDING made it loop over that whole
    -- index, dead entries included, once per trial, instead of looking each
    -- trial up by id.
    FROM r JOIN trials old ON old.id = r.trial_id
    WHERE tr.id = r.trial_id AND tr.worker_id = r.worker_id AND tr.attempts = r.attempt
    AND COALESCE(tr.state, '') = 'RUNNING' AND tr.last_step = old.last_step
    RETURNING r.i, r.lo, r.hi, tr.id, tr.sweep_id, old.last_step AS old_last),
  -- f: where the batch's new steps begin (its steps are in order); only a
  -- batch that starts at or below last_step needs them counted.
  tf AS (SELECT t.*, CASE WHEN t.lo > t.hi OR m.step[t.lo] > t.old_last THEN t.lo
    ELSE t.lo + (SELECT count(*)::int FROM unnest(m.step[t.lo:t.hi]) AS x(s) WHERE x.s <= t.old_last) END AS f
    FROM t, m),
  b AS (INSERT INTO trial_metric_batches (trial_id, first_step, last_step, steps, lr, train_loss, val_loss,
    val_accuracy, grad_norm, tokens_per_s, output_log_z, z_term)
    SELECT t.id, m.step[t.f], m.step[t.hi], m.step[t.f:t.hi], m.lr[t.f:t.hi], m.train_loss[t.f:t.hi],
    m.val_loss[t.f:t.hi], m.val_accuracy[t.f:t.hi], m.grad_norm[t.f:t.hi], m.tokens_per_s[t.f:t.hi],
    m.output_log_z[t.f:t.hi], m.z_term[t.f:t.hi]
    FROM tf t, m WHERE t.f <= t.hi),
  u AS (SELECT t.id AS trial_id, m.step[k] AS step, m.lr[k] AS lr, m.train_loss[k] AS train_loss,
    m.val_loss[k] AS val_loss, m.val_accuracy[k] AS val_accuracy, m.grad_norm[k] AS grad_norm,
    m.tokens_per_s[k] AS tokens_per_s, m.output_log_z[k] AS output_log_z,
    m.z_term[k] AS z_term, s.*
    FROM tf t CROSS JOIN m CROSS JOIN LATERAL generate_series(t.lo, t.f - 1) AS k
    LEFT JOIN LATERAL (SELECT true AS s_in, mb.lr[j] AS s_lr, mb.train_loss[j] AS s_train_loss,
      mb.val_loss[j] AS s_val_loss, mb.val_accuracy[j] AS s_val_accuracy, mb.grad_norm[j] AS s_grad_norm,
      mb.tokens_per_s[j] AS s_tokens_per_s, mb.output_log_z[j] AS s_output_log_z,
      mb.z_term[j] AS s_z_term
      FROM trial_metric_batches mb CROSS JOIN LATERAL array_position(mb.steps, m.step[k]) AS j
      WHERE mb.trial_id = t.id AND mb.first_step <= m.step[k] AND mb.last_step >= m.step[k]
      AND j IS NOT NULL) s ON true
    WHERE t.lo < t.f),
  l AS (INSERT INTO trial_metric_late AS tm (trial_id, step, lr, train_loss, val_loss, val_accuracy,
    grad_norm, tokens_per_s, output_log_z, z_term)
    SELECT u.trial_id, u.step, CASE WHEN u.s_lr IS NULL THEN u.lr END,
    CASE WHEN u.s_train_loss IS NULL THEN u.train_loss END, CASE WHEN u.s_val_loss IS NULL THEN u.val_loss END,
    CASE WHEN u.s_val_accuracy IS NULL THEN u.val_accuracy END,
    CASE WHEN u.s_grad_norm IS NULL THEN u.grad_norm END,
    CASE WHEN u.s_tokens_per_s IS NULL THEN u.tokens_per_s END,
    CASE WHEN u.s_output_log_z IS NULL THEN u.output_log_z END,
    CASE WHEN u.s_z_term IS NULL THEN u.z_term END FROM u
    WHERE u.s_in IS NULL OR (u.s_lr IS NULL AND u.lr IS NOT NULL)
    OR (u.s_train_loss IS NULL AND u.train_loss IS NOT NULL) OR (u.s_val_loss IS NULL AND u.val_loss IS NOT NULL)
    OR (u.s_val_accuracy IS NULL AND u.val_accuracy IS NOT NULL)
    OR (u.s_grad_norm IS NULL AND u.grad_norm IS NOT NULL)
    OR (u.s_tokens_per_s IS NULL AND u.tokens_per_s IS NOT NULL)
    OR (u.s_output_log_z IS NULL AND u.output_log_z IS NOT NULL)
    OR (u.s_z_term IS NULL AND u.z_term IS NOT NULL)
    ON CONFLICT (trial_id, step) DO UPDATE SET
    lr = COALESCE(tm.lr, EXCLUDED.lr), train_loss = COALESCE(tm.train_loss, EXCLUDED.train_loss),
    val_loss = COALESCE(tm.val_loss, EXCLUDED.val_loss),
    val_accuracy = COALESCE(tm.val_accuracy, EXCLUDED.val_accuracy),
    grad_norm = COALESCE(tm.grad_norm, EXCLUDED.grad_norm),
    tokens_per_s = COALESCE(tm.tokens_per_s, EXCLUDED.tokens_per_s),
    output_log_z = COALESCE(tm.output_log_z, EXCLUDED.output_log_z),
    z_term = COALESCE(tm.z_term, EXCLUDED.z_term)
    -- A re-sent batch fills nothing, so it writes nothing.
    WHERE (tm.lr IS NULL AND EXCLUDED.lr IS NOT NULL)
    OR (tm.train_loss IS NULL AND EXCLUDED.train_loss IS NOT NULL)
    OR (tm.val_loss IS NULL AND EXCLUDED.val_loss IS NOT NULL)
    OR (tm.val_accuracy IS NULL AND EXCLUDED.val_accuracy IS NOT NULL)
    OR (tm.grad_norm IS NULL AND EXCLUDED.grad_norm IS NOT NULL)
    OR (tm.tokens_per_s IS NULL AND EXCLUDED.tokens_per_s IS NOT NULL)
    OR (tm.output_log_z IS NULL AND EXCLUDED.output_log_z IS NOT NULL)
    OR (tm.z_term IS NULL AND EXCLUDED.z_term IS NOT NULL)),
  g AS (INSERT INTO layer_grad_norms (trial_id, step, layer, matrix, norm)
    SELECT t.id, g.step, g.layer, g.matrix, g.norm FROM unnest($19::int[], $20::int[], $21::int[],
    $22::text[], $23::float8[]) AS g(i, step, layer, matrix, norm) JOIN t ON t.i = g.i ON CONFLICT DO NOTHING),
  d AS (INSERT INTO layer_diagnostics (trial_id, step, layer, max_attn_logit, update_ratio_qkv, update_ratio_proj,
    update_ratio_fc1, update_ratio_fc2)
    SELECT t.id, d.step, d.layer, d.max_attn_logit, d.qkv, d.proj, d.fc1, d.fc2 FROM unnest($25::int[], $26::int[],
    $27::int[], $28::float8[], $29::float8[], $30::float8[], $31::float8[], $32::float8[])
    AS d(i, step, layer, max_attn_logit, qkv, proj, fc1, fc2) JOIN t ON t.i = d.i ON CONFLICT DO NOTHING)
SELECT t.i, s.state = 'CANCELLED' FROM t JOIN sweeps s ON s.id = t.sweep_id
