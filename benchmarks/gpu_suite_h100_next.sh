#!/usr/bin/env bash
# The GPU suite's next H100 run (round 4), one command for the device tool (about 5 min: smoke ~25 s, run
# ~210 s, analyse ~60 s):
#   ADAPTUNE_COMMIT=<commit> bash benchmarks/gpu_suite_h100_next.sh
# Every kernel is checked against NumPy/SciPy first (smoke), then all four benchmarks are labelled, trained
# and dispatched (test seed 2024 as rounds 2-3, so the numbers compare); new in round 4: the distilled
# host-metadata tree is fitted after training and its first call (`DistilledDispatch.bind`) timed on every
# test input, and best fixed is reported two ways. Results land in $OUT (gpu_suite_h100.{json,md} with the
# round-3 report appended, raw.json, smoke.log); copy them to benchmarks/results/.
# A CPU pilot of the same script (PoCL): DEVICE=opencl RUN_ARGS="--scale 0.1 --size-scale 0.01" OUT=/tmp/p bash ...
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
PY=${PYTHON:-python3}
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.txt"
{ time $PY -m benchmarks.gpu_suite.run smoke --device "${DEVICE:-cuda}" ; } > "$OUT/smoke.log" 2>&1; tail -4 "$OUT/smoke.log"
# shellcheck disable=SC2086  # RUN_ARGS holds several arguments
timeout 420 $PY -m benchmarks.gpu_suite.run run --out "$OUT" --commit "${ADAPTUNE_COMMIT:-unknown}" \
    --device "${DEVICE:-cuda}" ${RUN_ARGS:-} 2>&1 | tail -12
$PY -m benchmarks.gpu_suite.run analyse "$OUT/raw.json" --out "$OUT" --stem gpu_suite_h100 --jobs 4 \
    --previous benchmarks/gpu_suite/results/gpu_suite_h100.md 2>&1 | grep -E "distilled|fraction of oracle|best fixed|share" | head -20
