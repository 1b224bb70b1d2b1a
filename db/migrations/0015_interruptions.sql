-- Interruptions apart from attempts (SweepSpec.max_interruptions,
-- Trial.interruptions, TrialAttempt.interruption). An attempt that ended
-- through no fault of the trial (its worker lost, its lease lost in a
-- database outage, no scheduler reachable, a signal from outside, a drained
-- worker) is an interruption: it counts against the sweep's
-- max_interruptions, not against max_attempts, which counts the trial's own
-- failures only (trials.attempts - trials.interruptions).
--
-- Safe under an older replica (docs/upgrades.md): columns are only added,
-- each with a constant default (no table rewrite, and an older replica's
-- INSERTs that do not name them still succeed); no view changes its columns.
ALTER TABLE sweeps ADD COLUMN max_interruptions integer NOT NULL DEFAULT 20
  CHECK (max_interruptions > 0);
ALTER TABLE trials ADD COLUMN interruptions integer NOT NULL DEFAULT 0
  CHECK (interruptions >= 0);
-- '' for the trial's own failure (or an attempt recorded by an older
-- replica, which did not tell them apart).
ALTER TABLE trial_attempts ADD COLUMN cause text NOT NULL DEFAULT ''
  CHECK (cause IN ('', 'worker_lost', 'lease_lost', 'scheduler_restart', 'external_signal', 'worker_drained'));

-- The attempts recorded before: an expired lease was its worker's loss, and
-- a retry (FinishTrialRequest.retry) was only ever sent for a trainer killed
-- from outside. Their trials' counts follow, so that a trial still running
-- gets back the attempts these took.
UPDATE trial_attempts SET cause = CASE WHEN reason = 'lease expired' THEN 'worker_lost' ELSE 'external_signal' END;
UPDATE trials t SET interruptions = a.n
  FROM (SELECT trial_id, count(*) AS n FROM trial_attempts GROUP BY trial_id) a
  WHERE a.trial_id = t.id;
