#!/bin/bash
# The 2-GPU part of benchmarks/distributed.py, as run on nvidia-h200-x2 (see docs/distributed.md).
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
echo "setup $(( $(date +%s) - t0 )) s"
nvidia-smi -L
python3 -c "import ray, sqlalchemy; print('ray', ray.__version__, 'sqlalchemy', sqlalchemy.__version__)"
timeout 240 python3 benchmarks/distributed.py gpu --sample ${SAMPLE:-150} --max-seconds ${MAX_SECONDS:-100} --out "$OUT/distributed.json"
echo "gpu part done at $(( $(date +%s) - t0 )) s"
[ "${REPLAY:-0}" = 1 ] && timeout 100 python3 benchmarks/distributed.py replay --jobs 30 --repeats 25 --max-evals 100 --out "$OUT/distributed.json"
echo "all done at $(( $(date +%s) - t0 )) s"
