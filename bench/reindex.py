"""Re-index after editing one file (issue 18): CPU and wall medians over several edits, by path.

    python -m bench.reindex FOLDER --index-dir DIR [--edits 5] [--modes named,catchup,full] [--json OUT]

FOLDER is edited (a line is appended to its largest code file, once per edit): give it a copy. The
index in DIR is brought up to date first (built if empty, not timed). Then, for each mode, each edit is
followed by one timed update of the engine, in this process (warm, as a language server is):

- ``named``: ``Engine.index(only=[path], reembed=False)``: what the language server does on a save or
  a watched-file change (``Session.file_changed``): the editor names the file.
- ``catchup``: ``Engine.index(reembed=False)``: what ``delphi context`` and the MCP poll do, no path named.
- ``full``: ``Engine.index()``: what ``delphi index`` does (and what ``bench.perf`` times).

After each update, the first question answered and a second one are timed too (the first pays for
what the update made stale: the in-memory view, the exact-search matrix), and the answer is checked:
the edit's new word is found by BM25 in the edited file. CPU seconds are ``time.process_time`` of this
process (the machine is shared: read CPU and ratios, and the load average printed beside them).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from delphi_ls import Engine

from .perf import PhaseTimer


def _extra_phases(timer: PhaseTimer) -> None:
    """Phases of a small update that the cold index's timer does not name."""
    from delphi_ls import engine as engine_mod
    from delphi_ls.indexing import pipeline
    from delphi_ls.stores import lexical, meta, vectors

    timer._wrap(vectors.VectorStore, "delete_ids", "chroma delete")
    timer._wrap(vectors.VectorStore, "check", "chroma check")
    timer._wrap(lexical.LexicalStore, "check", "whoosh check")
    timer._wrap(lexical.LexicalStore, "merge_tiers", "whoosh merge_tiers")
    timer._wrap(meta.MetaStore, "file_hashes", "sqlite file list")
    timer._wrap(meta.MetaStore, "counts", "sqlite counts")
    timer._wrap(meta.MetaStore, "set_skipped", "sqlite skipped")
    timer._wrap(engine_mod, "git_head", "git head")
    timer._wrap(pipeline, "scan_named", "scan (named paths)")
    timer._wrap(pipeline, "build_doc", "file documents")
    timer._wrap(engine_mod.Engine, "_patch_view", "view patch")
    timer._wrap(engine_mod.Engine, "_patch_exact", "exact matrix patch")
    timer._wrap(meta.MetaStore, "symbols_in", "sqlite symbols of paths")
    timer._wrap(pipeline.Indexer, "_reusable_vectors", "reusable vectors (incl. chroma delete)")
    timer._wrap(engine_mod.Engine, "refresh_cochange", "co-change check (git)")


def target_file(eng: Engine, root: Path) -> str:
    """The largest code file (what bench.perf edits)."""
    return max((p for p, k, _n in eng.files() if k == "code"), key=lambda p: (root / p).stat().st_size)


def one_mode(eng: Engine, root: Path, target: str, mode: str, edits: int, profile: str | None) -> dict[str, Any]:
    rows = []
    timer = PhaseTimer()
    timer.install(eng)
    _extra_phases(timer)
    prof = cProfile.Profile() if profile else None
    total_wall = 0.0
    comment = "#" if target.endswith((".py", ".rb", ".sh", ".yml", ".yaml", ".toml")) else "//"
    try:
        for i in range(edits):
            # Letters only: digits would also match the number-heavy files (black's profiling/*.py).
            word = f"zqreindex{mode}{'abcdefghij'[i % 10]}x" + "".join(random.choice("klmnopqrstuvw") for _ in range(6))
            with (root / target).open("a") as f:
                f.write(f"\n{comment} {word}\n")
            load = os.getloadavg()[0]
            c0, t0 = time.process_time(), time.perf_counter()
            if prof:
                prof.enable()
            if mode == "named":
                rep = eng.index(only=[target], reembed=False)
            elif mode == "catchup":
                rep = eng.index(reembed=False)
            else:
                rep = eng.index()
            if prof:
                prof.disable()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            total_wall += wall
            c1, t1 = time.process_time(), time.perf_counter()
            ans = eng.context(word, limit=5)
            q1_wall, q1_cpu = time.perf_counter() - t1, time.process_time() - c1
            t2 = time.perf_counter()
            eng.context("where is the configuration loaded from disk?", limit=5)
            q2_wall = time.perf_counter() - t2
            found = any(r["path"] == target for r in ans["results"][:1])
            rows.append({"wall_s": round(wall, 4), "cpu_s": round(cpu, 4), "files_indexed": rep.files_indexed,
                         "chunks_embedded": rep.chunks_embedded, "load1": round(load, 2),
                         "first_query_wall_s": round(q1_wall, 4), "first_query_cpu_s": round(q1_cpu, 4),
                         "next_query_wall_s": round(q2_wall, 4), "new_word_found_first": found})
    finally:
        timer.uninstall()
        if prof:
            prof.dump_stats(f"{profile}.{mode}")

    def med(k: str) -> float:
        return round(statistics.median(r[k] for r in rows), 4)

    return {"mode": mode, "edits": rows, "median_wall_s": med("wall_s"), "median_cpu_s": med("cpu_s"),
            "median_first_query_wall_s": med("first_query_wall_s"), "median_next_query_wall_s": med("next_query_wall_s"),
            "all_found": all(r["new_word_found_first"] for r in rows),
            "phases_per_edit": {k: round(v["s"] / edits, 4) for k, v in timer.report(total_wall).items()}}


def identity(eng: Engine, root: Path, index_dir: str, embedder: str) -> dict[str, Any]:
    """After the edits: this engine's patched in-memory view against the one a fresh engine builds from the
    whole manifest, and the two engines' answers to bench.perf's questions."""
    from .perf import questions_for

    def graph(g: Any) -> tuple[Any, ...]:
        def norm(d: dict[str, Any]) -> dict[str, set[str]]:
            return {k: set(v) for k, v in d.items() if v}
        return (norm(g.imports), norm(g.imported_by), norm(g.tests_of), norm(g.mirrors_of), dict(g.abbreviated), g.edges)

    qs = questions_for(eng)
    mine = [[r["path"] for r in eng.context(q, limit=10)["results"]] for q in qs]
    view = eng.view()
    with Engine(root, index_dir=index_dir, embedder=embedder) as other:
        fresh = other.view()
        theirs = [[r["path"] for r in other.context(q, limit=10)["results"]] for q in qs]
        # Compared while the other engine is open: both read definitions and chunk lines from a manifest.
        same_view = all(getattr(view, f) == getattr(fresh, f)
                        for f in ("files", "symbols", "stripped_paths", "by_basename")) and \
            all(view.chunk_lines.get(p) == fresh.chunk_lines.get(p) for p in fresh.files)
    return {"view_equal": same_view, "graph_equal": graph(view.graph) == graph(fresh.graph),
            "questions": len(qs), "answers_identical": sum(a == b for a, b in zip(mine, theirs, strict=True))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="a copy of a workspace: it is edited")
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--modes", default="named,catchup,full")
    ap.add_argument("--embedder", default="potion-base-8M")
    ap.add_argument("--target", help="the file to edit (workspace-relative; default: the largest code file)")
    ap.add_argument("--profile", help="write a cProfile of each mode's updates to PROFILE.<mode>")
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--identity", action="store_true",
                    help="after the edits, compare the patched view and answers with rebuilt ones")
    a = ap.parse_args(argv)
    root = Path(a.folder).resolve()
    out: dict[str, Any] = {"folder": str(root), "load_before": [round(x, 2) for x in os.getloadavg()]}
    with Engine(root, index_dir=a.index_dir, embedder=a.embedder) as eng:
        t0 = time.perf_counter()
        eng.index()  # up to date before timing (a first run builds it)
        eng.context("where is the main entry point?")  # warm: the view, the stores, the models
        out["prepare_s"] = round(time.perf_counter() - t0, 2)
        out["counts"] = eng.counts()
        target = a.target or target_file(eng, root)
        out["target"] = target
        out["modes"] = [one_mode(eng, root, target, m, a.edits, a.profile) for m in a.modes.split(",")]
        if a.identity:
            out["identity"] = identity(eng, root, a.index_dir, a.embedder)
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"{root.name}: {out['counts']['files']} files, {out['counts']['chunks']} chunks; edited {target}; "
          f"load {out['load_before']} -> {out['load_after']}")
    print("| update | median wall (s) | median CPU (s) | first query after (s) | next query (s) | new word found |")
    print("|---|---|---|---|---|---|")
    for m in out["modes"]:
        print(f"| {m['mode']} | {m['median_wall_s']} | {m['median_cpu_s']} | {m['median_first_query_wall_s']} | "
              f"{m['median_next_query_wall_s']} | {m['all_found']} |")
    for m in out["modes"]:
        top = [(k, v) for k, v in m["phases_per_edit"].items() if v >= 0.001][:16]
        print(f"{m['mode']}, s per edit: " + ", ".join(f"{k} {v}" for k, v in top))
    if "identity" in out:
        i = out["identity"]
        print(f"after the edits: view as rebuilt {i['view_equal']}, graph as rebuilt {i['graph_equal']}, "
              f"answers identical to a fresh engine's {i['answers_identical']} of {i['questions']}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
