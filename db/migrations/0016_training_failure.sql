-- What "failed to train" means (issue 24; proto/schema/failure.h is the
-- rule's C++ twin, which the boundary search of both stores and the
-- client's report run).
--
-- The data's unigram loss comes with each finished trial (FinishTrial's
-- result.unigram_loss: the cross-entropy on the validation targets of the
-- training data's token frequencies). NULL for trials finished before this
-- migration or by an older worker.
ALTER TABLE trials ADD COLUMN unigram_loss double precision;

-- A trial that ran to its end (SUCCEEDED or DIVERGED) and failed to train:
--   'diverged'            DIVERGED;
--   'no_finite_loss'      SUCCEEDED without a finite final validation loss;
--   'plateau'             its final validation loss is above
--                         unigram_loss - 0.1 (schema::kPlateauMargin): it
--                         learnt no more than which tokens are common;
--   'above_max_val_loss'  above max_val_loss (a boundary search's, when set).
-- '' for a trial that trained; NULL for one not judged (PENDING, RUNNING,
-- FAILED, CANCELLED). Without a unigram loss the plateau is not judged.
CREATE FUNCTION normsweep_trial_failure(state text, final_val_loss double precision,
                                        unigram_loss double precision, max_val_loss double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN state = 'DIVERGED' THEN 'diverged'
    WHEN state IS DISTINCT FROM 'SUCCEEDED' THEN NULL
    WHEN NOT normsweep_usable_loss(state, final_val_loss) THEN 'no_finite_loss'
    WHEN unigram_loss IS NOT NULL AND unigram_loss < 'Infinity'::double precision
         AND unigram_loss > '-Infinity'::double precision
         AND final_val_loss > unigram_loss - 0.1 THEN 'plateau'
    WHEN max_val_loss IS NOT NULL AND final_val_loss > max_val_loss THEN 'above_max_val_loss'
    ELSE '' END
$$;

-- The max_val_loss that normsweep_trial_failure judges a sweep's trials by:
-- its boundary search's (sweeps.spec, protobuf JSON), NULL when it has none.
CREATE FUNCTION normsweep_max_val_loss(spec jsonb) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
  SELECT (spec -> 'boundary_search' ->> 'max_val_loss')::double precision
$$;

-- The step's z-loss term (MetricPoint.z_term: z_loss x mean (log Z)^2, part of
-- train_loss), kept like the other step metrics (0005_metric_batches.sql);
-- NULL for steps stored before this migration or run without z_loss.
ALTER TABLE trial_metric_batches ADD COLUMN z_term double precision[];
ALTER TABLE trial_metric_late ADD COLUMN z_term double precision;
