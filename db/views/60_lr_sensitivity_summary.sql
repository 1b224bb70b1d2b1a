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
