-- loss over one placement's (warm-up x peak lr) grid, per sweep and variant.
-- It is the quantity of fANOVA (Hutter, Hoos, Leyton-Brown, "An Efficient
-- Approach for Assessing Hyperparameter Importance", ICML 2014, PMLR 32;
-- what Optuna's FanovaImportanceEvaluator computes): f is split into a
-- constant, one main effect per parameter and their interaction, and each
-- part's importance is its variance over the space divided by the variance
-- of f (the "fraction of variance explained"). fANOVA must fit a random
-- forest to scattered trials and integrate it; on a full grid with each cell
-- weighted equally the marginals are plain means of the cells, so here the
-- decomposition is exact, with no surrogate model. (W&B's parameter-
-- importance panel ranks by a random forest's feature importance and by
-- correlation: related, not the same figure.)
--
-- f(w, l) is the cell's mean over its counted seeds (a diverged or
-- non-finite seed is its own l0, as in lr_sensitivity, without the min(., l0)
-- cap of the LRS formula); a cell counts when it is final (no trial PENDING
-- or RUNNING, one trial at least SUCCEEDED or DIVERGED) and every seed that
-- counts as l0 has an l0 (a succeeded seed needs none here). Then, over the
-- W x L cells:
--   mu   = mean of f;  a_w = mean_l f(w, l) - mu;  b_l = mean_w f(w, l) - mu
--   var_warmup = mean_w a_w^2,  var_lr = mean_l b_l^2,
--   var_interaction = mean over cells of (f - mu - a_w - b_l)^2,
--   var_seed = mean over cells of the within-cell population variance of the
--              seeds' values,
--   total_variance = var(f) + var_seed,  var(f) = mean over cells (f - mu)^2
--                  = var_warmup + var_lr + var_interaction (the three parts
--                    are orthogonal on a full grid),
--   share_x = var_x / total_variance; the four shares sum to 1.
-- With n seeds in every cell (N = W L n) these are the classical two-way
-- ANOVA sums of squares over SS_total: SS_w = n L sum_w a_w^2 = N var_warmup,
-- SS_l = N var_lr, SS_wl = n sum_cells (f - mu - a_w - b_l)^2 = N var_interaction,
-- SS_err = sum_cells sum_seeds (y - f)^2 = N var_seed, and since the mean of
-- all y is mu, SS_total = sum (y - mu)^2 = N (var(f) + var_seed) = N total;
-- N cancels in each ratio. With unequal seed counts every cell still weighs
-- the same (fANOVA's uniform measure over the grid), not every trial.
--
-- Shares are NULL, and `note` says why, for a boundary_search or random
-- search sweep (no grid), when a cell of the grid has no counted value yet
-- (incomplete), or when nothing varies (total_variance at most
-- (1e-10 x |mu|)^2, rounding). With one warm-up the warm-up and interaction
-- shares are 0 by construction and lr and seeds share the rest (with one lr
-- likewise); the note says so. total_variance is given whenever the grid is
-- complete. warmups and lrs count the distinct values among the placement's
-- trials, trials the seeds counted in the counted cells.
CREATE VIEW grid_importance AS
WITH cells AS (
  SELECT sweep_id, variant, placement, warmup_steps, peak_lr,
         final AND n_at_l0_without_l0 = 0 AS counted,
         n, mean_value AS f, value_var AS seed_var
  FROM cell_loss_values
),
-- Each cell with its row (warm-up) and column (lr) means and the grand
-- mean over the counted cells. On a complete grid every warm-up has L
-- cells, so the mean over cells of (row mean - mu)^2 is mean_w a_w^2.
marginals AS (
  SELECT c.*,
         avg(f) FILTER (WHERE counted) OVER by_warmup AS row_mean,
         avg(f) FILTER (WHERE counted) OVER by_lr AS col_mean,
         avg(f) FILTER (WHERE counted) OVER grid AS mu,
         dense_rank() OVER (PARTITION BY sweep_id, variant, placement ORDER BY warmup_steps) AS warmup_rank,
         dense_rank() OVER (PARTITION BY sweep_id, variant, placement ORDER BY peak_lr) AS lr_rank
  FROM cells c
  WINDOW grid AS (PARTITION BY sweep_id, variant, placement),
         by_warmup AS (PARTITION BY sweep_id, variant, placement, warmup_steps),
         by_lr AS (PARTITION BY sweep_id, variant, placement, peak_lr)
),
grids AS (
  SELECT sweep_id, variant, placement,
         max(warmup_rank) AS warmups,
         max(lr_rank) AS lrs,
         count(*) FILTER (WHERE counted) AS cells_counted,
         coalesce(sum(n) FILTER (WHERE counted), 0) AS trials,
         min(mu) AS mu,
         avg((row_mean - mu) ^ 2) FILTER (WHERE counted) AS var_warmup,
         avg((col_mean - mu) ^ 2) FILTER (WHERE counted) AS var_lr,
         avg((f - row_mean - col_mean + mu) ^ 2) FILTER (WHERE counted) AS var_interaction,
         avg((f - mu) ^ 2) FILTER (WHERE counted) + avg(seed_var) FILTER (WHERE counted) AS total,
         avg(seed_var) FILTER (WHERE counted) AS var_seed
  FROM marginals
  GROUP BY sweep_id, variant, placement
),
judged AS (
  SELECT g.*,
         s.spec ? 'random_search' AS random_search,
         s.spec ? 'boundary_search' AS boundary_search,
         g.cells_counted = g.warmups * g.lrs AS complete
  FROM grids g
  JOIN sweeps s ON s.id = g.sweep_id
),
noted AS (
  SELECT j.*,
         CASE
           WHEN j.boundary_search THEN
             'boundary search: each line runs its own lrs, no grid - not computed (lr_boundary is the answer)'
           WHEN j.random_search THEN
             'random search: no grid; fANOVA needs a surrogate model (Optuna''s fANOVA fits a random forest) - not computed'
           WHEN NOT j.complete THEN
             format('incomplete grid: %s of %s cells counted (the others have unfinished trials, only failed or'
                    ' cancelled ones, or a diverged seed without l0)', j.cells_counted, j.warmups * j.lrs)
           WHEN j.total <= (1e-10 * abs(j.mu)) ^ 2 THEN 'no variance: every counted loss is the same'
         END AS why_not,
         CASE
           WHEN j.warmups = 1 AND j.lrs = 1 THEN 'one cell: only the seeds vary'
           WHEN j.warmups = 1 THEN 'one warm-up: the warm-up and interaction shares are 0 by construction'
           WHEN j.lrs = 1 THEN 'one peak lr: the lr and interaction shares are 0 by construction'
           ELSE ''
         END AS caveat
  FROM judged j
)
SELECT sweep_id, variant, placement,
       warmups::integer AS warmups,
       lrs::integer AS lrs,
       (warmups * lrs)::integer AS cells,
       cells_counted::integer AS cells_counted,
       trials::integer AS trials,
       CASE WHEN complete AND NOT random_search AND NOT boundary_search THEN total END AS total_variance,
       CASE WHEN why_not IS NULL THEN var_warmup / total END AS share_warmup,
       CASE WHEN why_not IS NULL THEN var_lr / total END AS share_lr,
       CASE WHEN why_not IS NULL THEN var_interaction / total END AS share_interaction,
       CASE WHEN why_not IS NULL THEN var_seed / total END AS share_seed,
       coalesce(why_not, caveat) AS note
FROM noted;
