-- The lease slow path's next candidate: the first unlocked PENDING trial in
-- queue order outside the sweeps $1 (found at max_concurrent_trials).
SELECT t.id, t.sweep_id, s.max_concurrent_trials FROM trials t JOIN sweeps s ON s.id = t.sweep_id
  WHERE t.state = 'PENDING' AND s.state = 'RUNNING' AND t.sweep_id <> ALL($1::bigint[])
  ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED
