"""Pin a test module to the Whoosh lexical store.

Some tests reach into Whoosh's own files and objects (``whoosh/*.seg`` and ``*.toc`` damaged on purpose,
Whoosh query objects, Whoosh's tiered merges); since tantivy became the default lexical store they run on
Whoosh, which stays a supported store. tantivy's counterparts are in ``tests/test_tantivy_store.py``.
A module imports the fixture (``from tests.lexical_pin import whoosh_store_only  # noqa: F401``); being
autouse and module-scoped, it is set before the module's own fixtures build their indexes, and the
environment variable reaches the CLI subprocesses those tests start too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def whoosh_store_only() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DELPHI_LEXICAL_STORE", "whoosh")
        yield
