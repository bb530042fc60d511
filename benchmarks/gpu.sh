#!/usr/bin/env bash
# Run any study on a GPU machine (a bare one will do: no network, no .git), writing everything under $OUT.
#
#   bash benchmarks/gpu.sh <study>[.<part>] [args...]   # python3 -m benchmarks.<study>.<part|run> [args...]
#                                                       #   --out $OUT/<study> is added unless you pass --out
#   bash benchmarks/gpu.sh <recipe> [args...]           # a study's whole GPU session, in one call:
#
#   gpu_suite              smoke (every kernel vs NumPy/SciPy), run (label, train, dispatch), analyse  ~5 min
#   lscat_next             LS-CAT examples re-timed, run 5 re-measured (run5b), new kernels with the index
#                          buffer rule (run6); needs the working set: carry data/lscat_work         <= 9 min
#   transfer TAG           proxies + GPU-suite labels of SpMV, histogram, sort, BFS (size scale 0.05,
#                          seed 2024) as TAG (h100, h200), and ncu counters where ncu exists       <= 10 min
#   distributed WHEELS     the 2-GPU parts (matmul on 1 vs 2 Ray actors, suite labelling on 1 vs 2 GPUs);
#                          WHEELS: a folder with ray_slim.tar.xz and the wheels the machine lacks
#   kernel_tuner           CUDA backend tests, adaptune vs Kernel Tuner brute force, recorded spaces
#   hotpath_repeats [N [ARGS]]  the cached flush's host time (hotpath --parts overhead ARGS) in N fresh processes,
#                          each after one of the baseline tree in .carry/flush_base where carried (made with
#                          `git archive <base> src benchmarks ':(exclude)benchmarks/*/results' | tar -x -C
#                          .carry/flush_base`, 24 MB); BASE_COMMIT names it. First tests/lang on CUDA  ~5-6 min
#   kt_examples BATCHES    Kernel Tuner's CUDA examples, import line swapped, beside Kernel Tuner 1.5 (BATCH 0:
#                          the drop-in's CUDA test; 1-4: the examples, each refereed; 5: the worker's start
#                          phases, and before/after with .carry/before: a call of its own; 6: reduction.py,
#                          adaptune alone, 400 s; 8: the examples $KT_EXAMPLES names, KT_LIMIT_S each, default 60; several as 0,4 in one call, which stops
#                          starting examples before KT_DEADLINE_S, default 540 s; KT_REFEREE_ROUNDS, default 5);
#                          carry .carry/kt  <= 10 min
#                          "kt_examples spread" with KT_GROUPS: one group of examples per GPU at once (kt_spread)
#                          KT_TOOLS (batch 8, spread): adaptune alone for spaces Kernel Tuner cannot finish;
#                          "kt_examples opencl" with KT_OPENCL_GROUPS: the OpenCL examples on the machine's PoCL,
#                          the two tools at once on two halves of the cores (kt_opencl); carry .carry/cl too;
#                          KT_LANG=opencl: batch 8 on the machine's PoCL, both tools one after another on all cores;
#                          KT_TAG: a suffix for batch 8's results folder (several runs of it in one call)
#                          KT_STORE_DIR: adaptune's stores kept there, so a later call resumes what the limit stopped
#                          (they come back gzipped in $OUT with store_gaps.py's account of where the time went)
#
# Environment: OUT (default out), ADAPTUNE_COMMIT (recorded as the commit: a device's copy may hold an older
# .git, so without it the commit is HEAD, with "+changes" where the files differ from it),
# PYTHON (default python3). A folder .whl/ with an adaptune wheel is installed first when present.
# CPU pilot of any recipe: DEVICE=opencl (gpu_suite, transfer) with small sizes, e.g.
#   DEVICE=opencl RUN_ARGS="--scale 0.1 --size-scale 0.01" OUT=/tmp/p bash benchmarks/gpu.sh gpu_suite
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
OUT=${OUT:-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=""
if compgen -G ".whl/*.whl" > /dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && SITE=/tmp/site:
fi
export PYTHONPATH=$SITE$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -z "${ADAPTUNE_COMMIT:-}" ]; then  # a device's copy may carry an older .git than its files: then say so
  ADAPTUNE_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && ADAPTUNE_COMMIT="$ADAPTUNE_COMMIT+changes"
