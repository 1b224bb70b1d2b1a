-- The paper's Figure 3: the Frobenius norms of each layer's FFN weight
-- gradients (W1 = ffn.fc1, W2 = ffn.fc2) at step 0, before any update, mean
-- (and sample std) over seeds, per sweep, variant, placement, depth and
-- layer. Layers count from 0, so the last layer is `layer = layers - 1`:
--   SELECT placement, layers, w2_grad_norm FROM step0_grad_norms
--   WHERE sweep_id = 1 AND layer = layers - 1 ORDER BY placement, layers;
-- is "last-layer W2 across depths" when the sweep varies `layers`.
-- The step-0 gradient does not depend on warm-up or lr, so the trials of one
-- seed (one per grid cell) are averaged into that seed first: every seed
-- weighs the same however many cells it ran in. `layers` is the trial's
-- configured depth, or the number of layers it reported when the stored
-- config leaves it out.
CREATE VIEW step0_grad_norms AS
WITH per_trial AS (
  SELECT t.sweep_id, t.variant, t.placement, t.seed, g.trial_id, g.layer,
         avg(g.norm) FILTER (WHERE g.matrix = 'ffn.fc1') AS w1,
         avg(g.norm) FILTER (WHERE g.matrix = 'ffn.fc2') AS w2,
         coalesce((t.config ->> 'layers')::integer,
                  max(g.layer) OVER (PARTITION BY g.trial_id) + 1) AS layers
  FROM layer_grad_norms g
  JOIN trials t ON t.id = g.trial_id
  WHERE g.step = 0
  GROUP BY t.id, g.trial_id, g.layer
),
per_seed AS (
  SELECT sweep_id, variant, placement, layers, layer, seed, avg(w1) AS w1, avg(w2) AS w2
  FROM per_trial
  GROUP BY sweep_id, variant, placement, layers, layer, seed
)
SELECT sweep_id, variant, placement, layers, layer,
       avg(w1) AS w1_grad_norm,
       avg(w2) AS w2_grad_norm,
       count(*) AS n_seeds,
       stddev_samp(w1) AS w1_grad_norm_std,
       stddev_samp(w2) AS w2_grad_norm_std
FROM per_seed
GROUP BY sweep_id, variant, placement, layers, layer;
