-- Runs still learning are not plateaus (issue 34; proto/schema/failure.h is
-- the rule's C++ twin).
--
-- How much a trial's validation loss still fell over its last quarter
-- (FinishTrial's result.val_loss_progress: the val loss at the last
-- evaluation at or before step floor(0.75 * steps) minus the final one,
-- trainer/settings/val_loss_progress.h). NULL: not judged (fewer than 3 evaluations,
-- or a trial finished before this migration or by an older worker);
-- db/tools/recompute_val_loss_progress.sql fills it for stored trials from
-- their metrics, apart from any migration.
ALTER TABLE trials ADD COLUMN val_loss_progress double precision;

-- normsweep_trial_failure (0016) with the progress: a SUCCEEDED trial that
-- ends within 0.1 of the unigram loss (schema::kPlateauMargin) is
--   'plateau'        when val_loss_progress < 0.15 (schema::kProgressMargin)
--                    or NULL: it stopped improving there;
--   'not_converged'  when val_loss_progress >= 0.15: it was still learning
--                    (not a failure), unless max_val_loss says otherwise
--                    ('above_max_val_loss' keeps precedence).
-- The rest as normsweep_trial_failure: 'diverged', 'no_finite_loss',
-- 'above_max_val_loss', '' when it trained, NULL when not judged. The old
-- function stays for readers that call it; the views read this one.
CREATE FUNCTION normsweep_training_failure(state text, final_val_loss double precision,
                                           unigram_loss double precision, val_loss_progress double precision,
                                           max_val_loss double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN state = 'DIVERGED' THEN 'diverged'
    WHEN state IS DISTINCT FROM 'SUCCEEDED' THEN NULL
    WHEN NOT normsweep_usable_loss(state, final_val_loss) THEN 'no_finite_loss'
    WHEN n.near_unigram AND NOT n.learning THEN 'plateau'
    WHEN max_val_loss IS NOT NULL AND final_val_loss > max_val_loss THEN 'above_max_val_loss'
    WHEN n.near_unigram THEN 'not_converged'
    ELSE '' END
  FROM (SELECT coalesce(unigram_loss < 'Infinity'::double precision
                        AND unigram_loss > '-Infinity'::double precision
                        AND final_val_loss > unigram_loss - 0.1, false) AS near_unigram,
               coalesce(val_loss_progress < 'Infinity'::double precision
                        AND val_loss_progress >= 0.15, false) AS learning) AS n
$$;

-- Whether a label of normsweep_training_failure is a failure to train:
-- every non-empty label but 'not_converged'. NULL for NULL (not judged).
CREATE FUNCTION normsweep_failed_to_train(failure text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT failure NOT IN ('', 'not_converged')
$$;
