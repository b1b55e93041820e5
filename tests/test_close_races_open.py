"""close() while another thread is opening Chroma (session 24 put the open under its own lock, so a question no
longer waits out the health report's import of chromadb): close waits for the open, then closes what it opened;
after close nothing opens a client. Real Chroma, real index of the shipyard fixture."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls import engine as engine_mod

from .conftest import build_workspace


def test_close_waits_for_an_open_under_way_and_closes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = build_workspace(tmp_path / "ws", huge_bytes=2_000)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as e:
        e.index()
    real = engine_mod.VectorStore
    started, release = threading.Event(), threading.Event()
    closed: list[object] = []

    class SlowStore(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a, **k) -> None:
            started.set()
            assert release.wait(30)
            super().__init__(*a, **k)

        def close(self) -> None:
            closed.append(self)
            super().close()

    monkeypatch.setattr(engine_mod, "VectorStore", SlowStore)
    eng = Engine(ws, index_dir=str(tmp_path / "idx"))
    opened: list[object] = []
    opener = threading.Thread(target=lambda: opened.append(eng.vectors))
    opener.start()
    assert started.wait(30)
    closer = threading.Thread(target=eng.close)
    closer.start()
    closer.join(0.5)
    assert closer.is_alive(), "close() went ahead of the open under way"
    release.set()
    opener.join(30)
    closer.join(30)
    assert not opener.is_alive() and not closer.is_alive()
    assert isinstance(opened[0], SlowStore) and closed == opened  # what the open made, close closed

    # Closed before anything opened it: nothing opens a client afterwards.
    started.clear()
    eng2 = Engine(ws, index_dir=str(tmp_path / "idx"))
    eng2.close()
    assert eng2.vectors is None and not started.is_set()
