-- The probes of line $2 of sweep $1, as the search judges them.
SELECT peak_lr, state, final_val_loss, init_val_loss FROM trials
  WHERE sweep_id = $1 AND boundary_line = $2 ORDER BY trial_index
