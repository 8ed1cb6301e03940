#!/usr/bin/env bash
# The GPU benchmark as one command that fits a lent GPU machine (15 minutes in all, start-up
# included; at most 10 minutes a command; an emptied OUT folder that brings back 8 files):
#
#   bash benchmarks/gpu_run.sh [--smoke] [--deadline SECONDS] OUT
#
# Run it as one call with a timeout of 480 s and --deadline 420, then hand the machine back.
# The record's time is reserved from the start: every other step checks the time left less that
# reserve, and skips itself (saying so in the record) when its estimate does not fit; a training
# run still going when only the reserve is left is stopped (SIGTERM: it checkpoints and writes its
# summary, as a time budget would), and the record step itself always runs, so a lease always
# returns a record. In order:
#
#   setup     machine and versions printed first; the wheels in .whl/ (scripts/gpu_wheels.sh)
#             unpacked, what the steps import checked                          < 0.5 min
#   corpus    the demo corpus x8 (6,400 utterances, 4.1 h) prepared, and beside it the aligner's
#             kernel check (benchmarks/gpu_kernels.py), then the attention kernels compared on
#             base's shapes (benchmarks/gpu_attention.py, at most ATTENTION_S)  < 1.5 min
#             (prepare ran 47 audio-s/s per worker on 2 CPU cores, 2026-11-22-prepare-cpu:
#             ~20 s with 16 workers; the kernel check took 16 s on the H100 and outlasted
#             prepare, so the attention comparison adds up to ATTENTION_S to this step)
#   cold      myxtts train with the defaults of base (the duration decoder, frame budget sized
#             to the GPU, CUDA graphs) on an empty compile cache, TRAIN_S of training, the GPU
#             sampled beside it (myxtts monitor)                                < 3.5 min
#             (sizing <= 30 s, train/sizing.py; compiling one shape took 61-71 s on the H100,
#             h100-2026-11-23-before, and one compile now serves every shape; a CUDA graph is
#             recorded per shape; then 60 s)
#   warm      the cold run resumed in a second process, on an empty compile cache of its own
#             with the kernels the cold run saved (RUN/compiled.bin): the warm start a bare
#             machine gets, TRAIN_S/2 of training                                < 1.5 min
#   profile   with what is left: myxtts profile on the cold run's batch size and compiled kernels
#             (top kernels by GPU time, the GPU's busy share of a step, host syncs, the host's
#             launch time), its trace beside it; stopped in time for the record       < 1 min
#   record    the record and the files below                                    seconds
#   in all    < 8 min on an H100; with --deadline 420 the profile runs only where the steps
#             before it finished early
#
# Fallbacks: a kernel check that fails trains model.decoder=autoregressive instead (the record
# says why); a compile that fails, or that shows no "compiled shape" line for COMPILE_STALL_S, is
# killed (TORCH_LOGS=recompiles keeps the reasons in the log) and an eager run gives the
# utilisation figure; a step whose estimate does not fit the time left is skipped.
#
# OUT ends with at most 8 files: gpu_run.log (everything printed), kernels.json, the record
# <gpu>-<date>-after.{json,md} (record.{json,md} with --smoke), monitor.csv (the GPU samples
# of the cold run), rest.tgz (summaries, metrics, reports and logs of every run) and
# profile.tgz (the profile's Chrome trace and report: apart, so that a large trace cannot cost
# the rest). Copy the record into benchmarks/results/ and commit it, whatever it says. The work folder is
# ${TMPDIR:-/tmp}/myxtts-gpu-run-PID, removed at the end.
#
# The text is read as characters, not phonemes: the phoneme front end's wheels (espeak-ng's data,
# about 21 MB) do not fit beside the tree in what a lent machine is sent (64 MiB). The model is
# the same but for its text vocabulary; the text lengths, and so the shapes, differ a little.
#
# --smoke runs every step at toy size on the CPU (tiny preset, the LJSpeech test clips, the kernel
# check in Triton's interpreter, 10 s of training): a check of the script and the record, about
# two minutes on 2 cores; its figures say nothing about a GPU.
#
# Environment: PYTHON (default .venv/bin/python where it exists, else python3); COMMIT, the
# commit the tree is at, for the record where the tree is a copy without .git.
set -uo pipefail

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

SMOKE=0
DEADLINE=420
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --smoke) SMOKE=1; shift ;;
    --deadline)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "gpu_run.sh: --deadline takes whole seconds, got '${2:-}'" >&2; exit 2; }
      DEADLINE=$2; shift 2 ;;
    -*) echo "gpu_run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ]; then
  echo "usage: bash benchmarks/gpu_run.sh [--smoke] [--deadline SECONDS] OUT (see --help)" >&2
  exit 2
