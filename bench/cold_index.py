"""A cold index alone, as ``bench.perf`` runs it (lexical pass with embedding beside it, vector pass with the
trigram build beside it, merges), for workspaces where the rest of ``bench.perf`` (ripgrep, re-index, server)
takes longer than the index: its phases, the CPU of this process and of its workers (lexical pass and whole
run), when the vector pass and the trigram build beside it ended, peak RSS, and the model-alone bar on 20,000 of the chunk texts (the ratio is read beside it)::

    python -m bench.cold_index /work/k100c /tmp/idx OUT.json     # the 100k workspace (bench/assemble_100k.sh)

The index folder is deleted first. Used by bench/RESULTS.md, session 32."""

from __future__ import annotations

import inspect
import json
import resource
import shutil
import sys
import time
from pathlib import Path

from bench.perf import PhaseTimer, _cpu, load_embedder
from delphi_ls import Engine
from delphi_ls.stores.meta import MetaStore


def run(corpus: Path, index: Path) -> dict:
    shutil.rmtree(index, ignore_errors=True)
    eng = Engine(corpus, index_dir=str(index), embedder="potion-base-8M")
    timer = PhaseTimer()
    timer.install(eng)
    cpu0, t0 = _cpu(), time.perf_counter()
    indexer = eng._indexer()
    wanted = getattr(eng, "_chroma_wanted", None)  # as bench.perf.run decides it
    indexer.defer_chroma = wanted is not None and not wanted()
    indexer.embed_ahead = True
    eng._index_lock.acquire()
    rep = indexer.index_lexical(None)
    t_lex, cpu_lex = time.perf_counter() - t0, _cpu()
    if wanted is not None and indexer.defer_chroma and wanted():
        indexer.defer_chroma = False
    beside = "grams_stop" in inspect.signature(indexer.index_vectors).parameters
    grams: dict[str, float] = {}
    real_apart = MetaStore.build_grams_apart

    def apart(meta, *args, **kwargs):  # the trigram build beside the vector pass, on its thread: when, how long
        grams["start_s"], c0 = time.perf_counter() - t0, time.thread_time()
        try:
            return real_apart(meta, *args, **kwargs)
        finally:
            grams["end_s"], grams["cpu_s"] = time.perf_counter() - t0, time.thread_time() - c0

    MetaStore.build_grams_apart = apart  # type: ignore[method-assign]
    indexer.index_vectors(None, rep, **({"grams_stop": eng._stop} if beside else {}))
    t_pass = time.perf_counter() - t0
    for name in ("finish_grams", "finish_lexical"):
        if getattr(indexer, name, None):
            getattr(indexer, name)()
    eng._index_lock.release()
    t_all, cpu1 = time.perf_counter() - t0, _cpu()
    timer.uninstall()
    MetaStore.build_grams_apart = real_apart  # type: ignore[method-assign]
    out = {"lexical_s": round(t_lex, 1), "vector_pass_done_s": round(t_pass, 1), "vectors_complete_s": round(t_all, 1),
           "grams_beside": {k: round(v, 1) for k, v in grams.items()},
           "cpu_lexical": {"main": round(cpu_lex[0] - cpu0[0], 1), "children": round(cpu_lex[1] - cpu0[1], 1)},
           "cpu_all": {"main": round(cpu1[0] - cpu0[0], 1), "children": round(cpu1[1] - cpu0[1], 1)},
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "phases": timer.report(t_all), "counts": eng.counts()}
    texts = list(dict.fromkeys(eng.embed_texts()))
    model = load_embedder("potion-base-8M")
    part = texts[:20000]
    t1 = time.perf_counter()
    for i in range(0, len(part), 256):
        model.embed(part[i: i + 256])
    took = time.perf_counter() - t1
    # No bar on a corpus without chunks (or too small to time): said as such, not a division by zero.
    out["model_alone_s"] = round(took * len(texts) / len(part), 1) if part and took > 0 else None
    out["ratio"] = round(t_all / out["model_alone_s"], 2) if out["model_alone_s"] else None
    eng.close()
    return out


if __name__ == "__main__":
    result = run(Path(sys.argv[1]), Path(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
