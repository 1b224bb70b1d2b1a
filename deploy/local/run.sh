#!/usr/bin/env bash
# normsweep's main job on one machine, from a fresh Debian 12 machine:
# installs what is missing, builds, and runs a real Post-LN vs Pre-LN
# comparison with normsweep-train: a 12-layer byte-level LM on source text,
# peak lr 3e-3 with and without a 100-step warm-up (the setting where, in
# Xiong et al. 2020, Post-LN needs the warm-up and Pre-LN does not).
# Until the scheduler and workers land (issue 4) the runs are launched here
# directly, one after another; results go to .local/runs/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" normsweep-train
train="${NORMSWEEP_BUILD_DIR:-$root/build}/trainer/normsweep-train"
out="$root/.local/runs"
mkdir -p "$out"

# Byte-level corpus: Python's standard library sources where present (as in
# the paper-reproduction issue), else the machine's licence texts.
corpus="$out/corpus.txt"
if [[ ! -s $corpus ]]; then
  if compgen -G "/usr/lib/python3*/*.py" >/dev/null; then
    cat /usr/lib/python3*/*.py | head -c 4000000 > "$corpus"
  else
    find /usr/share/common-licenses /usr/share/doc -type f -name '*copyright*' -size -200k -print0 2>/dev/null \
      | xargs -0 cat | head -c 4000000 > "$corpus"
  fi
fi

steps=${NORMSWEEP_DEMO_STEPS:-300}
threads=${NORMSWEEP_THREADS:-$(nproc)}
model=(--layers 12 --d-model 64 --heads 4 --d-ff 128 --seq-len 64 --batch-size 32 --beta2 0.98)
echo "normsweep: Post-LN vs Pre-LN, 12 layers, d_model 64, Adam, peak lr 3e-3, $steps steps, $threads threads"
printf '%-9s %-7s %-10s %-10s %-10s %-9s %s\n' placement warmup outcome final_val best_val tokens/s seconds
for placement in post pre; do
  for warmup in 0 100; do
    name="${placement}_w${warmup}"
    "$train" train --placement "$placement" --warmup-steps "$warmup" --lr 3e-3 --steps "$steps" \
      --eval-every 100 --eval-batches 16 --threads "$threads" --seed 1 --data "$corpus" "${model[@]}" \
      --checkpoint-out "$out/$name.safetensors" > "$out/$name.jsonl"
    final=$(grep '"type":"final"' "$out/$name.jsonl")
    field() { grep -o "\"$1\":[^,}]*" <<<"$final" | head -1 | cut -d: -f2 | tr -d '"'; }
    printf '%-9s %-7s %-10s %-10.4f %-10.4f %-9.0f %.0f\n' "$placement" "$warmup" "$(field outcome)" \
      "$(field final_val_loss)" "$(field best_val_loss)" "$(field mean_tokens_per_s)" "$(field elapsed_s)"
  done
done
echo "events (JSON lines) and checkpoints: $out"
echo "the unigram (byte-frequency) loss of such text is about 3.2: a run that ends there learned nothing beyond it"
