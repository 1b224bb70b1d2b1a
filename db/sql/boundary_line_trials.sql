-- The probes of line $2 of sweep $1, as the search judges them, each with
-- its l0 by the one rule (the view trial_l0), its unigram loss and its
-- val_loss_progress.
SELECT peak_lr, state, final_val_loss, l0, unigram_loss, val_loss_progress FROM trial_l0
  WHERE sweep_id = $1 AND boundary_line = $2 ORDER BY trial_index
