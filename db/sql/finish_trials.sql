-- FinishTrial for a group of trials (distinct), in one statement: $1-$16 a
-- row per request, each array of the type it is cast to. Returns i and the
-- trial of each request written.
WITH f AS (SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::int[], $5::text[],
    $6::float8[], $7::float8[], $8::float8[], $9::float8[], $10::int[], $11::float8[], $12::text[], $13::bigint[],
    $14::float8[], $15::float8[], $16::float8[])
    AS f(i, trial_id, worker_id, attempt, outcome, fvl, bvl, ftl, fva, ds, tps, err, now_us, ivl, ul, vlp)),
  u AS (UPDATE trials t SET state = f.outcome, final_val_loss = f.fvl, best_val_loss = f.bvl,
    final_train_loss = f.ftl, final_val_accuracy = f.fva, diverged_step = f.ds, tokens_per_s = f.tps,
    error = f.err, init_val_loss = f.ivl, unigram_loss = f.ul, val_loss_progress = f.vlp,
    lease_expires_at = NULL,
    finished_at = 'epoch'::timestamptz + f.now_us * interval '1 microsecond',
    update_seq = nextval('trial_update_seq')
    -- Trials looked up by id (= ANY: a generic plan that does so, instead
    -- of planning each call afresh), not through trials_leases (see
    -- report_progress.sql).
    FROM f WHERE t.id = ANY($2::bigint[]) AND t.id = f.trial_id AND t.worker_id = f.worker_id
    AND t.attempts = f.attempt AND COALESCE(t.state, '') = 'RUNNING'
    -- A boundary_search trial is finished apart, with its line's follow-up
    -- (db/boundary_store.h); the grid's path stays this one statement.
    AND t.boundary_line IS NULL RETURNING f.i, {{trial_columns}},
    f.now_us AS ns_now_us, t.sweep_id AS ns_sweep_id),
  -- The sweeps' open trials go down by those just made final.
  d AS (SELECT ns_sweep_id AS sweep_id, count(*) AS n,
    'epoch'::timestamptz + max(ns_now_us) * interval '1 microsecond' AS finished_at
    FROM u GROUP BY ns_sweep_id),
  {{close_open_trials}}
SELECT * FROM u
