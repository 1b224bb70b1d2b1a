-- 0002's first summaries, superseded by 0004's warmup_lr_grid_stats and
-- placement_sensitivity, which say the same and more. Views live in
-- db/views/ from here on (db/migrations.cc re-creates them after the
-- migrations); a view that goes away is dropped by a migration like this one.
DROP VIEW IF EXISTS placement_summary;
DROP VIEW IF EXISTS warmup_lr_grid;