fi
EXIT_STOPPED=75  # myxtts train stopped by its time budget, checkpoint written (commands/common.py)
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${TMPDIR:-/tmp}/myxtts-gpu-run-$$
rm -rf "$WORK"
mkdir -p "$WORK/runs"
cd "$ROOT" || exit 2
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=$PWD/.venv/bin/python
else PY=python3
fi
# WORK/site holds the carried wheels; the tree itself is importable without an install step.
export PYTHONPATH="$WORK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/gpu_run.log") 2>&1
TEE=$!

if [ "$SMOKE" = 1 ]; then
  export CUDA_VISIBLE_DEVICES=""  # the CPU, also on a machine with a GPU
  export OMP_NUM_THREADS=1        # one core for the model, one for the loader worker: steadier steps
  export TRITON_INTERPRET=1       # the kernel check in Triton's interpreter
  PRESET=tiny; CORPUS_SRC=tests/fixtures/ljspeech; COPIES=8; PREP_WORKERS=1; WORKERS=1; TRAIN_S=10
  # the clips under 6 s (4 of the 8); small batches, so the speed settles within 10 s
  SET=(text.mode=characters data.max_seconds=6 data.max_buckets=2)
  COLD_SET=(data.frame_budget=1000)
  PROFILE_STEPS=4
  # estimates on 2 CPU cores, seconds: setup corpus cold warm profile record
  EST=(10 40 60 60 40 10); COMPILE_STALL_S=120; ATTENTION_S=20
else
  PRESET=base; CORPUS_SRC=data/demo; COPIES=8; PREP_WORKERS=$(nproc); WORKERS=8; TRAIN_S=60
  SET=(text.mode=characters)
  COLD_SET=()
  PROFILE_STEPS=10
  EST=(30 90 210 90 60 15); COMPILE_STALL_S=240; ATTENTION_S=25
fi
T0=$SECONDS
RESERVE=$((EST[5] + 10))  # the record and the archive of what the steps wrote
left() { echo $((DEADLINE - (SECONDS - T0))); }
: > "$WORK/steps.tsv"  # step, status, seconds, note: the record reads it

# step NAME ESTIMATE_S: run_NAME if its estimate fits the time left, else record it as skipped
step() {
  local name=$1 est=$2 start=$SECONDS rc reserve=$RESERVE
  # the record runs whatever is left: its time was reserved, and a step that overran it should
  # not cost the figures the others measured
  if [ "$name" != record ] && [ $(($(left) - reserve)) -lt "$est" ]; then
    printf '%s\tskipped\t0\tits estimate (%s s) did not fit the %s s left of --deadline %s\n' \
      "$name" "$est" "$(left)" "$DEADLINE" >> "$WORK/steps.tsv"
    echo "== $name: skipped, $(left) s left (its estimate: $est s)"
    return 1
  fi
  echo "== $name ($(left) s left)"
  "run_$name"
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$([ $rc = 0 ] && echo done || echo "failed ($rc)")" \
    "$((SECONDS - start))" "${NOTE:-}" >> "$WORK/steps.tsv"
  NOTE=
  return $rc
}

say() {  # a command as it runs, with the work folder named WORK
  local line="$*"
  echo "+ ${line//$WORK/WORK}"
}

