#!/usr/bin/env bash
# LS-CAT on the H100, next session, one command (device tool; carry data/lscat_work, the git-ignored working
# set built by benchmarks/lscat/workset.py — on the dev host: cp -r /work/main/.carry/lscat/data/lscat_work
# data/lscat_work). Needs CuPy + cuda-python on the device, as runs 1-5 did.
#   1. examples: the four examples' CUDA spaces re-timed (20 launches a configuration, the reduction's
#      check fixed), for the first-configuration evaluation;
#   2. noise control: run 5's ok kernels re-measured with more and longer batches (5 x ~100 us instead of
#      3 x ~50 us), so the same kernels show how much of the noise the timing itself causes;
#   3. new kernels: the working set minus every kernel in data/lscat_h100/kernels.csv, with the same timing
#      settings and the ``index`` buffer rule (pointers sized to the highest index read from the source,
#      adaptune.predict.indexbound), so the crash rate can be compared with runs 3-5's 4xy+64k (22 %).
# Afterwards, on the dev host:
#   python -m benchmarks.lscat.merge --run <files_at>/run6 --run-id 6
#   python -m benchmarks.lscat.run --refresh-attrs        # scores per run incl. run 6
#   python -m benchmarks.lscat.twins <files_at>/run5b/lscat_h100_rows.csv.gz <files_at>/run5b/kernels.csv   # vs run 5
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
[ -f data/lscat_work/workset.jsonl ] || { echo "carry data/lscat_work (see the header)"; exit 2; }
python3 - "$OUT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open("data/lscat_h100/kernels.csv", newline="")))
open(f"{sys.argv[1]}/measured.txt", "w").write("\n".join(r["kernel"] for r in rows) + "\n")
open(f"{sys.argv[1]}/run5_ok.txt", "w").write("\n".join(r["kernel"] for r in rows
                                                        if r["run"] == "5" and r["status"] == "ok") + "\n")
PY
timeout 120 python3 -m benchmarks.lscat.examples --out "$OUT/examples.json" --repeats 20 --deadline-s 100
timeout 150 python3 -m benchmarks.lscat.measure --work data/lscat_work --out "$OUT/run5b" --include "$OUT/run5_ok.txt" \
    --batches 5 --batch-us 100 --deadline-s 120
timeout 270 python3 -m benchmarks.lscat.measure --work data/lscat_work --out "$OUT/run6" --exclude "$OUT/measured.txt" --rule index \
    --batches 5 --batch-us 100 --deadline-s 230
ls -la "$OUT" "$OUT"/run*
