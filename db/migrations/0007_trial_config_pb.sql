-- The trial's config a second time, as normsweep.v1.TrainConfig in protobuf's
-- binary encoding, for the scheduler: every LeaseTrial and FinishTrial
-- returns the trial with its config, and parsing it back from JSON was about
-- a tenth of the scheduler's CPU under load (protobuf's JSON parser; the
-- binary form parses in about a microsecond), besides PostgreSQL's jsonb to
-- text conversion. Written with the row and never changed, like config,
-- which stays the column to query in SQL. NULL for trials created before
-- this migration; the scheduler then reads config.
ALTER TABLE trials ADD COLUMN config_pb bytea;
