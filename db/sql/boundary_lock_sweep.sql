-- The state and spec of sweep $1, its row locked (after the trial's, as
-- every statement that finishes trials does): a concurrent CancelSweep waits,
-- and then cancels a follow-up created here too.
SELECT state, spec::text FROM sweeps WHERE id = $1 FOR UPDATE
