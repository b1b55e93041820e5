"""Time from opening an engine on a fresh index to its first searchable batch (wall and CPU).

    python -m bench.first_batch FOLDER [--runs 2]

What a cold start's first answer waits for, without the language server around it: ``Engine(...)``,
then ``index()`` in a thread until its progress callback reports the first files written. Prints
whether Chroma was opened by then (it should not be: it opens after the lexical pass). CPU time is
this process's, so it reads true on a loaded machine where wall time does not.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

from delphi_ls import Engine


def once(folder: str) -> dict[str, float | bool]:
    t0, c0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as idx:
        eng = Engine(folder, index_dir=idx)
        opened = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        first: dict[str, float | bool] = {}
        done = threading.Event()

        def progress(phase: str, n: int, total: int, chunks: int) -> None:
            if n > 0 and not done.is_set():
                first.update(wall=time.perf_counter() - t0, cpu=time.process_time() - c0,
                             chroma_open=eng._vectors_opened)  # noqa: SLF001 (what the bench is for)
                done.set()
                eng.stop_indexing()

        th = threading.Thread(target=eng.index, kwargs={"progress": progress})
        th.start()
        th.join()
        eng.close()
    return {"open_wall_s": round(opened["wall"], 3), "open_cpu_s": round(opened["cpu"], 3),
            "first_batch_wall_s": round(float(first.get("wall", -1)), 3),
            "first_batch_cpu_s": round(float(first.get("cpu", -1)), 3), "chroma_open": bool(first.get("chroma_open"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    for _ in range(a.runs):
        print(once(a.folder))


if __name__ == "__main__":
    main()
