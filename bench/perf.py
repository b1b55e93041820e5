"""Performance benchmark: indexing and query speed beside ripgrep and the raw model, same run.

    python -m bench.perf FOLDER [--embedder potion-base-8M] [--json OUT]

Works on a copy of FOLDER (it edits one file to time a re-index). Reports cold index
time, files/s, chunks/s, time until the first query can be answered (lexical ready)
and until vectors are complete, warm query latency p50/p95 over a fixed question
list, re-index time after editing one file, and peak RSS; beside ripgrep over the
same folder and the embedding model's own throughput on the same chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from delphi_ls import Engine
from delphi_ls.models.embedders import load_embedder

from .lspclient import LspClient

QUESTIONS = [
    "where is the configuration loaded from disk?",
    "how are errors reported to the user?",
    "which tests cover the command line parsing?",
    "where is the cache invalidated?",
    "how are requests retried after a timeout?",
    "what writes the log output?",
    "where are environment variables read?",
    "how is the version number determined?",
    "which function parses the input?",
    "where are files opened and closed?",
]


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def questions_for(eng: Engine, n_symbols: int = 10, seed: int = 0) -> list[str]:
    """The fixed list plus symbols drawn with a fixed seed ("where is X defined?")."""
    names = sorted({s["name"] for s in eng.symbols("", limit=1_000_000)
                    if len(s["name"]) >= 6 and not s["name"].startswith("_")})
    rng = random.Random(seed)
    picked = rng.sample(names, min(n_symbols, len(names)))
    return QUESTIONS + [f"where is {n} defined?" for n in picked]


def ripgrep_bar(folder: Path, questions: list[str]) -> dict[str, Any]:
    rg = shutil.which("rg")
    if rg is None:
        return {"status": "ripgrep not installed: bar not measured"}
    times = []
    for q in questions:
        words = [w for w in q.rstrip("?").split() if len(w) > 3][-2:]
        t0 = time.perf_counter()
        subprocess.run([rg, "-i", "-l", "--no-messages", "-e", words[0], "-e", words[-1], "."], cwd=folder,
                       capture_output=True)
        times.append(time.perf_counter() - t0)
    return {"status": "ok", "p50_ms": statistics.median(times) * 1000, "p95_ms": percentile(times, 0.95) * 1000}


def server_latency(corpus: Path, index: Path, embedder: str, qs: list[str], direct_p50: float,
                   settle_s: float = 0.0) -> dict[str, Any]:
    """Warm request latency through delphi-ls over stdio, on the index the engine just built. ``settle_s``:
    seconds of quiet after the server's catch-up before the questions (its post-run work done: on the 100k
    workspace it answered new questions at 243 ms p50 right after it, at 143 ms 30 s later; RESULTS session 11)."""
    client = LspClient()
    try:
        client.initialize(corpus, {"indexDir": str(index), "embedder": embedder})
        _wait_ready(client)
        time.sleep(settle_s)
        for q in qs[:3]:
            client.request("delphi/context", {"query": q})
        lat = []
        for q in qs:
            t1 = time.perf_counter()
            client.request("delphi/context", {"query": q})
            lat.append(time.perf_counter() - t1)
    finally:
        client.close()
    p50 = statistics.median(lat)
    return {"p50_ms": round(p50 * 1000, 1), "p95_ms": round(percentile(lat, 0.95) * 1000, 1),
            "engine_p50_ms": round(direct_p50 * 1000, 1), "ratio": round(p50 / direct_p50, 3)}


def _wait_ready(client: LspClient, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        w = client.request("delphi/health", {})["workspaces"][0]
        c = w["counts"]
        if c["files"] and c["vectors"] == c["chunks"] and w["branches"]["vector"] in ("ready", "off: vectors disabled by settings (vectors = false)"):
            return
        time.sleep(0.2)
    raise TimeoutError("the server did not finish indexing")


def server_cold_start(corpus: Path, index: Path, embedder: str) -> dict[str, Any]:
    """From `initialized` on a folder never indexed: first answer, and first answer with results."""
    client = LspClient()
    try:
        t0 = time.perf_counter()
        client.initialize(corpus, {"indexDir": str(index), "embedder": embedder})
        t_init = time.perf_counter()
        first = None
        first_hits = None
        while first_hits is None and time.perf_counter() - t_init < 600:
            ans = client.request("delphi/context", {"query": "where is the main entry point?"})
            now = time.perf_counter() - t_init
            first = first if first is not None else now
            if ans["results"]:
                first_hits = now
                ready = ans["branchesReady"]
            else:
                time.sleep(0.05)
        _wait_ready(client)
        t_done = time.perf_counter() - t_init
    finally:
        client.close()
    return {"initialize_s": round(t_init - t0, 2), "first_answer_s": round(first or -1, 2),
            "first_answer_with_results_s": round(first_hits or -1, 2), "fully_indexed_s": round(t_done, 2),
            "branches_at_first_results": ready if first_hits is not None else None}


def structure_cost(corpus: Path, files: list[str], graph_s: float, cold_s: float) -> dict[str, Any]:
    """Everything the structure adds to indexing: the import walk over each parsed tree (timed apart
    from parsing, which chunking needs anyway), building the graph, and git co-change when there is
    history. Conservative: co-change really runs in the background after the lexical index."""
    from delphi_ls.indexing.cochange import cochange_pairs, git_head
    from delphi_ls.indexing.imports import extract_imports, manifest_imports
    from delphi_ls.indexing.languages import parser_for, spec_for

    imports_s = 0.0
    for p in files:
        try:
            text = (corpus / p).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        spec = spec_for(p)
        if spec is None:
            t = time.perf_counter()
            manifest_imports(p, text)
            imports_s += time.perf_counter() - t
            continue
        tree = parser_for(spec.name).parse(text.encode("utf-8", errors="replace"))
        t = time.perf_counter()
        extract_imports(tree.root_node, spec)
        imports_s += time.perf_counter() - t
    cochange_s = None
    if git_head(corpus):
        t = time.perf_counter()
        cochange_pairs(corpus, set(files))
        cochange_s = time.perf_counter() - t
    total = imports_s + graph_s + (cochange_s or 0.0)
    return {"imports_s": round(imports_s, 3), "graph_s": round(graph_s, 3),
            "cochange_s": None if cochange_s is None else round(cochange_s, 3),
            "total_s": round(total, 3), "share_of_cold_index": round(total / cold_s, 4)}


class PhaseTimer:
    """Wall seconds spent in each indexing phase of this process, by wrapping the functions that do
    each phase for the length of one run (cheap: one perf_counter pair per call, unlike cProfile,
    which triples Whoosh's pure-Python time). Nested phases are reported exclusive of the inner one
    (Whoosh's add_document without the tokenizer, commit's flush and merge apart). Work done in
    other processes (index_workers > 1) is not seen here: the CPU time of children is reported apart."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.tokenize_outside_add = False  # tantivy's tokens made before add_document, not inside it
        self._undo: list[tuple[Any, str, Any]] = []
        self._local = threading.local()  # .inside: the phases this thread is timing now (nested calls counted once)

    def _wrap(self, owner: Any, name: str, phase: str, materialise: bool = False) -> None:
        orig = getattr(owner, name, None)
        if orig is None:
            return
        timer = self

        def timed(*a: Any, **k: Any) -> Any:
            inside = timer._local.__dict__.setdefault("inside", set())
            if phase in inside:  # a call inside another of the same phase is counted once, by the outer one
                return orig(*a, **k)
            inside.add(phase)
            t = time.perf_counter()
            try:
                r = orig(*a, **k)
                return list(r) if materialise else r  # a generator's work happens when it is read
            finally:
                inside.discard(phase)
                timer.seconds[phase] = timer.seconds.get(phase, 0.0) + time.perf_counter() - t
                timer.calls[phase] = timer.calls.get(phase, 0) + 1

        raw = owner.__dict__.get(name) if isinstance(owner, type) else None
        # Undo: a class or module gets its own attribute back; an instance loses the shadowing one.
        self._undo.append((owner, name, raw if raw is not None else None if _is_instance(owner) else orig))
        setattr(owner, name, staticmethod(timed) if isinstance(raw, staticmethod) else timed)

    def install(self, eng: Engine) -> None:
        from whoosh.writing import SegmentWriter

        from delphi_ls.indexing import pipeline, workers
        from delphi_ls.stores import lexical, meta, vectors

        self._wrap(pipeline, "scan", "scan")
        # Read and parse+chunk run in indexing/workers.py's prepare_file (in-process with index_workers <= 1;
        # in worker processes otherwise, where this timer does not see them).
        self._wrap(workers, "read_no_follow", "read")
        self._wrap(workers, "chunk_file", "parse+chunk")
        self._wrap(lexical, "code_tokens", "tokenize", materialise=True)
        self._wrap(SegmentWriter, "add_document", "whoosh add_document")
        self._wrap(SegmentWriter, "delete_by_term", "whoosh delete")
        self._wrap(SegmentWriter, "_finalize_segment", "whoosh flush")
        self._wrap(SegmentWriter, "_merge_segments", "whoosh merge")
        self._wrap(SegmentWriter, "commit", "whoosh commit")
        if getattr(eng.settings, "lexical_store", "whoosh") == "tantivy":
            from delphi_ls.stores import tantivy_store

            # Python's side of tantivy's writes: tokenizing (code_tokens, as for Whoosh), handing documents
            # to tantivy's threads, and the commit, which waits for those threads and the merges they start.
            self._wrap(tantivy_store, "tokens", "tokenize")
            self._wrap(tantivy_store.TantivyWriter, "add_document", "tantivy add_document")
            # The indexer hands tantivy fields tokenized beforehand (field_tokens, in workers.py's prepare_file).
            self._wrap(tantivy_store.TantivyWriter, "add_tokenized", "tantivy add_document")
            self.tokenize_outside_add = getattr(tantivy_store.TantivyStore, "takes_tokens", False)
            self._wrap(tantivy_store.TantivyWriter, "delete_path", "tantivy delete")
            self._wrap(tantivy_store.TantivyWriter, "commit", "tantivy commit (+ its threads, merges)")
            # Inside commit (a writer per batch), or once at the end of a run's writer (session 35).
            self._wrap(tantivy_store.TantivyWriter, "_release", "tantivy commit (+ its threads, merges)")
        # A batch's files in one transaction (session 13), which replace_file calls too; older code: per file.
        self._wrap(meta.MetaStore, "replace_files" if hasattr(meta.MetaStore, "replace_files") else "replace_file",
                   "sqlite manifest")
        # The trigram index added in bulk after each batch (issue 18); before, inside replace_file's triggers.
        self._wrap(meta.MetaStore, "build_grams", "sqlite trigram (bulk)")
        # The vector pass's reads and writes (store_embedded: the step's transaction; older code: mark_embedded).
        for name in ("unembedded", "unembedded_after", "cached_vectors", "cached_hashes", "cache_vectors",
                     "store_embedded", "mark_embedded"):
            self._wrap(meta.MetaStore, name, "sqlite vectors")
        # The file documents (filedoc branch) and the file graph their importers come from (session 32).
        from delphi_ls.indexing import graph
        from delphi_ls.stores import filedocs

        self._wrap(filedocs.FileDocs, "put", "filedocs put")
        self._wrap(filedocs.FileDocs, "set_importers", "filedocs importers")
        self._wrap(filedocs.FileDocs, "finish_fts", "filedocs search index (bulk)")
        self._wrap(graph.FileGraph, "build", "file graph")
        self._wrap(vectors.VectorStore, "upsert", "chroma add")
        self._wrap(vectors.VectorStore, "__init__", "chroma open")
        if eng.embedder is not None:
            self._wrap(eng.embedder, "embed", "embedding")

    def uninstall(self) -> None:
        for owner, name, orig in reversed(self._undo):
            if orig is None:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)
        self._undo.clear()

    def report(self, total_s: float) -> dict[str, Any]:
        s = dict(self.seconds)
        # Exclusive times: the tokenizer runs inside add_document; flush and merge inside commit.
        if "whoosh add_document" in s:
            s["whoosh add_document"] -= s.get("tokenize", 0.0)
        if "tantivy add_document" in s and not self.tokenize_outside_add:
            s["tantivy add_document"] -= s.get("tokenize", 0.0)
        if "whoosh commit" in s:
            s["whoosh commit (rest)"] = s.pop("whoosh commit") - s.get("whoosh flush", 0.0) - s.get("whoosh merge", 0.0)
        s["other (python glue, hashing, waits)"] = total_s - sum(s.values())
        return {k: {"s": round(v, 2), "share": round(v / total_s, 3)} for k, v in sorted(s.items(), key=lambda kv: -kv[1])}


