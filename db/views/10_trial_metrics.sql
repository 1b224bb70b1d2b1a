-- The step metrics that readers use: one row per (trial, step), the first
-- value of each field. Stored as trial_metric_batches (the steps of one
-- ReportProgress batch that were all new to the trial, as parallel arrays in
-- step order; batches of one trial never overlap) and trial_metric_late (one
-- row per step for everything else: a re-sent or out-of-order batch, a
-- step's evaluation arriving after its training figures); see
-- db/migrations/0005_metric_batches.sql. output_log_z is NULL for batches
-- stored before 0011_diagnostics.sql, z_term (the step's z-loss term, part
-- of train_loss) for those stored before 0016_training_failure.sql.
CREATE VIEW trial_metrics AS
SELECT b.trial_id, m.step,
       COALESCE(m.lr, l.lr) AS lr,
       COALESCE(m.train_loss, l.train_loss) AS train_loss,
       COALESCE(m.val_loss, l.val_loss) AS val_loss,
       COALESCE(m.val_accuracy, l.val_accuracy) AS val_accuracy,
       COALESCE(m.grad_norm, l.grad_norm) AS grad_norm,
       COALESCE(m.tokens_per_s, l.tokens_per_s) AS tokens_per_s,
       COALESCE(m.output_log_z, l.output_log_z) AS output_log_z,
       COALESCE(m.z_term, l.z_term) AS z_term
FROM trial_metric_batches b
CROSS JOIN LATERAL unnest(b.steps, b.lr, b.train_loss, b.val_loss, b.val_accuracy, b.grad_norm, b.tokens_per_s,
                          b.output_log_z, b.z_term)
  AS m (step, lr, train_loss, val_loss, val_accuracy, grad_norm, tokens_per_s, output_log_z, z_term)
LEFT JOIN trial_metric_late l ON l.trial_id = b.trial_id AND l.step = m.step
UNION ALL
SELECT l.trial_id, l.step, l.lr, l.train_loss, l.val_loss, l.val_accuracy, l.grad_norm, l.tokens_per_s,
       l.output_log_z, l.z_term
FROM trial_metric_late l
WHERE NOT EXISTS (SELECT 1 FROM trial_metric_batches b
                  WHERE b.trial_id = l.trial_id AND b.first_step <= l.step AND b.last_step >= l.step
                    AND l.step = ANY (b.steps));
