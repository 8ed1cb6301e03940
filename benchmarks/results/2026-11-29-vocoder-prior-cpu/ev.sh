#!/bin/bash
# ev.sh TAG SEED VOCODER PRIOR: the 20-minute speaker-loss model's held-out sentences through a vocoder of the worktree
cd TREE
export OMP_NUM_THREADS=1 PYTHONPATH=TREE PRIOR=$4
MAIN/.venv/bin/python -m myxtts eval --checkpoint RUNS/w01-s$2 --data CACHE --out OUT/eval-$1-s$2 --vocoder $3 > OUT/eval-$1-s$2.log 2>&1
echo done $1 $2