def _is_instance(owner: Any) -> bool:
    return not isinstance(owner, type) and not hasattr(owner, "__file__")  # neither a class nor a module


def _cpu() -> tuple[float, float]:
    """(this process, its finished children) user + system CPU seconds."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, ch.ru_utime + ch.ru_stime


def run(folder: Path, embedder: str, keep: bool = False, quick: bool = False,
        overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="delphi-perf-"))
    try:
        corpus = work / "corpus"
        shutil.copytree(folder, corpus, symlinks=True)
        out: dict[str, Any] = {"folder": str(folder), "embedder": embedder}
        marks: dict[str, float] = {}
        overrides = overrides or {}
        out["overrides"] = overrides
        eng = Engine(corpus, index_dir=str(work / "index"), embedder=embedder, **overrides)
        timer = PhaseTimer()
        timer.install(eng)
        out["load_before"] = [round(x, 2) for x in os.getloadavg()]
        cpu0 = _cpu()
        t0 = time.perf_counter()

        def progress(phase: str, done: int, total: int, chunks: int) -> None:
            marks.setdefault(f"first_{phase}", time.perf_counter() - t0)

        indexer = eng._indexer()
        # What Engine.index decides about Chroma (session 9: written only where HNSW answers); this benchmark
        # drives the indexer itself to time its phases, so it decides the same here (older code: no such call).
        wanted = getattr(eng, "_chroma_wanted", None)
        indexer.defer_chroma = wanted is not None and not wanted()
        # And as it does for a run with a vector pass after it: new chunks embedded beside the lexical pass
        # (session 10; an attribute older code lacks, and ignores).
        indexer.embed_ahead = True
        eng._index_lock.acquire()  # held as Engine.index holds it: a view built meanwhile is not saved
        rep = indexer.index_lexical(progress)
        t_lex = time.perf_counter() - t0
        eng._view = None
        first = eng.context("where is the main entry point?")
        t_first = time.perf_counter() - t0
        if wanted is not None and indexer.defer_chroma and wanted():
            indexer.defer_chroma = False  # the lexical pass took the index past the bound: Chroma answers
        import inspect

        # The trigram index built beside the vector pass, as Engine.index has it (session 31; older code: after it).
        beside = "grams_stop" in inspect.signature(indexer.index_vectors).parameters
        indexer.index_vectors(progress, rep, **({"grams_stop": eng._stop} if beside else {}))
        # The vector pass done: semantic search is complete here. What follows (the trigram index of a large
        # run, session 25, and the merges) is the rest of the cold index, counted in vectors_complete_s as before.
        t_vec = time.perf_counter() - t0
        grams = getattr(indexer, "finish_grams", None)
        if grams is not None:
            grams()
        finish = getattr(indexer, "finish_lexical", None)
        if finish is not None:
            finish()  # merges left off the query path (issue 18); part of the cold index's time
        eng._index_lock.release()
        t_all = time.perf_counter() - t0
        cpu1 = _cpu()
        # The peak of the index run alone: what follows (the model-alone bar reads every chunk text, a second
        # file graph, queries, re-index runs) holds memory of its own, and the final peak is theirs too.
        # This process only (it writes every store; the view and the first answer's tables are built in it): the
        # worker and embedding processes' own peaks are apart (the largest of them that has ended so far).
        out["peak_rss_index_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        out["peak_rss_index_children_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
        timer.uninstall()
        out["phases"] = timer.report(t_all)
        out["cpu"] = {"main_s": round(cpu1[0] - cpu0[0], 1), "children_s": round(cpu1[1] - cpu0[1], 1),
                      "cores_used": round((cpu1[0] - cpu0[0] + cpu1[1] - cpu0[1]) / t_all, 2)}
        out["load_after_index"] = [round(x, 2) for x in os.getloadavg()]
        counts = eng.counts()
        out["index"] = {
            "files": counts["files"], "chunks": counts["chunks"], "vectors": counts["vectors"],
            "skipped": len(eng.health(check_staleness=False, full=False)["skipped"]),
            "lexical_s": round(t_lex, 2), "first_answer_s": round(t_first, 2), "vectors_complete_s": round(t_all, 2),
            "vector_pass_done_s": round(t_vec, 2),
            "files_per_s": round(counts["files"] / t_all, 1), "chunks_per_s": round(counts["chunks"] / t_all, 1),
            "embed_s": round(rep.seconds_vectors, 2), # distinct texts embedded, in this process or (session 10) beside the lexical pass, whose
            # vectors the vector pass then read from the cache
            "unique_embedded": rep.chunks_embedded - rep.vectors_from_cache + getattr(rep, "vectors_ahead", 0),
            "embedded_ahead": getattr(rep, "vectors_ahead", 0),
            "first_answer_branches": {b: s for b, s in first["branchesReady"].items()},
        }
        # The file graph (built from the imports recorded while chunking) as a share of cold indexing.
        from delphi_ls.indexing.graph import FileGraph
        t1 = time.perf_counter()
        graph = FileGraph.build({p: k for p, k, _n in eng.files()}, eng.import_edges())
        graph_s = time.perf_counter() - t1
        out["graph"] = {"edges": graph.edges, "build_s": round(graph_s, 3), "share_of_cold_index": round(graph_s / t_all, 4)}
        if not quick:
            out["structure"] = structure_cost(corpus, [p for p, _k, _n in eng.files()], graph_s, t_all)
        # The raw model on the same chunk texts: the limit indexing can approach.
        texts = list(dict.fromkeys(eng.embed_texts()))
        model = load_embedder(embedder)
        limit = 20000 if embedder == "potion-base-8M" else 400
        part = texts[:limit]
        t1 = time.perf_counter()
        for i in range(0, len(part), 256):
            model.embed(part[i: i + 256])
        model_rate = len(part) / (time.perf_counter() - t1)
        model_time_all = len(texts) / model_rate
        out["model"] = {"chunks_per_s": round(model_rate, 1), "unique_chunks": len(texts),
                        "model_only_s": round(model_time_all, 2),
                        "efficiency": round(model_time_all / t_all, 3)}
        # Warm query latency.
        qs = questions_for(eng)
        for q in qs[:3]:
            eng.context(q)
        lat = []
        for q in qs:
            t1 = time.perf_counter()
            eng.context(q)
            lat.append(time.perf_counter() - t1)
        out["query"] = {"n": len(qs), "p50_ms": round(statistics.median(lat) * 1000, 1),
                        "p95_ms": round(percentile(lat, 0.95) * 1000, 1)}
        out["ripgrep"] = ripgrep_bar(corpus, qs)
        # Re-index after editing one file.
        target = max((p for p, k, _n in eng.files() if k == "code"), key=lambda p: (corpus / p).stat().st_size,
                     default=None)
        if target:
            with (corpus / target).open("a") as f:
                f.write("\n\n# delphi perf edit\n")
            timer = PhaseTimer()
            timer.install(eng)
            c1 = time.process_time()
            t1 = time.perf_counter()
            rep2 = eng.index()
            took = time.perf_counter() - t1
            timer.uninstall()
            out["reindex_one_file"] = {"path": target, "seconds": round(took, 3),
                                       "cpu_s": round(time.process_time() - c1, 3),
                                       "files_indexed": rep2.files_indexed, "chunks_embedded": rep2.chunks_embedded,
                                       "phases": timer.report(took)}
            # The same edit as the language server makes it: the path named (a save), no walk (issue 18).
            with (corpus / target).open("a") as f:
                f.write("\n# delphi perf edit, named\n")
            c1, t1 = time.process_time(), time.perf_counter()
            rep3 = eng.index(only=[target], reembed=False)
            out["reindex_one_file"].update(named_seconds=round(time.perf_counter() - t1, 3),
                                           named_cpu_s=round(time.process_time() - c1, 3),
                                           named_files_indexed=rep3.files_indexed)
        out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        out["peak_rss_children_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
        out["index_bytes"] = sum(p.stat().st_size for p in (work / "index").rglob("*") if p.is_file())
        from delphi_ls.stores.lexical import FOLDERS

        out["lexical_store"] = getattr(eng.settings, "lexical_store", "whoosh")
        lex_dir = work / "index" / FOLDERS[out["lexical_store"]]
        out["lexical_bytes"] = sum(p.stat().st_size for p in lex_dir.rglob("*") if p.is_file())
        out["load_after"] = [round(x, 2) for x in os.getloadavg()]
        if quick:
            eng.close()
            return out
        # Side by side with the engine called directly: the same questions through the server.
        direct = []
        for q in qs:
            t1 = time.perf_counter()
            eng.context(q)
            direct.append(time.perf_counter() - t1)
        eng.close()
        out["server"] = server_latency(corpus, work / "index", embedder, qs, statistics.median(direct))
        out["server"]["cold_start"] = server_cold_start(corpus, work / "index-cold", embedder)
        return out
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def render(r: dict[str, Any]) -> str:
    i, m, q, g = r["index"], r["model"], r["query"], r["ripgrep"]
    lines = [
        f"# Performance: {Path(r['folder']).name} ({i['files']} files, {i['chunks']} chunks; embedder {r['embedder']})", "",
        "| measure | Delphi | bar (same run) |", "|---|---|---|",
        f"| cold index, lexical ready (s) | {i['lexical_s']} | |",
        f"| first answer after start (s) | {i['first_answer_s']} | |",
        f"| vector pass done (s) | {i.get('vector_pass_done_s', '-')} | model alone on the same chunks: {m['model_only_s']} s |",
        f"| vectors complete, trigram index and merges done (s) | {i['vectors_complete_s']} | |",
        f"| indexing files/s | {i['files_per_s']} | |",
        f"| indexing chunks/s | {i['chunks_per_s']} | model alone: {m['chunks_per_s']} chunks/s |",
        f"| pipeline efficiency (model-only / total) | {m['efficiency']} | 1.0 = all time in the model |",
        f"| warm query p50 (ms) | {q['p50_ms']} | ripgrep p50: {round(g.get('p50_ms', float('nan')), 1)} |",
        f"| warm query p95 (ms) | {q['p95_ms']} | ripgrep p95: {round(g.get('p95_ms', float('nan')), 1)} |",
    ]
    if "reindex_one_file" in r:
        ro = r["reindex_one_file"]
        lines.append(f"| re-index after editing one file (s) | {ro['seconds']} ({ro['files_indexed']} file, "
                     f"{ro['chunks_embedded']} chunks embedded; CPU {ro.get('cpu_s')} s) | |")
        if "named_seconds" in ro:
            lines.append(f"| the same, the file named as an editor's save does (s) | {ro['named_seconds']} "
                         f"(CPU {ro['named_cpu_s']} s) | |")
    if "peak_rss_index_mb" in r:
        lines.append(f"| peak RSS of the index run, this process (MB) | {r['peak_rss_index_mb']} "
                     f"(largest ended worker {r.get('peak_rss_index_children_mb', '?')}) | |")
    lines.append(f"| peak RSS, whole benchmark (MB) | {r['peak_rss_mb']} (children {r.get('peak_rss_children_mb', 0)}) | |")
    if "cpu" in r:
        c = r["cpu"]
        lines.append(f"| cold index CPU (s): this process / worker processes | {c['main_s']} / {c['children_s']} | "
                     f"{c['cores_used']} cores used on average |")
    if "load_before" in r:
        lines.append(f"| load average (1, 5, 15 min) before / after the index | {r['load_before']} / "
                     f"{r.get('load_after_index')} | a shared machine: read ratios |")
    if "index_bytes" in r:
        lines.append(f"| index size on disk (MB) | {r['index_bytes'] / 2**20:.1f} | |")
    if "lexical_bytes" in r:
        lines.append(f"| lexical store ({r['lexical_store']}) on disk (MB) | {r['lexical_bytes'] / 2**20:.1f} | |")
    if "graph" in r:
        gr = r["graph"]
        lines.append(f"| file graph build (s) | {gr['build_s']} ({gr['edges']} edges) | {100 * gr['share_of_cold_index']:.1f}% of cold index time |")
    if "structure" in r:
        st = r["structure"]
        cc = "no git history" if st["cochange_s"] is None else f"{st['cochange_s']} s"
        lines.append(f"| structure in all: import walk {st['imports_s']} s + graph {st['graph_s']} s + co-change {cc} | "
                     f"{st['total_s']} s | {100 * st['share_of_cold_index']:.1f}% of cold index time (bar: 25%) |")
    if "server" in r:
        sv, cs = r["server"], r["server"]["cold_start"]
        lines.append(f"| delphi/context through the server, warm p50 (ms) | {sv['p50_ms']} (p95 {sv['p95_ms']}) | "
                     f"engine called directly: {sv['engine_p50_ms']} (ratio {sv['ratio']}) |")
        lines.append(f"| server cold start: first answer / first answer with results / fully indexed (s after initialized) | "
                     f"{cs['first_answer_s']} / {cs['first_answer_with_results_s']} / {cs['fully_indexed_s']} | |")
    if "phases" in r:
        lines += ["", "Where the cold index's wall time went (this process; exclusive; `PhaseTimer`):", "",
                  "| phase | s | share |", "|---|---|---|"]
        lines += [f"| {k} | {v['s']} | {100 * v['share']:.1f}% |" for k, v in r["phases"].items()]
    if "phases" in r.get("reindex_one_file", {}):
        top = list(r["reindex_one_file"]["phases"].items())[:6]
        lines += ["", "Re-index after editing one file, largest phases: "
                  + ", ".join(f"{k} {v['s']} s" for k, v in top)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--embedder", default="potion-base-8M")
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--quick", action="store_true",
                    help="skip the structure walk and the server runs (cold index, queries, re-index, RSS only)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="a setting for the engine under test, e.g. --set index_workers=2 (repeatable)")
    a = ap.parse_args(argv)
    overrides = {k: json.loads(v) for k, v in (x.split("=", 1) for x in a.set)}
    r = run(Path(a.folder), a.embedder, quick=a.quick, overrides=overrides)
    text = render(r)
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
