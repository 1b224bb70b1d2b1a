-- The sweep and line of trial $1 (line NULL: not a boundary_search trial).
SELECT sweep_id, boundary_line FROM trials WHERE id = $1
