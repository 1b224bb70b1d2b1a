-- ExportSweep's cursor (issue 25; the design is in db/export.h): each row
-- that an export reads carries export_xid, the id of the transaction that
-- last wrote it. An export reads, in one REPEATABLE READ snapshot, the rows
-- whose export_xid is below the snapshot's xmin (every transaction below it
-- has ended, so those rows are all there and no more can come), in order of
-- (export_xid, trial, step, layer); a cursor is a position in that order. A
-- sequence number would not do: sequence order is not commit order.
--
-- Safe on large tables and during a rolling upgrade: ADD COLUMN without a
-- default and SET DEFAULT rewrite nothing; the rows stored before this
-- migration keep NULL, read as 0 (older than any transaction still
-- running), so nothing is backfilled. An older replica that inserts without
-- naming the column gets the DEFAULT; updates are stamped by triggers, which
-- fire for its statements too. The trials' trigger fires only when
-- update_seq changes (the changes WatchSweep reports), not on a lease
-- renewal.
CREATE FUNCTION normsweep_export_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.export_xid := pg_current_xact_id();
  RETURN NEW;
END
$$;

ALTER TABLE trials ADD COLUMN export_xid xid8;
ALTER TABLE trials ALTER COLUMN export_xid SET DEFAULT pg_current_xact_id();
CREATE TRIGGER trials_export_xid BEFORE UPDATE ON trials FOR EACH ROW
  WHEN (OLD.update_seq IS DISTINCT FROM NEW.update_seq) EXECUTE FUNCTION normsweep_export_touch();

ALTER TABLE trial_metric_batches ADD COLUMN export_xid xid8;
ALTER TABLE trial_metric_batches ALTER COLUMN export_xid SET DEFAULT pg_current_xact_id();
CREATE TRIGGER trial_metric_batches_export_xid BEFORE UPDATE ON trial_metric_batches FOR EACH ROW
  EXECUTE FUNCTION normsweep_export_touch();

ALTER TABLE trial_metric_late ADD COLUMN export_xid xid8;
ALTER TABLE trial_metric_late ALTER COLUMN export_xid SET DEFAULT pg_current_xact_id();
CREATE TRIGGER trial_metric_late_export_xid BEFORE UPDATE ON trial_metric_late FOR EACH ROW
  EXECUTE FUNCTION normsweep_export_touch();

ALTER TABLE layer_grad_norms ADD COLUMN export_xid xid8;
ALTER TABLE layer_grad_norms ALTER COLUMN export_xid SET DEFAULT pg_current_xact_id();

ALTER TABLE layer_diagnostics ADD COLUMN export_xid xid8;
ALTER TABLE layer_diagnostics ALTER COLUMN export_xid SET DEFAULT pg_current_xact_id();

ALTER TABLE trial_attempts ADD COLUMN export_xid xid8;
ALTER TABLE trial_attempts ALTER COLUMN export_xid SET DEFAULT pg_current_xact_id();
CREATE TRIGGER trial_attempts_export_xid BEFORE UPDATE ON trial_attempts FOR EACH ROW
  EXECUTE FUNCTION normsweep_export_touch();
