"""After ``bench.perf`` on the 100,000-file workspace (run with ``keep=True``), on the index it kept:

    python -m bench.after_100k /tmp/delphi-perf-XXXX

the language server's first answer with results after ``initialized`` on that existing index, warm
``delphi/context`` p50/p95 through the server beside the engine called directly, and the server's peak
RSS (this process's children)."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from bench.perf import questions_for, server_cold_start, server_latency
from delphi_ls import Engine

work = Path(sys.argv[1])
corpus, index = work / "corpus", work / "index"
out = {}
out["server_first_answer_existing_index"] = server_cold_start(corpus, index, "potion-base-8M")
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
out["peak_rss_children_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
print(json.dumps(out, indent=1))
