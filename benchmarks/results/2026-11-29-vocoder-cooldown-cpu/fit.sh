#!/bin/bash
# fit.sh VOC MODEL_SEED: the cool-down vocoder VOC fitted to the 20-minute model's own mels (the README's command, 2,000 steps), then its eval; one thread
V=$1; M=$2
cd $MAIN
export OMP_NUM_THREADS=1 PYTHONPATH=$MAIN
B="$VENV/bin/python -m myxtts"
$B train --stage vocoder --config tiny --data $CACHE --out $OUT/fit-$V-m$M --init-from $OUT/$V --mels-from $RUNS/w01-s$M --no-progress train.max_steps=2000 > $OUT/fit-$V-m$M.log 2>&1
$B eval --checkpoint $RUNS/w01-s$M --data $CACHE --out $OUT/eval-fit-$V-m$M --vocoder $OUT/fit-$V-m$M > $OUT/eval-fit-$V-m$M.log 2>&1
echo done fit $V $M $(date +%T)
