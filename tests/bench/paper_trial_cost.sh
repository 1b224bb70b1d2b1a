#!/usr/bin/env bash
# One trial of deploy/sweeps/paper.yaml's model (6 layers) against one of its
# earlier 12-layer model, in alternating rounds, same binary, one thread:
# prints each round's seconds, the 6/12 ratio and the load average.
#   tests/bench/paper_trial_cost.sh [build/trainer/normsweep-train] [corpus.txt] [rounds]
set -euo pipefail
train=${1:-build/trainer/normsweep-train}
corpus=${2:-.local/corpus.txt}
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
run() {  # LAYERS ROUND -> seconds
  "$train" train --layers "$1" --d-model 64 --heads 4 --d-ff 128 --seq-len 64 --batch-size 32 --steps 400 \
    --optimizer adam --beta1 0.9 --beta2 0.98 --schedule constant --eval-every 100 --eval-batches 16 \
    --data "$corpus" --placement post --warmup-steps 0 --lr 1e-3 --seed 0 --threads 1 \
    --events "$out/$1-$2.jsonl" >/dev/null
  python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]['elapsed_s'])" "$out/$1-$2.jsonl"
}
for r in $(seq 1 "$rounds"); do
  t12=$(run 12 "$r"); l12=$(cut -d' ' -f1 /proc/loadavg)
  t6=$(run 6 "$r"); l6=$(cut -d' ' -f1 /proc/loadavg)
  python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'round {sys.argv[3]}: 12 layers {a:.1f} s (load {sys.argv[4]}), 6 layers {b:.1f} s (load {sys.argv[5]}), ratio {b/a:.3f}')" \
    "$t12" "$t6" "$r" "$l12" "$l6"
done
