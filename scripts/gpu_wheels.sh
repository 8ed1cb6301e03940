#!/usr/bin/env bash
# The wheels benchmarks/gpu_run.sh needs on a GPU machine that has PyTorch but no package index,
# for CPython 3.12 on manylinux x86_64, into .whl/ (ignored by git; the setup phase installs
# them from there without an index):
#
#   bash scripts/gpu_wheels.sh      # here, with PyPI reachable, after `make setup`
#
# Only what the phases import and that machine lacks (it has torch, numpy, scipy, numba, joblib,
# msgpack, lazy-loader, cloudpickle, requests, pyyaml, safetensors, tqdm, nvidia-ml-py):
#   soundfile + cffi (its compiled backend)      decoding the corpus
#   soxr                                         resampling, imported with the audio front end
#   librosa + decorator, pooch, platformdirs     the mel filterbank (librosa.filters, at prepare
#                                                and in training); not the rest of librosa's
#                                                needs (audioread, scikit-learn), which it does
#                                                not import
#   inflect + jaraco.functools, more-itertools,  numbers spelled out in the text
#   typeguard
# Not the phoneme front end: the runs read characters (see benchmarks/gpu_run.sh).
# Versions: those in this checkout's .venv, the ones the tests run with.
#
# The machine is sent the tree (tracked and untracked files git does not ignore) and the
# carried folders, 64 MiB in all: this prints the total and fails if the wheels do not fit.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WHEELS=(soundfile cffi soxr librosa decorator pooch platformdirs inflect jaraco.functools
        more-itertools typeguard)
LIMIT_MIB=64

pins=()
for name in "${WHEELS[@]}"; do
  if ! v=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name" 2>/dev/null); then
    echo "gpu_wheels.sh: $name is not installed for $PY; run make setup first" >&2
    exit 2
  fi
  pins+=("$name==$v")
done

rm -rf .whl
# Each manylinux tag pip should accept is named: pip matches them exactly (soundfile and soxr
# ship manylinux_2_27/2_28 wheels only, which a glibc of 2.28 or newer runs).
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${pins[@]}"

wheels=$(du -cb .whl/*.whl | tail -1 | cut -f1)
tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "$(ls .whl/*.whl | wc -l) wheels in .whl/: $(mib "$wheels") MiB; with the tree ($(mib "$tree") MiB)" \
     "$(mib $((wheels + tree))) MiB of $LIMIT_MIB"
if [ $((wheels + tree)) -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "gpu_wheels.sh: the tree and the wheels are over $LIMIT_MIB MiB" >&2
  exit 1
fi
