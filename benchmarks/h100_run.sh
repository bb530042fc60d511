#!/usr/bin/env bash
# Everything adaptune measures on the H100, in one command (device tool: carry .whl).
#   CUDA backend tests, adaptune vs Kernel Tuner brute force (CUDA), and full recorded search spaces
#   of the examples for the search benchmark. Results land in $OUT.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
echo "${ADAPTUNE_COMMIT:-unknown}" > "$OUT/commit.txt"  # the device copy has no .git: pass the commit in
case "${1:-all}" in
  tests|all)
    python3 -m pytest -q -x tests/test_backends_cuda.py 2>&1 | tail -5 ;;&
  kt|all)
    timeout 540 python3 -m benchmarks.vs_kernel_tuner.run benchmarks/vs_kernel_tuner/specs/matmul_h100_t1.json --backend cuda \
        --out "$OUT" --db "$OUT/h100.db" ;;&
  record|all)
    for ex in reduction convolution; do
      timeout 280 python3 -m adaptune tune examples/$ex/problem.py --backend cuda --repeats 5 --db "$OUT/h100.db" \
          --json --timeout 5 | tee "$OUT/tune_$ex.json"
    done
    python3 -m adaptune show --db "$OUT/h100.db" --top 3 ;;
esac
