-- A trial's attempts that did not end in a FinishTrial of its own outcome:
-- leases that expired, and attempts whose trainer the machine killed (the
-- OOM killer, a SIGKILL from outside), which the worker reports with
-- FinishTrialRequest.retry. A trial's last attempt, when it ended with a
-- FinishTrial, is the trial row itself (GetTrial adds it to the history),
-- so the hot FinishTrial statement writes nothing here.
CREATE TABLE trial_attempts (
  trial_id  bigint NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
  attempt   integer NOT NULL,
  worker_id bigint,
  ended_at  timestamptz NOT NULL,
  -- PENDING: queued again after this attempt; FAILED or CANCELLED: final.
  outcome   text NOT NULL CHECK (outcome IN ('PENDING', 'FAILED', 'CANCELLED')),
  reason    text NOT NULL DEFAULT '',
  PRIMARY KEY (trial_id, attempt)
);

-- A worker that registers again under the same name and hostname (it was
-- restarted) supersedes its earlier registrations: they stay for the
-- trials that name them, and `normsweep workers` hides them unless --all.
ALTER TABLE workers ADD COLUMN superseded_by bigint;
UPDATE workers w SET superseded_by = latest.id
  FROM (SELECT name, hostname, max(id) AS id FROM workers GROUP BY name, hostname) latest
  WHERE latest.name = w.name AND latest.hostname = w.hostname AND w.id < latest.id;
CREATE INDEX workers_current ON workers (name, hostname) WHERE superseded_by IS NULL;
