#!/usr/bin/env bash
# The GPU benchmark in one go, on a machine that has PyTorch (CUDA) but maybe no internet:
#   bash benchmarks/gpu_run.sh [OUT]
# Python packages the machine lacks (soundfile, soxr, librosa and their needs) can be put as
# wheels in .whl/ beforehand; they are installed from there without any index.
# Knobs (environment): PRESET (base), TRAIN_S (300), COPIES (20 x the demo corpus),
# WORKERS (8), QUICK (set to --quick for a short smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu_run_out}
PRESET=${PRESET:-base}
TRAIN_S=${TRAIN_S:-300}
COPIES=${COPIES:-20}
WORKERS=${WORKERS:-8}
QUICK=${QUICK:-}
mkdir -p "$OUT"
PY=${PYTHON:-python3}

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$OUT/site" .whl/*.whl
  export PYTHONPATH="$PWD/$OUT/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"   # the working tree itself, no install step needed
export PYTHONUNBUFFERED=1

echo "== corpus: demo x $COPIES"
$PY benchmarks/replicate_corpus.py data/demo "$OUT/corpus" --copies "$COPIES"
echo "== prepare"
$PY -m myxtts prepare "$OUT/corpus" --out "$OUT/cache" --workers "$(nproc)" > "$OUT/prepare.log" 2>&1
tail -3 "$OUT/prepare.log"
echo "== bench loader"
$PY -m myxtts bench loader --data "$OUT/cache" --workers "$WORKERS" $QUICK --json "$OUT/bench_loader.json"
echo "== bench train"
$PY -m myxtts bench train --config "$PRESET" --data "$OUT/cache" $QUICK --json "$OUT/bench_train.json" \
  data.num_workers="$WORKERS"
echo "== train $PRESET for $TRAIN_S s with the monitor on"
( $PY -m myxtts monitor --interval 0.5 --duration "$((TRAIN_S + 60))" --out "$OUT/monitor.csv" \
    --plot "$OUT/monitor.png" > "$OUT/monitor.log" 2>&1 || true ) &
MON=$!
$PY -m myxtts train --config "$PRESET" --data "$OUT/cache" --out "$OUT/run" --no-progress \
  train.time_budget_s="$TRAIN_S" train.max_steps=1000000 train.log_every=50 \
  train.val_every=1000000 train.sample_every=1000000 train.checkpoint_every=1000000 \
  data.num_workers="$WORKERS" 2>&1 | tee "$OUT/train.log"
wait "$MON" || true   # the monitor stops at its --duration
echo "== record"
$PY benchmarks/gpu_record.py "$OUT"
