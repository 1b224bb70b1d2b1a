-- Instability diagnostics (issue 16) and the loss at initialisation.
--
-- l0, the validation loss before the first update (the trainer evaluates at
-- step 0), is kept on the trial (FinishTrial's result.init_val_loss), and
-- also arrives as the step-0 row of trial_metrics.
ALTER TABLE trials ADD COLUMN init_val_loss double precision;

-- The output logits' mean log-sum-exp (log Z) at each evaluation.
ALTER TABLE trial_metrics ADD COLUMN output_log_z double precision;

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
