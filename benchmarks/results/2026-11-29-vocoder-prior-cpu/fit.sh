#!/bin/bash
# fit.sh SEED: the prior vocoder fitted to the 20-minute speaker-loss model's mels, then its eval
S=$1
cd TREE
export OMP_NUM_THREADS=1 PYTHONPATH=TREE PRIOR=interp_flat
B="MAIN/.venv/bin/python -m myxtts"
$B train --stage vocoder --config tiny --data CACHE --out OUT/viffit-s$S --init-from OUT/vif --mels-from RUNS/w01-s$S --no-progress train.max_steps=2000 vocoder.magnitude_prior=true > OUT/viffit-s$S.log 2>&1
$B eval --checkpoint RUNS/w01-s$S --data CACHE --out OUT/eval-viffit-s$S --vocoder OUT/viffit-s$S > OUT/eval-viffit-s$S.log 2>&1
echo done $S
