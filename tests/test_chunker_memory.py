"""Chunking keeps nothing of a file once it is done: a cold index of 105,000 files grew past 2.7 GB while
py-tree-sitter's callback-backed `node.text` leaked every read (languages/base.py, SOURCE)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

from delphi_ls.indexing.chunker import chunk_file

SOURCE = "\n\n".join(
    f"import os.path as p{i}\nfrom pkg.mod{i} import name{i}\n\n\nclass Thing{i}(Base):\n"
    f"    \"\"\"Thing number {i}.\"\"\"\n\n    def method_{i}(self, value: int) -> int:\n"
    f"        return value * {i} + len(p{i}.sep)\n" for i in range(150))


def _kept_by(runs: int, chunk: Callable[[int], None]) -> int:
    """Bytes still traced after ``runs`` calls of ``chunk(k)`` (whatever each call made is dropped by it)."""
    gc.collect()
    tracemalloc.start()
    try:
        for k in range(runs):
            chunk(k)
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_chunking_a_file_again_and_again_keeps_no_memory() -> None:
    first = chunk_file("pkg/things.py", SOURCE)
    assert len(first.symbols) >= 300 and first.imports  # names and imports were read off the tree

    def again(_k: int) -> None:
        assert [s.name for s in chunk_file("pkg/things.py", SOURCE).symbols] == [s.name for s in first.symbols]

    grown = _kept_by(30, again)
    # Each run reads hundreds of names; a leak of their 4 KB read-backs was megabytes per run.
    assert grown < 1_000_000, f"{grown / 1e6:.1f} MB kept by 30 chunkings of one file"


def test_parsing_a_large_file_through_the_read_callback_keeps_nothing() -> None:
    """Files of 64 KB or more are parsed through a read callback (for its deadline), whose returned slices
    py-tree-sitter 0.26.1 never released: a server re-indexing an open 900 KB buffer grew about 1.5 MB a run from
    this alone (session 43). What the binding keeps is given back after each parse."""
    big = SOURCE * 8
    assert len(big.encode()) > 64 * 1024  # the callback's side of chunker._parse
    first = chunk_file("pkg/big_things.py", big)

    def edited(k: int) -> None:
        assert len(chunk_file("pkg/big_things.py", big + f"\n# edit {k}\n").symbols) == len(first.symbols)

    grown = _kept_by(12, edited)
    assert grown < 2_000_000, f"{grown / 1e6:.1f} MB kept by 12 parses of a {len(big) // 1024} KB file"
