#!/bin/bash
# upto.sh TAG SEED... : train each seed to step 400 with the demo's command (checkpoints every 100),
# then the latents' spread at each checkpoint, a line each in $OUT/upto.txt. Environment: ROOT, the
# tree to run (a checkout with or without conv-norm.diff); CACHE, the prepared demo corpus; OUT;
# EXTRA, settings added to the train command (none here; the speaker-loss record's weights).
TAG=$1; shift
cd ${ROOT:-.}
for s in "$@"; do
  out=$OUT/$TAG-s$s
  rm -rf $out
  PYTHONPATH=${ROOT:-.} OMP_NUM_THREADS=1 python -m myxtts train --config tiny --data $CACHE --out $out --no-progress \
    train.max_steps=13333 train.time_budget_s=1200 train.seed=$s train.checkpoint_every=100 train.keep_last=10 train.val_every=100000 $EXTRA > $out.log 2>&1 &
  pid=$!
  while [ ! -f $out/checkpoints/step-00000400/model.safetensors ]; do sleep 2; kill -0 $pid 2>/dev/null || break; done
  sleep 3; kill $pid 2>/dev/null; wait $pid 2>/dev/null
  for st in 100 200 300 400; do
    r=$(PYTHONPATH=${ROOT:-.} OMP_NUM_THREADS=1 python benchmarks/results/2026-11-29-vocoder-new-rate-cpu/reference_spread.py $CACHE $out/checkpoints/step-00000$st/model.safetensors 2>&1 | grep -v Warn | grep "spread\|norm_kv" | tr '\n' ' ')
    echo "$TAG $s $st $r" >> $OUT/upto.txt
  done
  rm -rf $out/checkpoints/*/state.pt
done
