#!/usr/bin/env bash
# One call on a GPU machine that has CUDA, CuPy and torch but none of our CPU-side
# dependencies: install the wheels carried in .whl/ (xdsl, z3, lark, lit, filecheck, ...),
# make the checkout importable as `mirage_xdsl`, then run in turn, each bounded in time:
#   1. the GPU tests (pytest -m gpu, in parallel workers: the time goes to nvcc),
#   2. the six workloads of mirage-bench from a CPU phase prepared beforehand
#      (mirage-bench --prepare-only .bench/prep ...), torch.compile included,
#   3. any extra command given as arguments (e.g. a fuzzer or tuner run).
# GPU_TEST_S / BENCH_S bound steps 1 and 2 in seconds (0 skips the step).
# Logs and reports go to $OUT (or ./device-out). Usage: bash tools/device_check.sh [CMD ...]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/device-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
view=$(mktemp -d)
ln -s "$PWD" "$view/mirage_xdsl"
export PYTHONPATH="$view:${PYTHONPATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
date -u
if [ "${GPU_TEST_S:-240}" != 0 ]; then
  timeout "${GPU_TEST_S:-240}" python -m pytest -q -p no:cacheprovider -m gpu test/ -n 8 -rs >"$out/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?: $(tail -1 "$out/gpu-tests.log")"
fi
if [ -d .bench/prep ] && [ "${BENCH_S:-300}" != 0 ]; then
  timeout "${BENCH_S:-300}" python tools/mirage_bench.py "$out/bench.md" --from .bench/prep >"$out/bench.log" 2>&1
  echo "bench rc=$?"
  grep -A9 '^## Summary' "$out/bench.md" | tail -6 | cut -d'|' -f2,3,7,8,9,10 || true
fi
if [ $# -gt 0 ]; then
  "$@" 2>&1 | tee "$out/extra.log" | tail -15
fi
date -u