fi
export ADAPTUNE_COMMIT
echo "$ADAPTUNE_COMMIT" > "$OUT/commit.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv 2>&1 | tee "$OUT/gpu.txt"
t0=$(date +%s)
elapsed() { echo "$1 at $(( $(date +%s) - t0 )) s"; }

gpu_suite() {  # round 4 of the GPU suite (issue 15); the report is named after the device (gpu_suite_h100.*)
  local dev=${DEVICE:-cuda}
  { time $PY -m benchmarks.gpu_suite.run smoke --device "$dev"; } > "$OUT/smoke.log" 2>&1; tail -4 "$OUT/smoke.log"
  # shellcheck disable=SC2086  # RUN_ARGS holds several arguments
  timeout 420 $PY -m benchmarks.gpu_suite.run run --out "$OUT" --device "$dev" ${RUN_ARGS:-} 2>&1 | tail -12
  $PY -m benchmarks.gpu_suite.run analyse "$OUT/raw.json" --out "$OUT" --jobs 4 \
      --previous benchmarks/gpu_suite/results/gpu_suite_h100.md 2>&1 \
      | grep -E "distilled|fraction of oracle|best fixed|share" | head -20
}

hotpath_repeats() {  # issue 24: the spread of the cached flush between processes, baseline and this tree alternating
  # (and pinned with taskset where HOTPATH_PIN names cores)
  local n=${1:-3} base=.carry/flush_base out i
  shift || true
  out=$(mkdir -p "$OUT/hotpath_repeats" && cd "$OUT/hotpath_repeats" && pwd)
  # first the lang tests through NVRTC (the CUDA-graph paths run only there)
  ADAPTUNE_LANG_TEST_DEVICE=cuda timeout 240 $PY -m pytest -q -p no:cacheprovider tests/lang/ > "$out/lang_cuda_tests.log" 2>&1
  elapsed "lang tests on CUDA"; tail -3 "$out/lang_cuda_tests.log"
  for i in $(seq "$n"); do
    if [ -d "$base/src" ]; then
      (cd "$base" && ADAPTUNE_COMMIT=${BASE_COMMIT:-base} PYTHONPATH=$PWD/src:$PWD \
        timeout 150 $PY -m benchmarks.hotpath.run --parts overhead "$@" --out "$out/base_$i" > "$out/base_$i.log" 2>&1)
      elapsed "base $i"; grep -A3 "^| flush_host" "$out/base_$i.log" | head -3
    fi
    timeout 150 $PY -m benchmarks.hotpath.run --parts overhead "$@" --out "$out/new_$i" > "$out/new_$i.log" 2>&1
    elapsed "new $i"; grep -A3 "^| flush_host" "$out/new_$i.log" | head -3
    if [ -n "${HOTPATH_PIN:-}" ]; then  # this tree again, pinned to the cores HOTPATH_PIN lists (taskset -c)
      taskset -c "$HOTPATH_PIN" timeout 150 $PY -m benchmarks.hotpath.run --parts overhead "$@" --out "$out/pinned_$i" \
          > "$out/pinned_$i.log" 2>&1
      elapsed "pinned $i"; grep -A3 "^| flush_host" "$out/pinned_$i.log" | head -3
    fi
  done
  $PY -m benchmarks.hotpath.repeats "$out" | tail -16
}

lscat_next() {  # issue 13 / 26: LS-CAT run 6 (see benchmarks/lscat/README.md for the merge afterwards)
  [ -f data/lscat_work/workset.jsonl ] || { echo "carry data/lscat_work (python -m benchmarks.lscat.workset)"; exit 2; }
  $PY - "$OUT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open("data/lscat_h100/kernels.csv", newline="")))
open(f"{sys.argv[1]}/measured.txt", "w").write("\n".join(r["kernel"] for r in rows) + "\n")
open(f"{sys.argv[1]}/run5_ok.txt", "w").write("\n".join(r["kernel"] for r in rows
                                                        if r["run"] == "5" and r["status"] == "ok") + "\n")
PY
  timeout 120 $PY -m benchmarks.lscat.examples --out "$OUT/examples.json" --repeats 20 --deadline-s 100
  timeout 150 $PY -m benchmarks.lscat.measure --work data/lscat_work --out "$OUT/run5b" --include "$OUT/run5_ok.txt" \
      --batches 5 --batch-us 100 --deadline-s 120
  timeout 270 $PY -m benchmarks.lscat.measure --work data/lscat_work --out "$OUT/run6" --exclude "$OUT/measured.txt" \
      --rule index --batches 5 --batch-us 100 --deadline-s 230
  ls -la "$OUT" "$OUT"/run*
}

