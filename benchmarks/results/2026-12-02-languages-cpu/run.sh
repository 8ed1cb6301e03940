#!/bin/bash
# The step-matched runs of the language record, as a user types them. N steps for each
# one-language model and the two-language one; English then M steps of Persian by --init-from,
# against Persian alone for N+M steps. Usage: run.sh OUT [N] [M]
set -ex
OUT=$1; N=${2:-1200}; M=${3:-600}
HERE=$(cd "$(dirname "$0")" && pwd)
my() { python -m myxtts "$@"; }
mkdir -p "$OUT"
python "$HERE/bilingual_corpus.py" "$OUT/bilingual"
my prepare data/demo --out "$OUT/c-en" --config tiny
my prepare data/demo-fa --out "$OUT/c-fa" --config tiny --language fa
my prepare "$OUT/bilingual" --out "$OUT/c-bi" --config tiny
my train --config tiny --data "$OUT/c-en" --out "$OUT/r-en" --no-progress train.max_steps=$N
my train --config tiny --data "$OUT/c-fa" --out "$OUT/r-fa" --no-progress train.max_steps=$N text.language=fa
my train --config tiny --data "$OUT/c-bi" --out "$OUT/r-bi" --no-progress train.max_steps=$N
my prepare data/demo-fa --out "$OUT/c-ft" --language fa --match "$OUT/r-en"
my train --config tiny --data "$OUT/c-ft" --out "$OUT/r-ft" --init-from "$OUT/r-en" --no-progress \
    train.max_steps=$M text.language=fa
my train --config tiny --data "$OUT/c-fa" --out "$OUT/r-fa2" --no-progress train.max_steps=$((N + M)) text.language=fa
my eval --checkpoint "$OUT/r-en" --step $N --data "$OUT/c-en" --out "$OUT/e-en"
my eval --checkpoint "$OUT/r-fa" --step $N --data "$OUT/c-fa" --out "$OUT/e-fa"
my eval --checkpoint "$OUT/r-bi" --step $N --data "$OUT/c-bi" --out "$OUT/e-bi"
my eval --checkpoint "$OUT/r-ft" --step $M --data "$OUT/c-ft" --out "$OUT/e-ft-fa"
my eval --checkpoint "$OUT/r-ft" --step $M --data "$OUT/c-en" --out "$OUT/e-ft-en"
my eval --checkpoint "$OUT/r-fa2" --step $((N + M)) --data "$OUT/c-fa" --out "$OUT/e-fa2"
python "$HERE/cross_lingual.py" "$OUT" $N
