"""A panic of a Rust extension (tantivy, Chroma) as an ordinary error.

pyo3 raises a Rust panic as ``PanicException``, a BaseException: the engine's failure handling
(``except Exception``: say the store is damaged, rebuild it) never saw one, and a damaged file ended the
command in a traceback (tantivy, session 7; Chroma's chroma.sqlite3, session 28).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def panics_as(error: type[Exception], what: str) -> Iterator[None]:
    """Inside, a panic is raised as ``error("{what}: {panic}")``; everything else passes as it is."""
    try:
        yield
    except (Exception, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # pyo3_runtime.PanicException
        raise error(f"{what}: {e}") from e
