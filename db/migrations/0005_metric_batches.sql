-- Step metrics stored one row per progress batch (measured with
-- tests/bench/scheduler_load: a row per step cost PostgreSQL about 10 us per
-- step in heap and index inserts, half of a trial's database time).
--
-- * trial_metric_batches: the steps of one ReportProgress batch that were all
--   new to the trial (above its last_step), as parallel arrays in step order;
--   batches of one trial never overlap (first_step..last_step).
-- * trial_metric_late: one row per step for everything else: a batch re-sent
--   or arriving out of order, or a step's evaluation coming after its
--   training figures. Only the fields that the batches lack are stored here.
--   The rows stored before this migration stay here.
-- * trial_metrics: the view that readers use, as before: one row per (trial,
--   step), the first value of each field.
ALTER TABLE trial_metrics RENAME TO trial_metric_late;
ALTER INDEX trial_metrics_pkey RENAME TO trial_metric_late_pkey;

CREATE TABLE trial_metric_batches (
  trial_id     bigint NOT NULL,
  first_step   integer NOT NULL,
  last_step    integer NOT NULL,
  steps        integer[] NOT NULL,
  lr           double precision[] NOT NULL,
  train_loss   double precision[] NOT NULL,
  val_loss     double precision[] NOT NULL,
  val_accuracy double precision[] NOT NULL,
  grad_norm    double precision[] NOT NULL,
  tokens_per_s double precision[] NOT NULL,
  PRIMARY KEY (trial_id, first_step),
  CHECK (first_step <= last_step)
);

CREATE VIEW trial_metrics AS
SELECT b.trial_id, m.step,
       COALESCE(m.lr, l.lr) AS lr,
       COALESCE(m.train_loss, l.train_loss) AS train_loss,
       COALESCE(m.val_loss, l.val_loss) AS val_loss,
       COALESCE(m.val_accuracy, l.val_accuracy) AS val_accuracy,
       COALESCE(m.grad_norm, l.grad_norm) AS grad_norm,
       COALESCE(m.tokens_per_s, l.tokens_per_s) AS tokens_per_s
FROM trial_metric_batches b
CROSS JOIN LATERAL unnest(b.steps, b.lr, b.train_loss, b.val_loss, b.val_accuracy, b.grad_norm, b.tokens_per_s)
  AS m (step, lr, train_loss, val_loss, val_accuracy, grad_norm, tokens_per_s)
LEFT JOIN trial_metric_late l ON l.trial_id = b.trial_id AND l.step = m.step
UNION ALL
SELECT l.trial_id, l.step, l.lr, l.train_loss, l.val_loss, l.val_accuracy, l.grad_norm, l.tokens_per_s
FROM trial_metric_late l
WHERE NOT EXISTS (SELECT 1 FROM trial_metric_batches b
                  WHERE b.trial_id = l.trial_id AND b.first_step <= l.step AND b.last_step >= l.step
                    AND l.step = ANY (b.steps));
