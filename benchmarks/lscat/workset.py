"""Build LS-CAT's git-ignored working set from a local LS-CAT checkout (or bare git dir).

LS-CAT is public: https://github.com/NTNU-HPC-Lab/LS-CAT (Bjertnes, Tørring, Elster, 2021). The committed
table data/lscat_h100/ was built from commit 83a50786eee2de633be477819c044d2c9a1ad076 (2023-08-08):

    git clone https://github.com/NTNU-HPC-Lab/LS-CAT ../LS-CAT
    python -m benchmarks.lscat.workset --lscat ../LS-CAT --out data/lscat_work --per-repo 4 --limit 5000 --ptx

``--rev`` (default: that commit) picks the LS-CAT revision read; ``workset.json`` records it.

Selects kernels whose parameters are plain pointers/integers/floats and whose source needs no local
header or unsupported feature (adaptune.predict.corpus), writes ``workset.jsonl`` (id, repo, function,
params, NVRTC-ready source) and ``rejected.csv`` (id, reason). With ``--ptx`` it also compiles each
kernel with NVRTC (compute_90) and keeps the ones that compile, storing the PTX for feature extraction.
The corpus itself is never committed: ``data/lscat_work/`` is in .gitignore.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import json
import os
import random
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from adaptune.predict import corpus

LSCAT_URL = "https://github.com/NTNU-HPC-Lab/LS-CAT"
LSCAT_COMMIT = "83a50786eee2de633be477819c044d2c9a1ad076"  # what data/lscat_h100/ was built from


class GitTree:
    """Read files from a git dir (bare or not) at one revision through one ``git cat-file --batch`` process."""

    def __init__(self, git_dir: str, rev: str = "HEAD") -> None:
        self.git_dir, self.rev = git_dir, rev
        self.proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, path: str) -> str | None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{self.rev}:{path}\n".encode())
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            return None
        data = self.proc.stdout.read(int(header[2]) + 1)[:-1]
        return data.decode("utf-8", errors="replace")

    def listing(self, prefix: str) -> list[str]:
        out = subprocess.run(["git", "--git-dir", self.git_dir, "ls-tree", "-r", "--name-only", self.rev, prefix],
                             capture_output=True, text=True, check=True).stdout
        return out.splitlines()


def _git_dir(path: str) -> str:
    p = Path(path)
    return str(p / ".git") if (p / ".git").exists() else str(p)


def _ptx_job(item: dict) -> tuple[str, str | None, str | None]:
    from adaptune.predict import nvrtc
    try:
        ptx = nvrtc.compile_source(item["source"], item["function"], "ptx").decode()
    except Exception as exc:  # noqa: BLE001 - record any compile failure with its message
        return item["id"], None, str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return item["id"], ptx, None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.lscat.workset", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lscat", required=True, help=f"LS-CAT checkout or bare git dir (git clone {LSCAT_URL})")
    ap.add_argument("--rev", default=LSCAT_COMMIT, help="LS-CAT revision to read (default: the committed table's)")
    ap.add_argument("--out", default="data/lscat_work")
    ap.add_argument("--ptx", action="store_true", help="compile with NVRTC and keep only kernels that compile")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many selected kernels (0: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--per-repo", type=int, default=0, help="keep at most this many kernels a repository (0: all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the per-repository sample and order")
    a = ap.parse_args(argv)

    git_dir = _git_dir(a.lscat)
    resolved = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "--verify", f"{a.rev}^{{commit}}"],
                              capture_output=True, text=True)
    if resolved.returncode != 0:
        raise SystemExit(f"{a.lscat}: no LS-CAT revision {a.rev} (git clone {LSCAT_URL}, or pass --rev)")
    tree = GitTree(git_dir, resolved.stdout.strip())
    rows = list(csv.DictReader(io.StringIO(tree.read("data/kernel_list.csv") or "")))
    files = collections.defaultdict(set)
    for path in tree.listing("data/kernels"):
        parts = path.split("/")
        if len(parts) == 5:
            files[f"{parts[2]}/{parts[3]}"].add(parts[4])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    selected, rejected = [], []
    for row in rows:
        kid = corpus.kernel_row(row)
        fn = row["function"]
        try:
            params = corpus.parse_params(row["variables"])
            if not params:
                raise corpus.CorpusError("no parameters")
            if not any(p.pointer for p in params):
                raise corpus.CorpusError("no pointer parameter")
            if f"{fn}.cu" not in files.get(kid, ()):
                raise corpus.CorpusError(f"{fn}.cu missing")
            extra = files[kid] - {f"{fn}.cu", "includes.h", "main.cu"}
            kernel_src = tree.read(f"data/kernels/{kid}/{fn}.cu") or ""
            inc = tree.read(f"data/kernels/{kid}/includes.h") or ""
            if extra and any(f'"{e}"' in kernel_src + inc for e in extra):
                raise corpus.CorpusError("uses a local header")
            source = corpus.prepare_source(kernel_src, inc, fn)
        except (corpus.CorpusError, ValueError, SyntaxError) as exc:
            rejected.append((kid, fn, str(exc)[:200]))
            continue
        selected.append({"id": kid, "repo": row["Repo"], "function": fn,
                         "params": [[p.ctype, p.name] for p in params], "two_d": corpus.is_2d(source),
                         "source": source})
    print(f"{len(rows)} kernels in the list, {len(selected)} selected, {len(rejected)} rejected by signature/source")
    rng = random.Random(a.seed)
    rng.shuffle(selected)
    if a.per_repo:
        seen: collections.Counter = collections.Counter()
        kept = []
        for s in selected:
            seen[s["repo"]] += 1
            if seen[s["repo"]] <= a.per_repo:
                kept.append(s)
        print(f"{len(kept)} kept with at most {a.per_repo} a repository")
        selected = kept
    if a.limit:
        selected = selected[:a.limit]
    if a.ptx:
        ptx_dir = out / "ptx"
        ptx_dir.mkdir(exist_ok=True)
        keep = []
        by_id = {s["id"]: s for s in selected}
        with ProcessPoolExecutor(a.jobs) as pool:
            for n, (kid, ptx, err) in enumerate(pool.map(_ptx_job, selected, chunksize=8)):
                if ptx is None:
                    rejected.append((kid, by_id[kid]["function"], f"nvrtc: {err}"))
                else:
                    (ptx_dir / f"{kid.replace('/', '_')}.ptx").write_text(ptx)
                    keep.append(by_id[kid])
                if n % 500 == 0:
                    print(f"  compiled {n}/{len(selected)}", flush=True)
        print(f"{len(keep)} of {len(selected)} compile with NVRTC")
        selected = keep
    (out / "workset.json").write_text(json.dumps({"repository": LSCAT_URL, "commit": tree.rev,
                                                  "per_repo": a.per_repo, "limit": a.limit, "seed": a.seed,
                                                  "ptx": a.ptx, "kernels": len(selected)}, indent=1) + "\n")
    with open(out / "workset.jsonl", "w") as f:
        for s in selected:
            f.write(json.dumps(s) + "\n")
    with open(out / "rejected.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "function", "reason"])
        w.writerows(rejected)
    reasons = collections.Counter(r[2].split(":")[0].split("'")[0].strip() for r in rejected)
    print("rejection reasons:", reasons.most_common(12))


if __name__ == "__main__":
    main()
