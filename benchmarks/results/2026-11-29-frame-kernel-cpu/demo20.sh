#!/bin/bash
# demo20.sh TAG SEED [SETTING...] : the 20-minute demo (the demo's command with a 20-minute budget)
# in $OUT/TAG-sSEED, then its held-out sentences and the 20 new ones scored by `myxtts eval`
# through Griffin-Lim. Run from a checkout; CACHE is the prepared demo corpus. Two at a time,
# one thread each.
T=$1; S=$2; shift 2
export OMP_NUM_THREADS=1
python -m myxtts train --config tiny --data $CACHE --out $OUT/$T-s$S --no-progress train.max_steps=13333 train.time_budget_s=1200 train.seed=$S "$@" > $OUT/$T-s$S.log 2>&1
python -m myxtts eval --checkpoint $OUT/$T-s$S --data $CACHE --out $OUT/eval-$T-s$S --vocoder griffin-lim > $OUT/eval-$T-s$S.log 2>&1
python -m myxtts eval --checkpoint $OUT/$T-s$S --data $CACHE --out $OUT/evalnew-$T-s$S --vocoder griffin-lim --sentences data/demo/new_sentences.txt > $OUT/evalnew-$T-s$S.log 2>&1
