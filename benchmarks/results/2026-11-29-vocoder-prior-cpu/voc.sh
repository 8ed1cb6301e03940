#!/bin/bash
# voc.sh SEED: the 20-minute speaker-loss model through the recordings' vocoder, then fitted to its own mels
S=$1
cd MAIN
export OMP_NUM_THREADS=1 PYTHONPATH=MAIN
B=MAIN/.venv/bin/myxtts
RUN=RUNS/w01-s$S
$B eval --checkpoint $RUN --data CACHE --out OUT/eval-rec-s$S --vocoder OUT/voc > OUT/eval-rec-s$S.log 2>&1
$B train --stage vocoder --config tiny --data CACHE --out OUT/fit-s$S --init-from OUT/voc --mels-from $RUN --no-progress train.max_steps=2000 > OUT/fit-s$S.log 2>&1
$B eval --checkpoint $RUN --data CACHE --out OUT/eval-fit-s$S --vocoder OUT/fit-s$S > OUT/eval-fit-s$S.log 2>&1
echo done $S
