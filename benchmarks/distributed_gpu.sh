#!/bin/bash
# The 2-GPU parts of the distributed benchmarks, as run on nvidia-h200-x2 (see docs/distributed.md):
# brute force of the matmul example on 1 vs 2 GPUs (benchmarks/distributed/run.py gpu) and the GPU suite's
# labelling on 1 vs 2 GPUs (benchmarks/gpu_suite/ray_labelling.py); COMPILE=1: compilation fanned out to CPU actors.
# Ray travels as a slimmed copy of its wheel (no Java jars, RLlib, Serve, Tune, Train or dashboard build:
# the full wheel is larger than what a run may carry) plus the wheels the machine lacks.
# usage (from the repository root of the carried copy): bash benchmarks/distributed_gpu.sh WHEELS_DIR OUT_DIR
set -u
WHL=$1; OUT=$2
export PYTHONUNBUFFERED=1
mkdir -p /tmp/ray_site /tmp/whl_site
t0=$(date +%s)
tar xJf "$WHL/ray_slim.tar.xz" -C /tmp/ray_site || echo "ray unpack failed"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/whl_site "$WHL"/*.whl \
  || echo "wheel install failed"
export PYTHONPATH=$PWD/src:/tmp/ray_site:/tmp/whl_site
# every process compiles its own kernels: a later run must not load what an earlier one left in CuPy's disk
# cache (a first run of this script gave the 2-worker labelling a 3.2x "speed-up" that way)
export CUPY_CACHE_IN_MEMORY=1
echo "setup $(( $(date +%s) - t0 )) s"
nvidia-smi -L
python3 -c "import ray, sqlalchemy; print('ray', ray.__version__, 'sqlalchemy', sqlalchemy.__version__)"
if [ "${MATMUL:-1}" = 1 ]; then
  timeout ${MATMUL_CAP:-200} python3 -m benchmarks.distributed.run gpu --sample ${SAMPLE:-200} \
    --max-seconds ${MAX_SECONDS:-150} --out "$OUT/distributed.json"
  echo "matmul part done at $(( $(date +%s) - t0 )) s"
fi
if [ "${LABELLING:-1}" = 1 ]; then
  timeout ${LABELLING_CAP:-200} python3 -m benchmarks.gpu_suite.ray_labelling --gpus 1 2 \
    --benchmarks ${BENCHES:-spmv histogram sort bfs} --commit "${COMMIT:-}" --out "$OUT/distributed_labelling.json"
  echo "labelling part done at $(( $(date +%s) - t0 )) s"
fi
if [ "${COMPILE:-0}" = 1 ]; then  # one GPU: compiling ahead itself vs fed cubins by CPU-only actors
  timeout ${COMPILE_CAP:-150} python3 -m benchmarks.distributed.run compile --sample ${COMPILE_SAMPLE:-60} \
    --compile-workers ${COMPILE_WORKERS:-8} --out "$OUT/distributed.json"
  echo "compile part done at $(( $(date +%s) - t0 )) s"
fi
[ "${REPLAY:-0}" = 1 ] && timeout 100 python3 -m benchmarks.distributed.run replay --jobs 30 --repeats 25 --max-evals 100 --out "$OUT/distributed.json"
echo "all done at $(( $(date +%s) - t0 )) s"
