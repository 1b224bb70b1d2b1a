-- Instability diagnostics (issue 16) and the loss at initialisation.
--
-- l0, the validation loss before the first update (the trainer evaluates at
-- step 0), is kept on the trial (FinishTrial's result.init_val_loss), and
-- also arrives as the step-0 row of trial_metrics.
ALTER TABLE trials ADD COLUMN init_val_loss double precision;

-- The output logits' mean log-sum-exp (log Z) at each evaluation.
-- trial_metrics is a view (0005_metric_batches.sql) over trial_metric_batches
-- (arrays by step; NULL for the batches stored before this migration) and
-- trial_metric_late: the column goes into both, and the view gains it last,
-- as CREATE OR REPLACE VIEW requires.
ALTER TABLE trial_metric_batches ADD COLUMN output_log_z double precision[];
ALTER TABLE trial_metric_late ADD COLUMN output_log_z double precision;
CREATE OR REPLACE VIEW trial_metrics AS
SELECT b.trial_id, m.step,
       COALESCE(m.lr, l.lr) AS lr,
       COALESCE(m.train_loss, l.train_loss) AS train_loss,
       COALESCE(m.val_loss, l.val_loss) AS val_loss,
       COALESCE(m.val_accuracy, l.val_accuracy) AS val_accuracy,
       COALESCE(m.grad_norm, l.grad_norm) AS grad_norm,
       COALESCE(m.tokens_per_s, l.tokens_per_s) AS tokens_per_s,
       COALESCE(m.output_log_z, l.output_log_z) AS output_log_z
FROM trial_metric_batches b
CROSS JOIN LATERAL unnest(b.steps, b.lr, b.train_loss, b.val_loss, b.val_accuracy, b.grad_norm, b.tokens_per_s,
                          b.output_log_z)
  AS m (step, lr, train_loss, val_loss, val_accuracy, grad_norm, tokens_per_s, output_log_z)
LEFT JOIN trial_metric_late l ON l.trial_id = b.trial_id AND l.step = m.step
UNION ALL
SELECT l.trial_id, l.step, l.lr, l.train_loss, l.val_loss, l.val_accuracy, l.grad_norm, l.tokens_per_s,
       l.output_log_z
FROM trial_metric_late l
WHERE NOT EXISTS (SELECT 1 FROM trial_metric_batches b
                  WHERE b.trial_id = l.trial_id AND b.first_step <= l.step AND b.last_step >= l.step
                    AND l.step = ANY (b.steps));

-- Per block and evaluation step: the largest attention logit and the
-- update-to-weight RMS ratio of each matrix (NULL at step 0, before any
-- update). A re-sent batch changes nothing (first value kept).
CREATE TABLE layer_diagnostics (
  trial_id          bigint NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
  step              integer NOT NULL,
  layer             integer NOT NULL,
  max_attn_logit    double precision,
  update_ratio_qkv  double precision,
  update_ratio_proj double precision,
  update_ratio_fc1  double precision,
  update_ratio_fc2  double precision,
  PRIMARY KEY (trial_id, step, layer)
);
