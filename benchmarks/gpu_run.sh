#!/usr/bin/env bash
# The GPU benchmark in phases, so that it fits a GPU machine lent for a while (commands of at most
# 10 minutes, about 30 in all), one with PyTorch (CUDA) and no package index:
#
#   bash benchmarks/gpu_run.sh [--smoke] OUT [PHASE ...]
#
# Phases, in this order whatever order they are named in (none named: all of them):
#   setup       install the wheels in .whl/ (scripts/gpu_wheels.sh builds them) into OUT/site,
#               check that what the phases import is there
#   corpus      the demo corpus replicated, prepared into OUT/cache
#   loader      myxtts bench loader
#   bench       myxtts bench train in one mode, the one train.compile=auto runs (CUDA graphs on
#               one GPU): its MFU. Not all modes: two of them compile every shape of the whole
#               step, 25-40 minutes on an H100, more than a command may take.
#   train-cold  a training run with a fresh compile cache in OUT/compile, the GPU sampled beside
#               it (myxtts train does that itself, the compile window counted apart): time to
#               full speed cold, GPU utilisation, input-bound %, recompiles
#   train-warm  the same run again (the cold run's resolved batch size and rate) on the compile
#               cache train-cold filled: time to full speed warm, recompiles
#   record      benchmarks/results/<gpu>-<UTC date>-after.{json,md} (benchmarks/gpu_record.py)
#
# Each phase leaves OUT/.done/PHASE (when it finished, how long it took) and OUT/PHASE.log; a phase
# that is done is skipped, so the same command can be given again after a failure or a time
# limit. Delete OUT/.done/PHASE to run it again: that also forgets the phases that read its output.
# OUT must stay on the machine between commands (train-warm reads train-cold's compile cache).
#
# Estimates on one H100 (16 cores), none of them measured as a whole yet; their basis is the first
# H100 run (benchmarks/results/h100-2026-11-23-before.md) and the CPU records beside it:
#   machine start-up  1-2 min
#   setup             < 0.5 min: 11 small wheels (about 2.4 MB) unpacked, one import check
#   corpus            < 1.5 min: 6,400 utterances, 4.1 h of audio (the demo x 8, as many
#                     utterances as the first run's corpus); prepare ran 47 audio-s/s per worker on
#                     two CPU cores (2026-11-22-prepare-cpu), about 750 with 16 workers: ~20 s
#   loader            < 1 min: bench loader --quick (under a minute on 2 CPU cores, its help says)
#   bench             < 3 min: one shape's warm-up with CUDA graphs, compiling included, took
#                     60.7 s (inductor without graphs 70.9 s); sizing the batch at most 30 s
#                     (train/sizing.py); 20 steps
#   train-cold        < 7 min: one compile of the step for all 8 bucket shapes (one shape took
#                     ~71 s when each shape compiled on its own; a step with symbolic shapes
#                     takes longer, by how much on a GPU is not measured yet), a CUDA graph
#                     recorded per shape, sizing and building < 1 min, 90 s of training
#   train-warm        < 7 min, likely ~3: as train-cold with the compile cache filled (on a CPU a
#                     second process took 26 s for what cost 247 s cold, 2026-11-24-compile-cpu)
#   record            seconds
#   in all            < 22 min. Commands that fit 9 minutes each: `setup corpus loader bench`,
#                     `train-cold`, `train-warm record`.
# The text is read as characters, not phonemes: the phoneme front end's wheels (espeak-ng's data,
# babel and what csvw needs, about 21 MB) do not fit beside the tree in what a lent machine is
# sent (64 MiB). The model is the same but for its text vocabulary; the text lengths, and so the
# shapes, differ a little.
#
# --smoke runs every phase at toy size on the CPU (tiny preset, the LJSpeech test clips, 10 s
# of training), writes OUT/record.{json,md} and nothing in benchmarks/results: a check of the
# script and the record, well under 2 minutes on 2 cores; its figures say nothing about a GPU.
#
# Environment: PYTHON (default .venv/bin/python where it exists, else python3); COMMIT, the
# commit the tree is at, for the record where the tree is a copy without .git.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

ALL=(setup corpus loader bench train-cold train-warm record)
declare -A READS=([loader]=corpus [bench]=corpus [train-cold]=corpus [train-warm]=train-cold)
EXIT_STOPPED=75  # myxtts train stopped by its time budget, checkpoint written (commands/common.py)

