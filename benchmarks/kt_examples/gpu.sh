#!/usr/bin/env bash
# Kernel Tuner's CUDA examples on the H100, adaptune beside Kernel Tuner 1.5 (device tool; carry .carry/kt).
#   ADAPTUNE_COMMIT=$(git rev-parse --short HEAD) bash benchmarks/kt_examples/gpu.sh {0|1|2|3|4}   # 0: the drop-in's GPU test; 1-4: a batch each
# .carry/kt holds the wheels the bare machine lacks (.carry/kt/whl) and the examples with their commit
# (.carry/kt/kernel_tuner/examples/{cuda,cuda-c++}, .carry/kt/kernel_tuner/COMMIT); README.md says how to make it.
set -u
export PYTHONUNBUFFERED=1
C=.carry/kt
need=""
for pair in kernel_tuner:kernel_tuner constraint:python_constraint2 xmltodict:xmltodict jsonschema:jsonschema \
    jsonschema_specifications:jsonschema_specifications referencing:referencing rpds:rpds_py attrs:attrs \
    sqlalchemy:sqlalchemy greenlet:greenlet pandas:pandas dateutil:python_dateutil pytz:pytz tzdata:tzdata six:six \
    jinja2:jinja2 markupsafe:markupsafe matplotlib:matplotlib contourpy:contourpy cycler:cycler fontTools:fonttools \
    kiwisolver:kiwisolver pyparsing:pyparsing PIL:pillow; do
  python3 -c "import ${pair%%:*}" 2>/dev/null || need="$need $(ls $C/whl/${pair##*:}-*.whl)"
done
if [ -n "$need" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $need || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src:$PWD
export KT_CUDA_LANG=CuPy  # Kernel Tuner's lang="CUDA" backend is PyCUDA (no wheel): its CuPy backend instead
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
case "${1:-1}" in
  0) python3 -m pytest -q -p no:cacheprovider tests/integrations/test_kernel_tuner_cuda.py 2>&1 | tail -15
     exit ;;
  1) examples=convolution.py,convolution_correct.py,matmul.py,sepconv.py ;;
  2) examples=sepconv_parallel.py,expdist.py,reduction.py,spmv.py,stencil.py,zeromeanfilter.py ;;
  3) examples=convolution_streams.py,pnpoly.py,pnpoly_cupy.py,texture.py,accuracy.py,test_vector_add.py,test_vector_add_parameterized.py,vector_add_parallel.py ;;
  4) examples=vector_add.py,vector_add_codegen.py,vector_add_cupy.py,vector_add_custom_strategy.py,vector_add_jinja.py,vector_add_jinja2.py,vector_add_metric.py,vector_add_nvcuda.py,vector_add_observers.py,vector_add_blocksize.py,vector_add_defines.py,python_kernel.py,python_kernel_cupy.py,vector_add_observers_pmt.py,vector_add_tegra_observer.py,vector_add_observers_ncu.py,going_green_performance_model.py ;;
esac
timeout 580 python3 -m benchmarks.kt_examples.run --kt-repo $C/kernel_tuner --lang cuda --time-limit 60 \
    --examples "$examples" --device "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" --out "$OUT"
