"""The manifest's counts are cached per file state: every query reads them, and counting grows with the index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from delphi_ls import Engine
from delphi_ls.stores.meta import MetaStore


def test_counts_follow_own_writes_and_other_connections(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def alpha():\n    return 1\n")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        assert eng.counts()["files"] == 1 and eng.counts()["symbols"] == 1
        (ws / "b.py").write_text("def beta():\n    return 2\n\ndef gamma():\n    return 3\n")
        eng.index()  # this connection writes
        assert eng.counts()["files"] == 2 and eng.counts()["symbols"] == 3
    meta = MetaStore(tmp_path / "idx" / "meta.sqlite")
    assert meta.counts()["files"] == 2
    other = sqlite3.connect(str(tmp_path / "idx" / "meta.sqlite"))  # another process's commit
    other.execute("DELETE FROM symbols WHERE name = 'gamma'")
    other.commit()
    other.close()
    assert meta.counts()["symbols"] == 2
    got = meta.counts()
    got["files"] = 99  # a caller's copy: the cache is not shared with it
    assert meta.counts()["files"] == 2
    meta.close()
