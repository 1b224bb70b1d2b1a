-- LeaseTrial for a group of callers ($1 worker ids, $2 their now, $3 their
-- lease ends, epoch microseconds): the first unlocked PENDING trials in queue
-- order, the k-th leased to the k-th known worker. One row per caller, by
-- pos: known_worker, and either the leased trial or lim > 0, a sweep with
-- max_concurrent_trials (the slow path).
WITH wk AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY
    AS wk(worker_id, now_us, expires_us, pos)),
  w AS (SELECT wk.* FROM wk WHERE EXISTS (SELECT 1 FROM workers WHERE workers.id = wk.worker_id)),
  wn AS (SELECT w.*, row_number() OVER (ORDER BY w.pos) AS k FROM w),
  -- The queue's head, read in order from the trials_queue index: the
  -- sweep's state is a per-row filter and its limit is joined after the
  -- LIMIT, so the planner has no join that it could hash over every
  -- PENDING trial (it did, O(queue) per lease, on a table without
  -- statistics).
  c AS (SELECT t.id, t.priority, t.sweep_id FROM trials t
    WHERE t.state = 'PENDING' AND (SELECT s.state FROM sweeps s WHERE s.id = t.sweep_id) = 'RUNNING'
    ORDER BY t.priority DESC, t.id LIMIT (SELECT count(*) FROM w) FOR UPDATE OF t SKIP LOCKED),
  -- The sweep's limit by its primary key: as a join, the generic plan
  -- hashes a sequential scan of sweeps, whose rows FinishTrial updates
  -- all the time (their dead versions cost every lease group).
  cn AS (SELECT c.id, (SELECT s.max_concurrent_trials FROM sweeps s WHERE s.id = c.sweep_id) AS lim,
    row_number() OVER (ORDER BY c.priority DESC, c.id) AS k FROM c),
  pick AS (SELECT cn.id, cn.lim, wn.worker_id, wn.now_us, wn.expires_us, wn.pos FROM cn JOIN wn ON wn.k = cn.k),
  u AS (UPDATE trials t SET state = 'RUNNING', attempts = t.attempts + 1, worker_id = pick.worker_id,
    lease_expires_at = 'epoch'::timestamptz + pick.expires_us * interval '1 microsecond',
    started_at = COALESCE(t.started_at, 'epoch'::timestamptz + pick.now_us * interval '1 microsecond'),
    last_step = 0, last_train_loss = NULL, last_val_loss = NULL, update_seq = nextval('trial_update_seq')
    FROM pick WHERE t.id = pick.id AND pick.lim = 0 AND t.state = 'PENDING'
    RETURNING pick.pos AS leased_pos, {{trial_columns}})
SELECT wk.pos, w.worker_id IS NOT NULL AS known_worker, pick.lim, u.* FROM wk
  LEFT JOIN w ON w.pos = wk.pos LEFT JOIN pick ON pick.pos = wk.pos LEFT JOIN u ON u.leased_pos = wk.pos
  ORDER BY wk.pos
