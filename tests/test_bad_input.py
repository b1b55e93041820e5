"""Bad input gets a clear error and loses nothing."""

import os
from pathlib import Path

import pytest

from delphi_ls import Engine, RequestError


@pytest.mark.parametrize("kwargs,field", [
    ({"query": ""}, "query"),
    ({"query": 42}, "query"),
    ({"query": "x", "limit": 0}, "limit"),
    ({"query": "x", "limit": "10"}, "limit"),
    ({"query": "x", "anchors": "a.py"}, "anchors"),
    ({"query": "x", "anchors": [""]}, "anchors"),
    ({"query": "x", "anchors": ["../../etc/passwd"]}, "anchors"),
    ({"query": "x", "anchors": ["/etc/passwd"]}, "anchors"),
    ({"query": "x", "anchors": ["file:///etc/passwd"]}, "anchors"),
    ({"query": "x", "kinds": ["binary"]}, "kinds"),
    ({"query": "x", "budget_tokens": -5}, "budgetTokens"),
    ({"query": "x", "draft": 7}, "draft"),
    ({"query": "x", "anchors": ["shipyard/retry.py\x00/etc/passwd"]}, "anchors"),  # was ValueError from os.lstat
    ({"query": "x", "anchors": ["file:///x%00y.py"]}, "anchors"),
])
def test_malformed_requests_name_the_field(engine: Engine, kwargs, field):
    with pytest.raises(RequestError) as e:
        engine.context(**kwargs)
    assert e.value.field == field


def test_anchor_forms_inside_the_workspace(engine: Engine, workspace: Path):
    for a in ("shipyard/retry.py", str(workspace / "shipyard/retry.py"), (workspace / "shipyard/retry.py").as_uri(),
              "./shipyard/../shipyard/retry.py"):
        assert engine.normalise_anchor(a) == "shipyard/retry.py"
    # A path that is neither on disk nor in the index (an editor's open buffers are) is a mistake, named
    # (issue 13: a typo used to answer as if there were no anchor).
    with pytest.raises(RequestError, match="new_file.py.*does not exist"):
        engine.context("retry", anchors=["shipyard/new_file.py"])


def test_bad_files_are_reported_and_the_rest_is_usable(engine: Engine):
    h = engine.health(check_staleness=False)
    skipped = h["skipped"]
    assert skipped["assets/logo.dat"].startswith("binary")
    assert skipped["loop"] == "symlink (not followed)"
    assert "too large" in skipped["data/huge.txt"]
    assert skipped["package-lock.json"] == "lockfile"
    assert h["decodedWithReplacement"] == ["legacy/latin1.py"]
    assert h["ok"], h["problems"]
    assert engine.context("brulee")["results"][0]["path"] == "legacy/latin1.py"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_skipped_with_reason(workspace: Path, tmp_path: Path):  # pragma: no cover - CI runs as root
    p = workspace / "shipyard" / "scheduler.py"
    p.chmod(0)
    with Engine(workspace, index_dir=str(tmp_path / "i")) as eng:
        eng.index()
        assert eng.meta.skipped()["shipyard/scheduler.py"].startswith("unreadable")


def test_unreadable_folder_is_skipped_with_reason(workspace: Path, tmp_path: Path, monkeypatch):
    import delphi_ls.workspace.scan as scan_mod

    real = os.scandir

    def flaky(path):
        if str(path).endswith("/engine"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(scan_mod.os, "scandir", flaky)
    with Engine(workspace, index_dir=str(tmp_path / "i")) as eng:
        eng.index()
        assert eng.meta.skipped()["engine"].startswith("unreadable folder")
        assert eng.meta.counts()["files"] > 10


def test_file_deleted_mid_index(workspace: Path, tmp_path: Path, monkeypatch):
    """A file listed by the scan and gone before it is read is skipped, not fatal."""
    import delphi_ls.indexing.pipeline as pipe

    real_scan = pipe.scan

    def scan_then_delete(*a, **kw):
        res = real_scan(*a, **kw)
        (workspace / "shipyard" / "scheduler.py").unlink()
        return res

    monkeypatch.setattr(pipe, "scan", scan_then_delete)
    with Engine(workspace, index_dir=str(tmp_path / "i")) as eng:
        eng.index()
        assert eng.meta.skipped()["shipyard/scheduler.py"] == "vanished during indexing"
        assert eng.meta.chunks_of("shipyard/retry.py")


def test_file_turning_binary_leaves_the_index(chroma_engine: Engine, workspace: Path):
    engine = chroma_engine
    (workspace / "web" / "src" / "policy.ts").write_bytes(b"\x00\x01\x02 now binary")
    engine.index()
    assert engine.meta.chunks_of("web/src/policy.ts") == []
    assert engine.meta.skipped()["web/src/policy.ts"].startswith("binary")
    c = engine.meta.counts()
    assert c["vectors"] == c["chunks"] == engine.vectors.count()


def test_missing_workspace_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="workspace folder not found"):
        Engine(tmp_path / "nope")


def test_index_of_an_older_format_is_rebuilt(workspace: Path, tmp_path: Path):
    idx = tmp_path / "i"
    with Engine(workspace, index_dir=str(idx)) as eng:
        eng.index(vectors=False)
        eng.meta.set_state("format", 0)
    with Engine(workspace, index_dir=str(idx)) as eng:
        assert eng.rebuilt_from_format == 0 and not eng.is_indexed()
        eng.index(vectors=False)
        assert eng.meta.counts()["files"] > 10
