-- The literature's sensitivity measures (issue 16, parts 1 and 2), defined
-- once here: `normsweep results`, the report and Grafana read these views
-- (through GetSweepAnalysis or directly), never a copy of the arithmetic.
--
--   lr_sensitivity          per line (sweep, variant, placement, warm-up):
--                           Wortsman et al. 2023 (arXiv 2309.14322, sec. 2.2)
--   lr_sensitivity_summary  per placement over its warm-ups
--   grid_importance         per placement: a functional ANOVA of the final
--                           validation loss over the (warm-up x peak lr) grid
--
-- One rule for a seed (trial_loss_values): a trial that SUCCEEDED with a
-- finite final validation loss counts with that loss; one that DIVERGED, or
-- SUCCEEDED with a NaN, infinite or missing loss, counts as its own l0 (the
-- paper: a run that blew up is worth no more than the untrained model, not
-- infinity). FAILED (an error, not the model) and CANCELLED trials are left
-- out of every mean. l0 is the validation loss at initialisation: the
-- trial's init_val_loss (FinishTrial), else its step-0 row of trial_metrics;
-- a non-finite l0 is no l0. A seed that must count as l0 but has none is not
-- known, and its cell waits (below).

-- Each view reads the trials once (windows, not self-joins), and a query
-- for one sweep (WHERE sweep_id = $1) reaches down to that sweep's trials:
-- every CTE is used once (so inlined) and every window is partitioned by
-- sweep_id. A sweep of 10,000 trials takes 0.1-0.2 s per view (2 busy cores).

