#!/bin/bash
# Issue 12's GPU part, one device call per GPU (run it on the H100, then the same on the H200):
#   1. proxies + GPU-suite labels of SpMV, histogram, sort and BFS at size scale 0.05, seed 2024 (the inputs of
#      the committed H100/H200/PoCL labels; BFS is new) -> $OUT/proxies_TAG.json, $OUT/gpu_suite_TAG_raw.json;
#   2. profiler counters of every suite kernel (benchmarks/gpu_suite/run.py smoke under ncu) when ncu is installed
#      -> $OUT/counters_TAG.csv (the input of Nitro's profile -> intensity models; not parsed yet).
# usage, from the repository root of the carried copy:  ADAPTUNE_COMMIT=<sha> bash benchmarks/transfer_gpu.sh h100
set -u
TAG=${1:?usage: transfer_gpu.sh TAG (h100 or h200)}
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu_$TAG.txt"
timeout ${LABEL_CAP:-420} python3 -m benchmarks.transfer.labels --device cuda --out "$OUT" --tag "$TAG" \
  --commit "${ADAPTUNE_COMMIT:-unknown}" --size-scale 0.05 --seed 2024 --benchmarks spmv histogram sort bfs \
  2>&1 | tail -40
echo "labels done at $(( $(date +%s) - t0 )) s"
if command -v ncu >/dev/null 2>&1; then
  timeout ${NCU_CAP:-150} ncu --csv --target-processes all --launch-count ${NCU_LAUNCHES:-600} \
    --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,gpu__time_duration.sum \
    python3 -m benchmarks.gpu_suite.run smoke --device cuda > "$OUT/counters_$TAG.csv" 2> "$OUT/counters_$TAG.err"
  echo "ncu rc $? at $(( $(date +%s) - t0 )) s; $(wc -l < "$OUT/counters_$TAG.csv") lines"
else
  echo "no ncu on this machine: no profiler counters" | tee "$OUT/counters_$TAG.txt"
fi