SMOKE=0
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --smoke) SMOKE=1; shift ;;
  -*) echo "gpu_run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
if [ $# -lt 1 ]; then
  echo "usage: bash benchmarks/gpu_run.sh [--smoke] OUT [PHASE ...] (see --help)" >&2
  exit 2
fi
OUT=$1; shift
WANT=("$@")
[ ${#WANT[@]} -gt 0 ] || WANT=("${ALL[@]}")
for p in "${WANT[@]}"; do
  if [[ " ${ALL[*]} " != *" $p "* ]]; then
    echo "gpu_run.sh: unknown phase '$p'; phases: ${ALL[*]}" >&2
    exit 2
  fi
done

mkdir -p "$OUT/.done"
OUT=$(cd "$OUT" && pwd)
DONE=$OUT/.done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=$PWD/.venv/bin/python
else PY=python3
fi
# OUT/site holds the carried wheels; the tree itself is importable without an install step.
export PYTHONPATH="$OUT/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

if [ "$SMOKE" = 1 ]; then
  export CUDA_VISIBLE_DEVICES=""  # the CPU, also on a machine with a GPU
  export OMP_NUM_THREADS=1        # one core for the model, one for the loader worker: steadier steps
  PRESET=tiny
  CORPUS_SRC=tests/fixtures/ljspeech
  COPIES=8
  PREP_WORKERS=1
  WORKERS=1
  TRAIN_S=10
  BUCKET_SET=(data.max_buckets=2)
  # the clips under 6 s (4 of the 8): the aligner's cost on a CPU grows with length
  CORPUS_SET=(text.mode=characters data.max_seconds=6)
  SIZE_SET=(data.frame_budget=1000)  # small batches: many steps in 10 s, so the speed settles
  BENCH=(--quick --modes eager_fp32)  # what auto runs on a CPU; --quick: a smaller tiny model
else
  PRESET=base
  CORPUS_SRC=data/demo
  COPIES=8
  PREP_WORKERS=$(nproc)
  WORKERS=8
  TRAIN_S=90
  BUCKET_SET=()  # the default, 8 buckets: one compile serves every shape
  CORPUS_SET=(text.mode=characters)
  SIZE_SET=()  # data.frame_budget=auto: sized to the GPU's memory
  BENCH=(--config "$PRESET" --steps 20 --modes compiled_cudagraphs data.max_buckets=1)
fi

say() {  # a command as it runs, also kept for the record (OUT named so, wherever it is)
  local line="$*"
  line=${line//$OUT/OUT}
  printf '%s\n' "$line" >> "$DONE/$PHASE.commands"
  echo "+ $line"
}

myxtts() {
  say "myxtts $*"
  "$PY" -m myxtts "$@"
}

phase_setup() {
  if [ "$SMOKE" = 0 ] && compgen -G ".whl/*.whl" > /dev/null; then
    say "pip install --no-index --no-deps --target $OUT/site .whl/*.whl"
    rm -rf "$OUT/site"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$OUT/site" .whl/*.whl
  fi
  # What prepare and training import beyond PyTorch, numpy, scipy and numba: one clear line
  # here rather than a traceback in a later phase.
  local check="import soundfile, soxr, librosa.filters, inflect, myxtts.cli, torch; "
  check+="print('torch', torch.__version__, '| CUDA', torch.cuda.is_available())"
  say "python -c \"$check\""
  local got
  if ! got=$("$PY" -c "$check" 2>&1); then
    echo "gpu_run.sh: setup: $(tail -1 <<< "$got"); scripts/gpu_wheels.sh builds the wheels" \
         "the phases need into .whl/, to bring along" >&2
    return 1
  fi
  echo "$got"
}

phase_corpus() {
  say "python benchmarks/replicate_corpus.py $CORPUS_SRC $OUT/corpus --copies $COPIES"
  "$PY" benchmarks/replicate_corpus.py "$CORPUS_SRC" "$OUT/corpus" --copies "$COPIES"
  # prepare resumes what an earlier try left in OUT/cache; its progress bar goes to a file
  local prep=(prepare "$OUT/corpus" --out "$OUT/cache" --workers "$PREP_WORKERS" --config "$PRESET"
              "${CORPUS_SET[@]}")
  say "myxtts ${prep[*]}"
  "$PY" -m myxtts "${prep[@]}" > "$OUT/prepare.out" 2>&1 || { tail -20 "$OUT/prepare.out"; return 1; }
  tail -2 "$OUT/prepare.out"
}

phase_loader() {
  myxtts bench loader --data "$OUT/cache" --config "$PRESET" --workers "$WORKERS" --quick \
    --json "$OUT/bench_loader.json" "${CORPUS_SET[@]}"
}

phase_bench() {
  # its own compile cache: train-cold must find none
  myxtts bench train --data "$OUT/cache" --json "$OUT/bench_train.json" "${BENCH[@]}" \
    "${CORPUS_SET[@]}" train.compile_cache="$OUT/compile-bench"
}

train_run() {  # train_run FOLDER [KEY=VALUE ...]: the run both train phases make, to its time budget
  local run=$1 rc=0
  shift
  rm -rf "$run"  # an earlier try's folder would be resumed, not started afresh
  myxtts train --config "$PRESET" --data "$OUT/cache" --out "$run" --no-progress \
    train.compile_cache="$OUT/compile" train.time_budget_s="$TRAIN_S" train.max_steps=1000000 \
    train.log_every=50 train.val_every=1000000 train.sample_every=1000000 \
    train.checkpoint_every=1000000 data.num_workers="$WORKERS" \
    "${BUCKET_SET[@]}" "${CORPUS_SET[@]}" "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne "$EXIT_STOPPED" ]; then
    return "$rc"
  fi
}

phase_train_cold() {
  rm -rf "$OUT/compile"
  train_run "$OUT/run-cold" "${SIZE_SET[@]}"
}

phase_train_warm() {
  # What the cold run resolved (frame budget and the batch cap and rate that go with it, precision,
  # compile mode), given as settings: sizing the batch again could stop at another budget (it has
  # a time limit), and other shapes would find nothing in the compile cache.
  local plan
  read -ra plan <<< "$("$PY" -c 'import json, sys; print(
    "data.frame_budget=%(frame_budget)s data.max_batch_size=%(max_batch_size)s train.lr=%(lr)r "
    "train.precision=%(precision)s train.compile=%(compile)s" % json.load(open(sys.argv[1])))' \
    "$OUT/run-cold/plan.json")"
  train_run "$OUT/run-warm" "${plan[@]}"
}

phase_record() {
  local args=("$OUT")
  [ "$SMOKE" = 0 ] || args+=(--smoke)
  [ -z "${COMMIT:-}" ] || args+=(--commit "$COMMIT")
  say "python benchmarks/gpu_record.py ${args[*]}"
  "$PY" benchmarks/gpu_record.py "${args[@]}"
}

reads() {  # reads A B: does phase A use what phase B made (directly or through another)?
  local p=$1
  while [ -n "${READS[$p]:-}" ]; do
    p=${READS[$p]}
    [ "$p" != "$2" ] || return 0
  done
  return 1
}

for PHASE in "${ALL[@]}"; do
  [[ " ${WANT[*]} " == *" $PHASE "* ]] || continue
  if [ -f "$DONE/$PHASE" ]; then
    echo "== $PHASE: done ($(cat "$DONE/$PHASE")), skipped"
    continue
  fi
  for need in setup ${READS[$PHASE]:-}; do
    if [ "$PHASE" != setup ] && [ ! -f "$DONE/$need" ]; then
      echo "gpu_run.sh: phase $PHASE needs phase $need done first ($DONE/$need is missing)" >&2
      exit 2
    fi
  done
  echo "== $PHASE"
  : > "$DONE/$PHASE.commands"
  start=$SECONDS
  set +e
  ( set -euo pipefail; "phase_${PHASE//-/_}" ) 2>&1 | tee "$OUT/$PHASE.log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "gpu_run.sh: phase $PHASE failed (exit $rc); its log: $OUT/$PHASE.log" >&2
    exit "$rc"
  fi
  for later in "${ALL[@]}"; do  # what was made from this phase's earlier output is stale now
    if [ "$later" = record ] || reads "$later" "$PHASE"; then
      rm -f "$DONE/$later"
    fi
  done
  echo "finished $(date -u +%Y-%m-%dT%H:%M:%SZ) after $((SECONDS - start)) s" > "$DONE/$PHASE"
done
