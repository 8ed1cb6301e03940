#!/bin/bash
# vt.sh NAME TREE SEED: the vocoder on the recordings, 3,000 steps, from TREE (main at c025d31 for
# the old schedule, 49f37c3 for the cool-down), one thread; two ran at a time
N=$1; TREE=$2; S=$3
cd $TREE
export OMP_NUM_THREADS=1 PYTHONPATH=$TREE
$VENV/bin/python -m myxtts train --stage vocoder --config tiny --data $CACHE --out $OUT/$N --no-progress train.max_steps=3000 train.seed=$S > $OUT/$N.log 2>&1
echo done $N $(date +%T)
