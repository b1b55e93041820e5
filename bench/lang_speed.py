"""Indexing speed per language: so that a slow grammar shows up as slow.

    python -m bench.lang_speed FOLDER [FOLDER ...] [--repeat 3] [--no-engine]

For each folder, two measurements are taken:

1. Chunking alone, per language. For each file, ``chunk_file`` does the parse, symbols, imports
   and chunks. It is compared with cutting the same files into line windows, which is what every
   file got before its language had a grammar. Figures: files/s, chunks/s and MB/s, the best of
   ``--repeat`` passes.
2. A cold ``Engine.index()`` of the whole folder with vectors off: scan, read, chunk, manifest and
   BM25. Figures: files/s and chunks/s, end to end.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from delphi_ls import Engine
from delphi_ls.indexing.chunker import chunk_file, window_chunks
from delphi_ls.languages import spec_for
from delphi_ls.workspace.scan import scan


def chunking_by_language(folder: Path, repeat: int) -> dict[str, dict[str, float]]:
    files: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for entry in scan(folder, 1_000_000).files:
        try:
            text = (folder / entry.path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        spec = spec_for(entry.path)
        files[spec.name if spec else "text"].append((entry.path, text))
    out: dict[str, dict[str, float]] = {}
    for lang, items in sorted(files.items()):
        nbytes = sum(len(t.encode("utf-8")) for _, t in items)
        best = windows_best = float("inf")
        chunks = 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            chunks = sum(len(chunk_file(p, t).chunks) for p, t in items)
            best = min(best, time.perf_counter() - t0)
            t0 = time.perf_counter()
            for _p, t in items:
                window_chunks(t, 1500)
            windows_best = min(windows_best, time.perf_counter() - t0)
        out[lang] = {"files": len(items), "chunks": chunks, "mb": nbytes / 1e6, "seconds": best,
                     "files_per_s": len(items) / best, "chunks_per_s": chunks / best, "mb_per_s": nbytes / 1e6 / best,
                     "windows_files_per_s": len(items) / windows_best}
    return out


def engine_cold_index(folder: Path) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="lang_speed-"))
    try:
        eng = Engine(folder, index_dir=str(tmp / "index"), vectors=False)
        try:
            t0 = time.perf_counter()
            eng.index()
            seconds = time.perf_counter() - t0
            counts = eng.counts()
        finally:
            eng.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"files": counts["files"], "chunks": counts["chunks"], "seconds": seconds,
            "files_per_s": counts["files"] / seconds, "chunks_per_s": counts["chunks"] / seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-engine", action="store_true", help="chunking alone, no cold index")
    args = ap.parse_args(argv)
    for f in args.folders:
        folder = Path(f).resolve()
        print(f"## {folder.name}")
        print(f"{'language':12} {'files':>6} {'MB':>6} {'chunks':>7} {'files/s':>9} {'chunks/s':>9} {'MB/s':>6} "
              f"{'windows files/s':>16}")
        for lang, r in chunking_by_language(folder, args.repeat).items():
            print(f"{lang:12} {r['files']:6d} {r['mb']:6.2f} {r['chunks']:7d} {r['files_per_s']:9.0f} "
                  f"{r['chunks_per_s']:9.0f} {r['mb_per_s']:6.2f} {r['windows_files_per_s']:16.0f}")
        if not args.no_engine:
            e = engine_cold_index(folder)
            print(f"cold index (vectors off): {e['files']} files, {e['chunks']} chunks in {e['seconds']:.2f} s = "
                  f"{e['files_per_s']:.0f} files/s, {e['chunks_per_s']:.0f} chunks/s")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
