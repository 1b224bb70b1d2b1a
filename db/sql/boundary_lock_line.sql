-- Locks line $2 of sweep $1 for the rest of the transaction: the finishes of
-- one line's trials run one after another, each seeing the one before.
SELECT state FROM boundary_lines WHERE sweep_id = $1 AND line = $2 FOR UPDATE
