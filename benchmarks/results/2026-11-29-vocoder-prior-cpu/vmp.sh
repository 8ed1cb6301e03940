#!/bin/bash
# vmp.sh NAME [overrides]: the vocoder on the recordings, 3,000 steps, from the worktree
N=$1; shift
cd TREE
export OMP_NUM_THREADS=${T:-2} PYTHONPATH=TREE
MAIN/.venv/bin/python -m myxtts train --stage vocoder --config tiny --data CACHE --out OUT/$N --no-progress train.max_steps=3000 "$@" > OUT/$N.log 2>&1
echo done $N
