#!/bin/bash
# English → Persian with rehearsal: the joined corpus of run.sh (English and Persian), prepared
# with --match the English run, fine-tuned M steps from it. Usage: rehearse.sh OUT [M]
# (OUT as run.sh made it).
set -ex
OUT=$1; M=${2:-600}
my() { python -m myxtts "$@"; }
my prepare "$OUT/bilingual" --out "$OUT/c-ftmix" --config tiny --match "$OUT/r-en"
my train --config tiny --data "$OUT/c-ftmix" --out "$OUT/r-ftmix" --init-from "$OUT/r-en" --no-progress train.max_steps=$M
my eval --checkpoint "$OUT/r-ftmix" --step $M --data "$OUT/c-ft" --out "$OUT/e-ftmix-fa"
my eval --checkpoint "$OUT/r-ftmix" --step $M --data "$OUT/c-en" --out "$OUT/e-ftmix-en"