-- x when finite, else NULL (NaN sorts above Infinity in PostgreSQL).
CREATE FUNCTION normsweep_finite(x double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN x < 'Infinity'::double precision AND x > '-Infinity'::double precision THEN x END
$$;

-- One row per trial: its l0 and the value it contributes to a mean.
--   final_state  SUCCEEDED or DIVERGED: the trial counts
--   open         PENDING or RUNNING: its cell is not final yet
--   at_l0        it counts as l0 (diverged, or no finite final loss)
--   value        the final loss, or l0 when at_l0 (NULL: at_l0 without l0,
--                or not counted)
-- The step-0 val_loss is read as trial_metrics gives it (the batch's value
-- first, then a late row's), but from its two tables by primary key, and
-- only for a trial without a finite init_val_loss: the view would unnest
-- every step of the trial to find step 0. A step-0 row is the first of a
-- batch that starts at 0 (batches are in step order). OFFSET 0 keeps the
-- look-up one per trial (PostgreSQL would otherwise copy it into every
-- column that uses l0).
CREATE VIEW trial_loss_values AS
SELECT t.sweep_id, t.id AS trial_id, t.variant, t.placement, t.warmup_steps, t.peak_lr, t.seed, t.state,
       t.state IN ('SUCCEEDED', 'DIVERGED') AS final_state,
       t.state IN ('PENDING', 'RUNNING') AS open,
       l.l0,
       t.state IN ('SUCCEEDED', 'DIVERGED') AND NOT l.usable AS at_l0,
       CASE WHEN l.usable THEN t.final_val_loss
            WHEN t.state IN ('SUCCEEDED', 'DIVERGED') THEN l.l0 END AS value
FROM trials t
LEFT JOIN LATERAL (
  SELECT coalesce((SELECT b.val_loss[1] FROM trial_metric_batches b
                    WHERE b.trial_id = t.id AND b.first_step = 0 AND b.steps[1] = 0),
                  (SELECT m.val_loss FROM trial_metric_late m WHERE m.trial_id = t.id AND m.step = 0)) AS val_loss
  WHERE normsweep_finite(t.init_val_loss) IS NULL
  OFFSET 0) AS step0 ON true
CROSS JOIN LATERAL (
  SELECT coalesce(normsweep_finite(t.init_val_loss), normsweep_finite(step0.val_loss)) AS l0,
         normsweep_usable_loss(t.state, t.final_val_loss) AS usable) AS l;

-- LR sensitivity of one line of the grid (sweep, variant, placement, warm-up):
--
--     LRS = mean over the line's counted lrs of ( min(l(lr), l0) - l* )
--
-- l(lr) is the mean over the cell's counted seeds of their value (above: a
-- diverged or non-finite seed is its own l0). l0 of the line is the mean l0
-- of the trials it counts. l* = min over lr of min(l(lr), l0): the paper's
-- min of l(lr) whenever some lr ends below l0 (the normal case), and l0 when
-- none does, so that LRS is never negative and is 0 for a model that stays
-- at l0 everywhere (the paper's first caveat: read it beside l* and the
-- loss curves, never alone).
--
-- A peak lr counts when its cell is final and known: no trial PENDING or
-- RUNNING, at least one trial SUCCEEDED or DIVERGED, and every one of those
-- with an l0 (LrSensitivity.lrs: "every seed final and with an l0"; l0 of
-- the line is their mean). Otherwise it is pending (lrs_pending) when a
-- trial is still open or a counted trial lacks l0 (older trainers reported
-- none: such an lr stays pending), and in neither count when all its trials
-- FAILED or were CANCELLED.
--   lrs            peak lrs counted
--   points_at_l0   seeds of the counted lrs that counted as l0
--   best_lr        the lr of the smallest l(lr) (the smaller lr on a tie)
--   best_val_loss  l*
--   init_val_loss  l0 of the line
--   lr_sensitivity NULL when no lr counts; 0 by the formula with one lr
--                  (`normsweep results` marks such a line)
--   lrs_pending    peak lrs left out for now
-- Random-search lines are its warm-up values, mostly with one lr each; a
-- boundary_search sweep's lrs are its search's points, not an even grid
-- (its lr_boundary view is the answer there).
CREATE VIEW lr_sensitivity AS
WITH cells AS (
  SELECT sweep_id, variant, placement, warmup_steps, peak_lr,
         count(*) FILTER (WHERE open) = 0 AND count(*) FILTER (WHERE final_state) > 0
           AND count(*) FILTER (WHERE final_state AND l0 IS NULL) = 0 AS counted,
         count(*) FILTER (WHERE open) > 0 OR count(*) FILTER (WHERE final_state AND l0 IS NULL) > 0 AS pending,
         count(*) FILTER (WHERE final_state) AS n,
         count(*) FILTER (WHERE at_l0) AS n_at_l0,
         avg(value) FILTER (WHERE final_state) AS l,
         sum(l0) FILTER (WHERE final_state) AS l0_sum
  FROM trial_loss_values
  GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr
),
lined AS (
  SELECT c.*,
         sum(l0_sum) FILTER (WHERE counted) OVER line / sum(n) FILTER (WHERE counted) OVER line AS line_l0
  FROM cells c
  WINDOW line AS (PARTITION BY sweep_id, variant, placement, warmup_steps)
)
SELECT sweep_id, variant, placement, warmup_steps,
       (count(*) FILTER (WHERE counted))::integer AS lrs,
       coalesce(sum(n_at_l0) FILTER (WHERE counted), 0)::integer AS points_at_l0,
       (array_agg(peak_lr ORDER BY l, peak_lr) FILTER (WHERE counted))[1] AS best_lr,
       min(least(l, line_l0)) FILTER (WHERE counted) AS best_val_loss,
       min(line_l0) AS init_val_loss,
       avg(least(l, line_l0)) FILTER (WHERE counted) - min(least(l, line_l0)) FILTER (WHERE counted) AS lr_sensitivity,
       (count(*) FILTER (WHERE pending))::integer AS lrs_pending
FROM lined
GROUP BY sweep_id, variant, placement, warmup_steps;

-- One placement's LR sensitivity over its warm-ups (the paper's Fig. 5:
-- longer warm-up, lower LRS). A line takes part when its figure comes from
-- at least two lrs (one lr's 0 says nothing); warmups counts those lines.
-- warmup_of_min is the warm-up with the smallest LRS (the shorter on a tie),
-- best_val_loss the smallest l* of those lines. NULLs when no line takes part.
CREATE VIEW lr_sensitivity_summary AS
SELECT sweep_id, variant, placement,
       (count(*) FILTER (WHERE lrs >= 2))::integer AS warmups,
       avg(lr_sensitivity) FILTER (WHERE lrs >= 2) AS mean_lr_sensitivity,
       min(lr_sensitivity) FILTER (WHERE lrs >= 2) AS min_lr_sensitivity,
       max(lr_sensitivity) FILTER (WHERE lrs >= 2) AS max_lr_sensitivity,
       (array_agg(warmup_steps ORDER BY lr_sensitivity, warmup_steps) FILTER (WHERE lrs >= 2))[1] AS warmup_of_min,
       min(best_val_loss) FILTER (WHERE lrs >= 2) AS best_val_loss
FROM lr_sensitivity
GROUP BY sweep_id, variant, placement;

-- How much each setting matters: a functional ANOVA of the final validation
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
         count(*) FILTER (WHERE open) = 0 AND count(*) FILTER (WHERE final_state) > 0
           AND count(*) FILTER (WHERE at_l0 AND l0 IS NULL) = 0 AS counted,
         count(*) FILTER (WHERE final_state) AS n,
         avg(value) FILTER (WHERE final_state) AS f,
         var_pop(value) FILTER (WHERE final_state) AS seed_var
  FROM trial_loss_values
  GROUP BY sweep_id, variant, placement, warmup_steps, peak_lr
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
