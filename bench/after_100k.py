"""After ``bench.perf`` on the 100,000-file workspace (run with ``keep=True``), on the index it kept:

    python -m bench.after_100k /tmp/delphi-perf-XXXX

the language server's first answer with results after ``initialized`` on that existing index, warm
``delphi/context`` p50/p95 through the server beside the engine called directly (right after the server's
catch-up, and again after 30 s of quiet), and the server's peak RSS (this process's children)."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from bench.perf import QUESTIONS, questions_for, server_cold_start, server_latency
from delphi_ls import Engine

work = Path(sys.argv[1])
corpus, index = work / "corpus", work / "index"
out = {}
# Twice: without a saved view or exact matrix (the server builds them, and saves them: the index is big), then
# with what that first start saved (stores/view_cache.py).
(index / "view.pickle").unlink(missing_ok=True)
for name in ("exact.pickle", "exact.vectors"):  # the exact search's matrix, saved too (sessions 9 and 11)
    (index / name).unlink(missing_ok=True)
out["server_first_answer_existing_index"] = server_cold_start(corpus, index, "potion-base-8M")
out["server_first_answer_existing_index_saved_view"] = server_cold_start(corpus, index, "potion-base-8M")
out["saved_view_mb"] = round((index / "view.pickle").stat().st_size / 2**20, 1) if (index / "view.pickle").exists() else None
exact = next((index / n for n in ("exact.vectors", "exact.pickle") if (index / n).exists()), None)
out["saved_exact_mb"] = round(exact.stat().st_size / 2**20, 1) if exact else None

# Where the first answer's time goes, in this process (the server's own start adds its initialize):
# opening the engine, the in-memory view (built, or loaded when the server above saved it), then the
# first question, which opens
# the vector store (HNSW above the exact bound, else the exact matrix) and the lexical searcher.
t0 = time.perf_counter()
eng = Engine(corpus, index_dir=str(index))
t1 = time.perf_counter()
view = eng.view()
t2 = time.perf_counter()
eng.context(QUESTIONS[0])
t3 = time.perf_counter()
eng.context(QUESTIONS[1])
t4 = time.perf_counter()
out["first_answer_breakdown_s"] = {
    "engine_open": round(t1 - t0, 2), "view": round(t2 - t1, 2), "view_source": eng.view_source,
    "graph_edges": view.graph.edges if view.graph else None,
    "first_question_after_view": round(t3 - t2, 2), "second_question": round(t4 - t3, 2)}
eng.close()
eng = Engine(corpus, index_dir=str(index))
qs = questions_for(eng)
lat = []
for q in qs[:3]:
    eng.context(q)
for q in qs:
    t1 = time.perf_counter()
    eng.context(q)
    lat.append(time.perf_counter() - t1)
eng.close()
lat.sort()
out["direct_p50_ms"] = round(1000 * lat[len(lat) // 2], 1)
out["server"] = server_latency(corpus, index, "potion-base-8M", qs, lat[len(lat) // 2])
# The same after 30 s of quiet: right after its catch-up a server is still busy with what follows it.
out["server_after_30s_quiet"] = server_latency(corpus, index, "potion-base-8M", qs, lat[len(lat) // 2], settle_s=30)
out["peak_rss_children_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
print(json.dumps(out, indent=1))