transfer() {  # issue 12 / 26: one device's labels and proxies for the cross-device study
  local tag=${1:?usage: gpu.sh transfer TAG (h100 or h200)}
  timeout "${LABEL_CAP:-420}" $PY -m benchmarks.transfer.labels --device "${DEVICE:-cuda}" --out "$OUT" --tag "$tag" \
      --size-scale 0.05 --seed 2024 --benchmarks spmv histogram sort bfs 2>&1 | tail -40
  elapsed "labels done"
  if command -v ncu > /dev/null 2>&1; then  # per benchmark: one run over every kernel ran out of launches
    local m=dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
    m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum
    m=$m,l1tex__t_set_accesses_pipe_lsu_mem_global_op_red.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum
    m=$m,sm__inst_executed.sum,dram__bytes.sum,gpu__time_duration.sum
    local b k
    for b in spmv:"regex:spmv_" histogram:"regex:histogram_" \
        sort:"regex:(sort_tiles|merge_pass|bitonic|count_order|reverse_copy|RadixSort)" bfs:"regex:bfs_"; do
      k=${b#*:}; b=${b%%:*}
      timeout "${NCU_CAP:-100}" ncu --csv --target-processes all -k "$k" --launch-count "${NCU_LAUNCHES:-150}" \
        --metrics "$m" $PY -m benchmarks.gpu_suite.run run --benchmarks "$b" --scale 0.1 --size-scale 0.05 \
        --out "/tmp/ncu_$b" > "$OUT/counters_${b}_$tag.csv" 2> "$OUT/counters_${b}_$tag.err"
      elapsed "ncu $b rc $?"
    done
  else
    echo "no ncu on this machine: no profiler counters" | tee "$OUT/counters_$tag.txt"
  fi
}

distributed() {  # 2 GPUs (nvidia-h200-x2 / h100-x2); Ray travels as a slimmed copy of its wheel
  local whl=${1:?usage: gpu.sh distributed WHEELS_DIR}
  mkdir -p /tmp/ray_site /tmp/whl_site
  tar xJf "$whl/ray_slim.tar.xz" -C /tmp/ray_site || echo "ray unpack failed"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/whl_site "$whl"/*.whl \
    || echo "wheel install failed"
  export PYTHONPATH=$PYTHONPATH:/tmp/ray_site:/tmp/whl_site
  # every process compiles its own kernels: a later run must not load what an earlier one left in CuPy's
  # disk cache (a first run gave the 2-worker labelling a 3.2x "speed-up" that way)
  export CUPY_CACHE_IN_MEMORY=1
  nvidia-smi -L
  [ "${MATMUL:-1}" = 1 ] && timeout "${MATMUL_CAP:-200}" $PY -m benchmarks.distributed.run gpu \
      --sample "${SAMPLE:-200}" --max-seconds "${MAX_SECONDS:-150}" --out "$OUT" && elapsed "matmul part done"
  [ "${LABELLING:-1}" = 1 ] && timeout "${LABELLING_CAP:-200}" $PY -m benchmarks.gpu_suite.ray_labelling \
      --gpus 1 2 --benchmarks ${BENCHES:-spmv histogram sort bfs} --out "$OUT" && elapsed "labelling part done"
  [ "${COMPILE:-0}" = 1 ] && timeout "${COMPILE_CAP:-150}" $PY -m benchmarks.distributed.run compile \
      --sample "${COMPILE_SAMPLE:-60}" --compile-workers "${COMPILE_WORKERS:-8}" --out "$OUT" && elapsed "compile done"
  [ "${REPLAY:-0}" = 1 ] && timeout 100 $PY -m benchmarks.distributed.run replay --jobs 30 --repeats 25 \
      --max-evals 100 --out "$OUT"
  return 0
}

kernel_tuner() {  # CUDA backend tests, adaptune vs Kernel Tuner (CUDA), full recorded spaces of two examples
  $PY -m pytest -q -x tests/test_backends_cuda.py 2>&1 | tail -5
  timeout 540 $PY -m benchmarks.vs_kernel_tuner.run benchmarks/vs_kernel_tuner/specs/matmul_h100_t1.json \
      --backend cuda --out "$OUT" --db "$OUT/h100.db"
  for ex in reduction convolution; do
    timeout 280 $PY -m adaptune tune "examples/$ex/problem.py" --backend cuda --repeats 5 --db "$OUT/h100.db" \
        --json --timeout 5 | tee "$OUT/tune_$ex.json"
  done
  $PY -m adaptune show --db "$OUT/h100.db" --top 3
}

kt_examples() {  # issue 22: Kernel Tuner's CUDA examples, adaptune beside Kernel Tuner 1.5; carry .carry/kt
  # (the wheels the machine lacks and the examples: benchmarks/kt_examples/README.md); BATCH 0 is the drop-in's
  # own CUDA test, 1-4 a share of the examples each; BATCHES "0,4" runs several in this call, and no example
  # starts unless it can end (both tools at their time limit) before KT_DEADLINE_S seconds of the call
  local batches=${1:-1} c=.carry/kt need="" examples pair batch deadline=${KT_DEADLINE_S:-540} limit tools
  [ "$batches" = 5 ] || for pair in kernel_tuner:kernel_tuner constraint:python_constraint2 xmltodict:xmltodict jsonschema:jsonschema \
      jsonschema_specifications:jsonschema_specifications referencing:referencing rpds:rpds_py attrs:attrs \
      sqlalchemy:sqlalchemy greenlet:greenlet orjson:orjson pandas:pandas dateutil:python_dateutil pytz:pytz tzdata:tzdata \
      six:six jinja2:jinja2 markupsafe:markupsafe matplotlib:matplotlib contourpy:contourpy cycler:cycler \
      fontTools:fonttools kiwisolver:kiwisolver pyparsing:pyparsing PIL:pillow; do
    $PY -c "import ${pair%%:*}" 2>/dev/null || need="$need $(ls $c/whl/${pair##*:}-*.whl)"
  done
  if [ -n "$need" ]; then
    # shellcheck disable=SC2086  # one wheel per word
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/kt_site $need || return 1
    export PYTHONPATH=/tmp/kt_site:$PYTHONPATH
  fi
  if [ "${KT_LANG:-cuda}" = opencl ] || [ "$batches" = opencl ]; then  # pyopencl for Python 3.12 (.carry/cl)
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/cl_site .carry/cl/*.whl \
      || return 1
    export PYTHONPATH=/tmp/cl_site:$PYTHONPATH
  fi
  elapsed "wheels ready"
  [ "$batches" = opencl ] && { kt_opencl; return; }
  # Kernel Tuner's lang="CUDA" backend is PyCUDA (no wheel): its CuPy backend instead (never for OpenCL examples,
  # which pass no lang either)
  [ "${KT_LANG:-cuda}" = cuda ] && export KT_CUDA_LANG=CuPy
  [ "$batches" = spread ] && { kt_spread; return; }
  for batch in ${batches//,/ }; do
    limit=60 tools=kernel_tuner,adaptune
    case "$batch" in
      0) timeout 200 $PY -m pytest -q -p no:cacheprovider tests/integrations/test_kernel_tuner_cuda.py 2>&1 | tail -15
         elapsed "batch 0 done"; continue ;;
      5) # the worker's start phase by phase (no Kernel Tuner needed), and before/after against the tree carried
         # in .carry/before (git archive BEFORE_COMMIT src | tar -x -C .carry/before) when there is one
         # (CPU pilot: KT_WORKER_BACKEND=opencl)
         timeout 150 $PY -m benchmarks.kt_examples.worker_start --backend "${KT_WORKER_BACKEND:-cuda}" --rounds 7 \
             --out "$OUT/worker_start" 2>&1 | tail -4
         cat "$OUT/worker_start/worker_start.md"
         [ -d .carry/before/src ] && timeout 380 $PY -m benchmarks.kt_examples.fixed_cost --before .carry/before \
             --backend "${KT_WORKER_BACKEND:-cuda}" --rounds 5 --out "$OUT/fixed_cost" 2>&1 | tail -2 && cat "$OUT/fixed_cost/fixed_cost.md"
         elapsed "batch 5 done"; continue ;;
      1) examples=convolution.py,convolution_correct.py,matmul.py,sepconv.py ;;
      2) examples=sepconv_parallel.py,expdist.py,reduction.py,spmv.py,stencil.py,zeromeanfilter.py ;;
      3) examples=convolution_streams.py,pnpoly.py,pnpoly_cupy.py,texture.py,accuracy.py,test_vector_add.py,test_vector_add_parameterized.py,vector_add_parallel.py ;;
      4) examples=vector_add.py,vector_add_codegen.py,vector_add_cupy.py,vector_add_custom_strategy.py,vector_add_jinja.py,vector_add_jinja2.py,vector_add_metric.py,vector_add_nvcuda.py,vector_add_observers.py,vector_add_blocksize.py,vector_add_defines.py,python_kernel.py,python_kernel_cupy.py,vector_add_observers_pmt.py,vector_add_tegra_observer.py,vector_add_observers_ncu.py,going_green_performance_model.py ;;
      6) examples=reduction.py limit=400 tools=adaptune ;;  # its 12 calls through, adaptune alone (KT passed 170 s)
      7) examples=vector_add_jinja2.py limit=420 tools=adaptune ;;  # its 3 072 configurations, adaptune alone
      8) examples=${KT_EXAMPLES:?batch 8 runs the examples KT_EXAMPLES names (file names, comma-separated)}
         limit=${KT_LIMIT_S:-60} tools=${KT_TOOLS:-$tools} ;;
      *) echo "kt_examples: batches 0-8"; return 1 ;;
    esac
    local left=$(( deadline - $(date +%s) + t0 ))
    [ "$left" -gt 30 ] || { echo "batch $batch: no time left"; continue; }
    timeout $(( left + 30 )) $PY -m benchmarks.kt_examples.run --kt-repo $c/kernel_tuner --lang "${KT_LANG:-cuda}" \
        --time-limit "$limit" --tools "$tools" --examples "$examples" --deadline-s "$left" ${KT_STORE_DIR:+--store-dir "$KT_STORE_DIR"} \
        --referee-rounds "${KT_REFEREE_ROUNDS:-5}" --device "$(kt_device)" --out "$OUT/kt_examples_$batch${KT_TAG:-}"
    elapsed "batch $batch done"
  done
  keep_stores
}

cores() {  # the cores this process may run on (nproc alone would print OMP_NUM_THREADS, set above)
  env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc
}

kt_device() {  # the device the examples run on, as the results name it: the GPU, or for OpenCL this host's PoCL
  if [ "${KT_LANG:-cuda}" = opencl ]; then
    echo "PoCL CPU (pthread), $(cores) cores: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  else
    nvidia-smi --query-gpu=name --format=csv,noheader | head -1
  fi
}

kt_opencl() {  # kt_examples opencl: Kernel Tuner's OpenCL examples on this machine's PoCL (its CPU), both tools at
  # once, each on its own half of the cores (a NUMA node each where there are two; taskset, and PoCL told the same
  # count, under both of its names: POCL_MAX_PTHREAD_COUNT before PoCL 4); pyopencl from .carry/cl (wheels for Python 3.12). KT_OPENCL_GROUPS="LIMIT:EXAMPLES;LIMIT:EXAMPLES":
  # each tool runs the groups one after another (LIMIT seconds per example per tool), each group's results in
  # $OUT/kt_opencl_TOOL_gI/; no example starts unless it can end before KT_DEADLINE_S
  local half a b model tool cpus device
  lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA)" | tee "$OUT/lscpu.txt"
  if [ "$(lscpu -p=NODE | grep -v '^#' | sort -u | wc -l)" = 2 ]; then
    a=$(lscpu -p=CPU,NODE | grep -v '^#' | awk -F, '$2==0{printf "%s%s", s, $1; s=","}')
    b=$(lscpu -p=CPU,NODE | grep -v '^#' | awk -F, '$2==1{printf "%s%s", s, $1; s=","}')
  else
    half=$(( $(cores) / 2 )); a="0-$(( half - 1 ))"; b="$half-$(( 2 * half - 1 ))"
  fi
  half=$(taskset -c "$a" bash -c "$(declare -f cores); cores")
  model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  device="PoCL CPU (pthread), $half cores of $(cores): $model"
  $PY -c "import pyopencl as cl; print([(p.name, p.version, [d.name for d in p.get_devices()]) for p in cl.get_platforms()])" \
    2>&1 | tee "$OUT/opencl_platforms.txt"
  IFS=';' read -ra groups <<< "${KT_OPENCL_GROUPS:?kt_examples opencl runs KT_OPENCL_GROUPS=LIMIT:EXAMPLES;...}"
  for tool in kernel_tuner adaptune; do
    cpus=$([ "$tool" = kernel_tuner ] && echo "$a" || echo "$b")
    (
      local i=0 group left
      for group in "${groups[@]}"; do
        left=$(( ${KT_DEADLINE_S:-540} - $(date +%s) + t0 ))
        POCL_CPU_MAX_CU_COUNT=$half POCL_MAX_PTHREAD_COUNT=$half taskset -c "$cpus" timeout $(( left + 30 )) $PY -m benchmarks.kt_examples.run \
            --kt-repo .carry/kt/kernel_tuner --lang opencl --tools "$tool" --time-limit "${group%%:*}" \
            --examples "${group#*:}" --deadline-s "$left" --referee-rounds 0 --device "$device" \
            --out "$OUT/kt_opencl_${tool}_g$i" > "$OUT/kt_opencl_${tool}_g$i.log" 2>&1
        elapsed "$tool group $i done"; tail -3 "$OUT/kt_opencl_${tool}_g$i.log"
        i=$(( i + 1 ))
      done
    ) &
  done
  wait
}

keep_stores() {  # KT_STORE_DIR's stores come back gzipped (a later call can resume from them, carried), with their gaps
  [ -n "${KT_STORE_DIR:-}" ] || return 0
  local f
  for f in "$KT_STORE_DIR"/*.db; do
    [ -f "$f" ] || continue
    gzip -c "$f" > "$OUT/$(basename "$f").gz"
    $PY -m benchmarks.kt_examples.store_gaps "$f" --out "$OUT/gaps_$(basename "$f" .db)" > /dev/null
  done
}

kt_spread() {  # kt_examples spread: KT_GROUPS="LIMIT:EXAMPLES;LIMIT:EXAMPLES;..." one group per GPU, all at once
  # (CUDA_VISIBLE_DEVICES=i for group i; NVML observers read physical GPU 0, so put vector_add_observers.py in the
  # first group); an example list may start with "tests," (the drop-in's CUDA test first); each group's results go
  # to $OUT/kt_examples_gI/ and are merged like batches; no example starts unless it can end before KT_DEADLINE_S
  local i=0 group limit examples deadline=${KT_DEADLINE_S:-540} name
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  IFS=';' read -ra groups <<< "${KT_GROUPS:?KT_GROUPS=LIMIT:EXAMPLES;...}"
  for group in "${groups[@]}"; do
    limit=${group%%:*} examples=${group#*:}
    (
      export CUDA_VISIBLE_DEVICES=$i
      if [ "${examples%%,*}" = tests ]; then
        examples=${examples#tests,}
        timeout 200 $PY -m pytest -q -p no:cacheprovider tests/integrations/test_kernel_tuner_cuda.py > "$OUT/tests_g$i.log" 2>&1
        tail -3 "$OUT/tests_g$i.log"
      fi
      local left=$(( deadline - $(date +%s) + t0 ))
      timeout $(( left + 30 )) $PY -m benchmarks.kt_examples.run --kt-repo .carry/kt/kernel_tuner --lang cuda \
          --time-limit "$limit" --examples "$examples" --deadline-s "$left" --device "$name" \
          --tools "${KT_TOOLS:-kernel_tuner,adaptune}" ${KT_STORE_DIR:+--store-dir "$KT_STORE_DIR"} \
          --out "$OUT/kt_examples_g$i" > "$OUT/kt_examples_g$i.log" 2>&1
      elapsed "group $i done"; tail -4 "$OUT/kt_examples_g$i.log"
    ) &
    i=$(( i + 1 ))
  done
  wait
  keep_stores
}

target=${1:?usage: bash benchmarks/gpu.sh <study>[.<part>] [args...] | <recipe> [args...] (see the header)}
shift
case "$target" in
  gpu_suite|lscat_next|transfer|distributed|kernel_tuner|kt_examples|hotpath_repeats) "$target" "$@" ;;
  *)
    module="benchmarks.${target%%.*}.$([ "${target#*.}" = "$target" ] && echo run || echo "${target#*.}")"
    case " $* " in
      *" --out "*|*" --out="*) $PY -m "$module" "$@" ;;
      *) $PY -m "$module" "$@" --out "$OUT/${target%%.*}" ;;
    esac ;;
esac
elapsed "all done"
