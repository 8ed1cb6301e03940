#!/bin/bash
# ev.sh NAME VOCODER MODEL_SEED: the 20-minute speaker-loss model's held-out sentences through
# VOCODER, main's code (c025d31), one thread; two ran at a time
N=$1; V=$2; M=$3
cd $MAIN
export OMP_NUM_THREADS=1 PYTHONPATH=$MAIN
$VENV/bin/python -m myxtts eval --checkpoint $RUNS/w01-s$M --data $CACHE --out $OUT/eval-$N-m$M --vocoder $V > $OUT/eval-$N-m$M.log 2>&1
echo done $N $M $(date +%T)