run_setup() {
  echo "machine: $(uname -srm); $(nproc --all) cores; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  if [ "$SMOKE" = 0 ] && compgen -G ".whl/*.whl" > /dev/null; then
    say "pip install --no-index --no-deps --target WORK/site .whl/*.whl"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" .whl/*.whl || return 1
  fi
  # What prepare and training import beyond PyTorch, numpy, scipy and numba: one clear line
  # here rather than a traceback in a later step.
  local check="import sys, soundfile, soxr, librosa.filters, inflect, myxtts.cli, torch; "
  check+="import importlib.util as u; t = u.find_spec('triton') and __import__('triton'); "
  check+="print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, "
  check+="torch.cuda.is_available(), '| triton', t and t.__version__)"
  say "python -c \"$check\""
  "$PY" -c "$check" || { echo "gpu_run.sh: setup failed; scripts/gpu_wheels.sh builds the wheels" \
                               "the steps need into .whl/, to bring along"; return 1; }
}

run_corpus() {
  # the kernel check, then the attention kernels' comparison, run beside prepare: they need
  # the GPU, prepare the CPUs
  say "python benchmarks/gpu_kernels.py --json WORK/kernels.json --timeout-s 120;" \
    "python benchmarks/gpu_attention.py --config $PRESET --json WORK/attention.json --timeout-s $ATTENTION_S"
  { "$PY" benchmarks/gpu_kernels.py --json "$WORK/kernels.json" --timeout-s 120 > "$WORK/kernels.log" 2>&1
    timeout -k 5 $((ATTENTION_S + 10)) "$PY" benchmarks/gpu_attention.py --config "$PRESET" \
      --json "$WORK/attention.json" --timeout-s "$ATTENTION_S" > "$WORK/attention.log" 2>&1; } &
  local kernels=$!
  # a failed prepare returns at once: the GPU checks beside it stop with it
  stop_checks() { pkill -P "$kernels" 2> /dev/null; kill "$kernels" 2> /dev/null; return 1; }
  say "python benchmarks/replicate_corpus.py $CORPUS_SRC WORK/corpus --copies $COPIES"
  "$PY" benchmarks/replicate_corpus.py "$CORPUS_SRC" "$WORK/corpus" --copies "$COPIES" || { stop_checks; return 1; }
  say "myxtts prepare WORK/corpus --out WORK/cache --workers $PREP_WORKERS --config $PRESET ${SET[*]}"
  "$PY" -m myxtts prepare "$WORK/corpus" --out "$WORK/cache" --workers "$PREP_WORKERS" --config "$PRESET" \
    "${SET[@]}" > "$WORK/prepare.log" 2>&1 || { tail -20 "$WORK/prepare.log"; stop_checks; return 1; }
  tail -2 "$WORK/prepare.log"
  wait "$kernels"
  cp "$WORK/kernels.json" "$OUT/kernels.json" 2>/dev/null
  "$PY" -c 'import json, sys; a = json.load(open(sys.argv[1])); print("attention kernels:", a["status"], "| fastest:",
json.dumps(a["fastest"]) if a["fastest"] else "not timed")' "$WORK/attention.json" 2>/dev/null \
    || echo "attention kernels: no report ($(tail -c 200 "$WORK/attention.log" 2>/dev/null | tr '\n' ' '))"
  if "$PY" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' \
      "$WORK/kernels.json" 2>/dev/null; then
    echo "kernel check: passed"
  else
    DECODER=(model.decoder=autoregressive)
    NOTE="kernel check failed: trained model.decoder=autoregressive ($(tail -c 300 "$WORK/kernels.log" | tr '\n\t' '  '))"
    echo "kernel check: FAILED; the runs train model.decoder=autoregressive instead"
    tail -30 "$WORK/kernels.log"
  fi
}

# train NAME [KEY=VALUE ...]: myxtts train to TRAIN_S of training; a compile that fails or shows
# no progress for COMPILE_STALL_S is killed (status 124)
train() {
  local name=$1 run=$WORK/runs/$1 log=$WORK/runs/$1.log
  shift
  say "myxtts train --config $PRESET --data WORK/cache --out WORK/runs/$name ... $*"
  TORCH_LOGS=recompiles "$PY" -m myxtts train --config "$PRESET" --data "$WORK/cache" --out "$run" --no-progress \
    train.compile_cache="$WORK/compile" train.time_budget_s="$TRAIN_S" train.max_steps=1000000 \
    train.log_every=50 train.val_every=1000000 train.sample_every=1000000 train.checkpoint_every=1000000 \
    data.num_workers="$WORKERS" "${SET[@]}" "${DECODER[@]}" "$@" > "$log" 2>&1 &
  local pid=$! last=$SECONDS seen=0 now
  while kill -0 "$pid" 2> /dev/null; do
    sleep 2
    now=$(grep -c "compiled shape\|^step \|compiling the step for shape" "$log")
    if [ "$now" != "$seen" ]; then seen=$now; last=$SECONDS; fi
    if [ "$(left)" -le "$STOP_AT" ]; then
      echo "$(left) s left, what the steps after it need: stopping the run (it checkpoints and sums up)"
      NOTE="stopped with $(left) s left of --deadline $DEADLINE, for the steps after it"
      kill -TERM "$pid"
      for _ in $(seq 20); do kill -0 "$pid" 2> /dev/null || break; sleep 1; done
      kill -KILL "$pid" 2> /dev/null
      break
    fi
    if grep -q "compiling the step for shape" "$log" && ! grep -q "^step " "$log" \
        && [ $((SECONDS - last)) -ge "$COMPILE_STALL_S" ]; then
      echo "no compile progress for $COMPILE_STALL_S s: stopping the run"
      kill -TERM "$pid"; sleep 5; kill -KILL "$pid" 2> /dev/null
      wait "$pid" 2> /dev/null
      tail -5 "$log"
      return 124
    fi
  done
  wait "$pid"
  local rc=$?
  grep -v "^step " "$log" | tail -25
  [ "$rc" = 0 ] || [ "$rc" = "$EXIT_STOPPED" ]
}

run_cold() {
  local mon=()
  STOP_AT=$((RESERVE + EST[3]))  # the warm start and the record still fit after it
  if [ "$SMOKE" = 0 ]; then
    "$PY" -m myxtts monitor --interval 0.5 --out "$OUT/monitor.csv" > "$WORK/monitor.log" 2>&1 &
    mon=($!)
  fi
  rm -rf "$WORK/compile"
  train cold "${COLD_SET[@]}"
  local rc=$?
  [ ${#mon[@]} = 0 ] || kill -INT "${mon[@]}" 2> /dev/null
  if [ "$rc" != 0 ]; then
    # a compile that failed or stalled: an eager run still says how busy the GPU is
    NOTE="the compiled run failed or stalled (exit $rc): an eager run measured instead"
    echo "$NOTE"
    if [ "$(left)" -ge $((TRAIN_S + 60)) ]; then
      train eager "${COLD_SET[@]}" train.compile=off
    fi
    return $rc
  fi
}

run_warm() {
  # a copy, so the cold run's own files stay as they were; resuming reads its plan and checkpoint
  cp -r "$WORK/runs/cold" "$WORK/runs/warm" || return 1
  rm -f "$WORK/runs/warm/summary.json"
  STOP_AT=$RESERVE
  train warm "${COLD_SET[@]}" train.compile_cache="$WORK/compile-warm" train.time_budget_s=$((TRAIN_S / 2))
}

run_profile() {
  # The cold run's frame budget (no batch-size probes again) and its compile cache (the kernels
  # load instead of compiling); stopped where it would eat the record's reserve.
  local budget rc
  budget=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["frame_budget"])' \
    "$WORK/runs/cold/summary.json" 2> /dev/null)
  say "myxtts profile --config $PRESET --data WORK/cache --steps $PROFILE_STEPS --out WORK/profile" \
    "--json WORK/profile.json data.frame_budget=${budget:-auto} ${SET[*]} ${DECODER[*]}"
  timeout -s TERM -k 10 $(($(left) - RESERVE)) "$PY" -m myxtts profile --config "$PRESET" --data "$WORK/cache" \
    --steps "$PROFILE_STEPS" --out "$WORK/profile" --json "$WORK/profile.json" train.compile_cache="$WORK/compile" \
    data.num_workers="$WORKERS" data.frame_budget="${budget:-auto}" "${SET[@]}" "${DECODER[@]}" \
    > "$WORK/profile.log" 2>&1
  rc=$?
  tail -30 "$WORK/profile.log"
  [ "$rc" = 124 ] && NOTE="stopped with $(left) s left of --deadline $DEADLINE, for the record"
  tar -czf "$OUT/profile.tgz" -C "$WORK" profile 2> /dev/null
  return $rc
}

run_record() {
  local args=("$WORK" --out "$OUT")
  [ "$SMOKE" = 0 ] || args+=(--smoke)
  [ -z "${COMMIT:-}" ] || args+=(--commit "$COMMIT")
  say "python benchmarks/gpu_record.py ${args[*]}"
  "$PY" benchmarks/gpu_record.py "${args[@]}"
}

DECODER=()
NOTE=
STOP_AT=$RESERVE
step setup "${EST[0]}" && step corpus "${EST[1]}" && {
  step cold "${EST[2]}"
  [ -f "$WORK/runs/cold/plan.json" ] && step warm "${EST[3]}"
  [ -f "$WORK/runs/cold/summary.json" ] && step profile "${EST[4]}"
}
step record "${EST[5]}"
rc=$?
# Everything else worth reading, small enough to come back: no cache, corpus or compiled kernels.
tar -czf "$OUT/rest.tgz" -C "$WORK" --exclude=cache --exclude=corpus --exclude=compile --exclude=compile-warm \
  --exclude=site --exclude=compiled.bin --exclude=trace.json \
  --exclude='checkpoints' --exclude='tensorboard' --exclude='*.safetensors' . 2> /dev/null
rm -rf "$WORK"
echo "== finished after $((SECONDS - T0)) s; OUT holds: $(cd "$OUT" && ls | tr '\n' ' ')"
exec > /dev/null 2>&1
wait "$TEE"  # the log is whole before the command returns
exit $rc
