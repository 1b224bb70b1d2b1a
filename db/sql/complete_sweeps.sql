-- Marks sweeps COMPLETED whose trials are all final ($1 their ids, empty:
-- all; $2 now): a sweep created without trials, and the periodic backstop for
-- sweeps.open_trials.
UPDATE sweeps s SET state = 'COMPLETED', open_trials = 0,
  finished_at = ('epoch'::timestamptz + $2::bigint * interval '1 microsecond')
  WHERE (cardinality($1::bigint[]) = 0 OR s.id = ANY($1::bigint[])) AND s.state = 'RUNNING'
  AND NOT EXISTS (SELECT 1 FROM trials t WHERE t.sweep_id = s.id AND t.state IN ('PENDING', 'RUNNING'))
