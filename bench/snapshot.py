"""Time to first answer from a snapshot vs a cold index (issue 18), wall and CPU, medians of runs.

    python -m bench.snapshot FOLDER [--runs 3] [--question "..."] [--work DIR]

FOLDER is copied twice under the work folder, as two machines' checkouts of the same tree: ``a/NAME``
(where the snapshot is built) and ``b/NAME`` (where it is loaded; files get new mtimes, as a fresh
checkout's do). Every step is a `delphi` process, as a user runs it, with its own index folder:

- cold: ``delphi context b/NAME QUESTION`` on an empty index (it indexes everything, vectors
  included, then answers);
- snapshot: ``delphi snapshot load FILE b/NAME`` then ``delphi context b/NAME QUESTION`` (which hashes
  every file once, keeps those whose content matches, then answers from the exact vector search);
  then ``delphi index b/NAME`` (what completes it: Chroma filled from the embedding cache), timed apart;
- create (once per run): ``delphi snapshot create a/NAME --out FILE`` on an index already built.

CPU is the children's user+system time (resource.RUSAGE_CHILDREN), which reads true on a loaded
machine where wall time does not. Sizes: the snapshot file, the index folder it came from, and the
source (the bytes of the indexed files, and of the whole checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DELPHI = [str(Path(sys.executable).parent / "delphi")]


def run(*args: str) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of one `delphi` process; fails loudly on a non-zero exit."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([*DELPHI, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p.stdout


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def checkout(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    now = time.time_ns()
    for p in dst.rglob("*"):
        if p.is_file() and not p.is_symlink():
            os.utime(p, ns=(now, now))


def first_paths(out: str) -> list[str]:
    return [r["path"] for r in json.loads(out)["results"][:5]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--question", default="where is the configuration file read and parsed?")
    ap.add_argument("--work", help="scratch folder (default: a temporary one, removed)")
    args = ap.parse_args()
    src = Path(args.folder).resolve()
    work = Path(args.work or tempfile.mkdtemp(prefix="delphi-snap-"))
    a, b = work / "a" / src.name, work / "b" / src.name
    shutil.rmtree(work / "a", ignore_errors=True)
    shutil.rmtree(work / "b", ignore_errors=True)
    checkout(src, a)
    checkout(src, b)
    snap = work / f"{src.name}.delphi-snapshot"
    idx_a = work / "index-a"
    shutil.rmtree(idx_a, ignore_errors=True)
    run("index", str(a), "--index-dir", str(idx_a), "--quiet")
    rows: dict[str, list[float]] = {k: [] for k in ("cold_wall", "cold_cpu", "load_wall", "load_cpu", "snap_ctx_wall",
                                                     "snap_ctx_cpu", "snap_wall", "snap_cpu", "create_wall", "create_cpu",
                                                     "then_index_wall", "then_index_cpu")}
    answers: dict[str, list[str]] = {}
    for i in range(args.runs):
        w, c, _ = run("snapshot", "create", str(a), "--out", str(snap), "--index-dir", str(idx_a), "--quiet")
        rows["create_wall"].append(w)
        rows["create_cpu"].append(c)
        cold = work / f"index-cold-{i}"
        shutil.rmtree(cold, ignore_errors=True)
        w, c, out = run("context", str(b), args.question, "--index-dir", str(cold), "--json")
        rows["cold_wall"].append(w)
        rows["cold_cpu"].append(c)
        answers["cold"] = first_paths(out)
        shutil.rmtree(cold, ignore_errors=True)
        warm = work / f"index-snap-{i}"
        shutil.rmtree(warm, ignore_errors=True)
        w1, c1, _ = run("snapshot", "load", str(snap), str(b), "--index-dir", str(warm))
        w2, c2, out = run("context", str(b), args.question, "--index-dir", str(warm), "--json")
        rows["load_wall"].append(w1)
        rows["load_cpu"].append(c1)
        rows["snap_ctx_wall"].append(w2)
        rows["snap_ctx_cpu"].append(c2)
        rows["snap_wall"].append(w1 + w2)
        rows["snap_cpu"].append(c1 + c2)
        answers["snapshot"] = first_paths(out)
        w3, c3, _ = run("index", str(b), "--index-dir", str(warm), "--quiet")
        rows["then_index_wall"].append(w3)
        rows["then_index_cpu"].append(c3)
        shutil.rmtree(warm, ignore_errors=True)
        print(f"run {i + 1}: cold {rows['cold_wall'][-1]:.2f} s wall / {rows['cold_cpu'][-1]:.2f} s CPU; "
              f"snapshot {w1 + w2:.2f} s / {c1 + c2:.2f} s (load {w1:.2f}, first answer {w2:.2f}); "
              f"then index {w3:.2f} s / {c3:.2f} s", flush=True)
    db = sqlite3.connect(idx_a / "meta.sqlite")
    indexed = db.execute("SELECT COUNT(*), SUM(size) FROM files").fetchone()
    chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    db.close()
    med = {k: round(statistics.median(v), 2) for k, v in rows.items()}
    result = {
        "folder": str(src), "runs": args.runs, "question": args.question,
        "files": indexed[0], "chunks": chunks, "median_s": med,
        "speedup_wall": round(med["cold_wall"] / med["snap_wall"], 1),
        "speedup_cpu": round(med["cold_cpu"] / med["snap_cpu"], 1),
        "bytes": {"snapshot": snap.stat().st_size, "index_dir": du(idx_a), "indexed_source": indexed[1],
                  "checkout": du(a)},
        "same_top5": answers["cold"] == answers["snapshot"], "top5": answers,
    }
    print(json.dumps(result, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
