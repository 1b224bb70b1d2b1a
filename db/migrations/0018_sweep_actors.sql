-- Who submitted and who cancelled a sweep (Sweep.submitted_by and
-- Sweep.cancelled_by): the caller's name from the scheduler's token roles
-- file (common/token_roles.h), '' when unknown (the single shared API token,
-- no token at all, a sweep stored before this migration) and cancelled_by ''
-- while the sweep was not cancelled.
--
-- Safe under an older replica (docs/upgrades.md): columns are only added,
-- each with a constant default (no table rewrite, and an older replica's
-- INSERTs and UPDATEs that do not name them still succeed); no view changes.
ALTER TABLE sweeps ADD COLUMN submitted_by text NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN cancelled_by text NOT NULL DEFAULT '';
