-- A retried trial starts its metric history afresh: $1 its ids.
WITH b AS (DELETE FROM trial_metric_batches WHERE trial_id = ANY($1::bigint[])),
  l AS (DELETE FROM trial_metric_late WHERE trial_id = ANY($1::bigint[])),
  d AS (DELETE FROM layer_diagnostics WHERE trial_id = ANY($1::bigint[]))
DELETE FROM layer_grad_norms WHERE trial_id = ANY($1::bigint[])
