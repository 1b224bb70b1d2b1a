-- Line $2 of sweep $1 as the search decided it: state $3, bracket [$4, $5].
UPDATE boundary_lines SET state = $3, max_trainable_lr = $4::float8, min_untrainable_lr = $5::float8
  WHERE sweep_id = $1 AND line = $2
