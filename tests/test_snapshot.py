"""Index snapshots (issue 18): one machine writes a workspace's index to a file, another loads it into
its own checkout (another folder) and brings it up to date with the normal index run.

Real workspaces in tmp_path (the shipyard fixture), real SQLite, Whoosh and Chroma, the shipped
embedder. A second machine is a second folder with a second index folder; its files get new mtimes,
as a fresh checkout does.

Each case that builds, loads or swaps an index runs on both lexical stores (the ``store`` fixture;
review 7 M5: they ran on Whoosh only after tantivy became the default); the one that reads Whoosh's own
files (``*.toc``, pickled members) is pinned to Whoosh.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.indexing.snapshot import HEADER, SnapshotError
from delphi_ls.stores.lexical import FOLDERS as LEXICAL_FOLDERS

from .conftest import IGNORED_JUNK, build_workspace

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = ["where is the retry backoff computed?", "grpc proxy TLS configuration", "CacheKey"]


def checkout(src: Path, dst: Path) -> Path:
    """A copy of the workspace as another machine's checkout: same bytes, new mtimes, no links."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("loop", "outside"))
    for p in dst.rglob("*"):
        if p.is_file() and not p.is_symlink():
            os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 7_000_000_000))
    return dst


def top(eng: Engine, q: str) -> list[str]:
    return [r["path"] for r in eng.context(q, limit=5)["results"]]


@pytest.fixture(scope="module", params=["whoosh", "tantivy"])
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The lexical store, through the environment so that every engine and CLI call of a test uses it
    (module scope: one snapshot per store). ``parametrize("store", [...], indirect=True)`` pins one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DELPHI_LEXICAL_STORE", request.param)
        yield request.param


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, store: str) -> tuple[Path, Path, dict[str, list[str]]]:
    """A workspace in /…/a/repo indexed and written to a snapshot; the source's answers."""
    base = tmp_path_factory.mktemp(f"snap-{store}")
    ws = build_workspace(base / "a" / "repo", huge_bytes=2_000)
    with Engine(ws, index_dir=base / "index-a") as eng:
        assert eng.lexical.name == store
        # Things of the index folder that are not the index, none of which may travel.
        eng.context("warm up", trace_file=base / "index-a" / "traces.jsonl")
        (base / "index-a" / "daemon.token").write_text("not-for-sharing")
        head = eng.snapshot(base / "repo.delphi-snapshot")
        assert head["counts"]["vectors"] == head["counts"]["chunks"] > 0
        answers = {q: top(eng, q) for q in QUESTIONS}
    return ws, base / "repo.delphi-snapshot", answers


def members(snapshot: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(snapshot, "r:gz") as tar:
        return tar.getmembers()


def test_round_trip_into_another_folder_answers_the_same_and_redoes_nothing(built, tmp_path: Path) -> None:
    ws, snap, answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    got = Engine.load_snapshot(snap, other, index_dir=tmp_path / "index-b")
    assert got["vectors"].startswith("exact search from the embedding cache")
    with Engine(other, index_dir=tmp_path / "index-b") as eng:
        assert eng.meta.get_state("root") == str(other.resolve())
        # Answers straight from the loaded index, before any run (the exact search reads the cache).
        assert {q: top(eng, q) for q in QUESTIONS} == answers
        assert eng.vector_status()[0] and eng._vectors is None  # noqa: SLF001 (Chroma not needed for that)
        rep = eng.index()
        # Every mtime differs here, every content matches: all kept, nothing parsed or embedded again;
        # Chroma (no files of it travel) is not filled either: below the exact bound nothing reads it.
        assert (rep.files_indexed, rep.files_deleted) == (0, 0)
        assert rep.files_unchanged == eng.counts()["files"] > 10
        assert rep.chunks_embedded == 0 and rep.repaired == [] and eng._vectors is None  # noqa: SLF001
        assert eng.check_stores() == {}
        assert {q: top(eng, q) for q in QUESTIONS} == answers
        h = eng.health()
        assert h["ok"] and h["branches"]["vector"] == "ready", h["problems"]
        assert h["model"]["match"] and h["model"]["probe"]["cosine"] > 0.99
        assert h["snapshot"]["file"] == snap.name  # health names where the index came from
    # Where Chroma answers (above the bound, or by setting), a run fills it from the embedding cache.
    with Engine(other, index_dir=tmp_path / "index-b", vector_search="hnsw") as eng:
        rep = eng.index()
        assert rep.chunks_embedded == rep.vectors_from_cache == eng.counts()["chunks"]
        assert rep.repaired == ["vector store filled from the embedding cache (a snapshot was loaded)"]
        assert eng.index().chunks_embedded == 0  # once
        assert eng.check_stores() == {} and eng.vectors.count() == eng.counts()["vectors"]
        assert {q: top(eng, q) for q in QUESTIONS} == answers
        h = eng.health()
        assert h["ok"] and h["branches"]["vector"] == "ready", h["problems"]
    with Engine(ws, index_dir=tmp_path / "index-fresh") as fresh:
        assert fresh.health(check_staleness=False)["snapshot"] is None


def test_edits_additions_and_removals_after_load_are_brought_up_to_date(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    retry = other / "shipyard" / "retry.py"
    old = retry.read_bytes()
    # Same size, and the mtime the source recorded: only the content hash can tell it changed.
    new = old.replace(b"flaky uploads", b"quirky jetski", 1)
    assert len(new) == len(old) and new != old
    retry.write_bytes(new)
    src_mtime = (ws / "shipyard" / "retry.py").stat().st_mtime_ns
    os.utime(retry, ns=(src_mtime, src_mtime))
    (other / "shipyard" / "harbour.py").write_text("def moor_the_quokka_vessel():\n    return 'quokka'\n")
    (other / "docs" / "retry.md").unlink()
    Engine.load_snapshot(snap, other, index_dir=tmp_path / "index-b")
    with Engine(other, index_dir=tmp_path / "index-b") as eng:
        before = eng.counts()["files"]
        rep = eng.index()
        assert rep.files_indexed == 2 and rep.files_deleted == 1, rep
        assert rep.files_unchanged == before - 2
        assert eng.counts()["files"] == before
        assert "shipyard/harbour.py" in top(eng, "moor the quokka vessel")
        assert all(r["path"] != "docs/retry.md" for r in eng.context("retry", limit=50)["results"])
        text = "".join(c.text for c in eng.chunks("shipyard/retry.py"))
        assert "quirky jetski" in text and "flaky uploads" not in text  # the edited text, not the snapshot's
        assert eng.check_stores() == {}


def test_ignored_files_and_private_files_of_the_index_folder_never_travel(built) -> None:
    ws, snap, _answers = built
    names = [m.name for m in members(snap)]
    assert names[0] == HEADER
    # Not Chroma's files: they include a Python pickle, never to be handed over from another machine.
    # Nor Whoosh's: it unpickles its TOC and segments (the loader rebuilds it from the manifest).
    assert names[1:] == ["index/meta.sqlite"], names
    raw = gzip.decompress(snap.read_bytes())
    assert b"not-for-sharing" not in raw and b"warm up" not in raw  # daemon token, traces
    for rel, text in IGNORED_JUNK.items():
        assert text.encode() not in raw and rel.encode() not in raw, rel
    assert b"ignored by delphiignore" not in raw  # secret_notes.txt, ignored by .delphiignore
    assert b"shipyard/retry.py" in raw  # (the check can fail: indexed files are there)
    assert oct(snap.stat().st_mode & 0o777) == oct(0o600)


def test_a_snapshot_from_another_model_or_chunker_is_refused_and_the_index_kept(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    (other / "mine.py").write_text("def only_in_this_checkout():\n    return 1\n")
    idx = tmp_path / "index-b"
    with Engine(other, index_dir=idx) as eng:
        eng.index()
        counts = eng.counts()
    listing = sorted(p.relative_to(idx).as_posix() for p in idx.rglob("*"))
    with pytest.raises(SnapshotError, match=r"embedding model: .*potion-base-8M.*all-MiniLM"):
        Engine.load_snapshot(snap, other, index_dir=idx, embedder="minilm-l6-int8")
    with pytest.raises(SnapshotError, match=r"chunk size \(setting chunk_chars\): the snapshot has 1500, this machine 800"):
        Engine.load_snapshot(snap, other, index_dir=idx, chunk_chars=800)
    assert sorted(p.relative_to(idx).as_posix() for p in idx.rglob("*")) == listing
    with Engine(other, index_dir=idx) as eng:
        assert eng.counts() == counts
        assert "mine.py" in top(eng, "only_in_this_checkout")


def rewrite(snap: Path, out: Path, extra: list[tuple[tarfile.TarInfo, bytes]] = (),
            keep=lambda m: True, replace: dict[str, bytes] | None = None, patch=lambda header: None) -> Path:
    """The snapshot with members added, dropped or replaced, the header listing them with their true
    sizes and hashes (so only the loader's own checks can refuse them)."""
    with tarfile.open(snap, "r:gz") as tar:
        items = [(m, tar.extractfile(m).read() if m.isreg() else b"") for m in tar.getmembers()]
    for i, (m, _data) in enumerate(items):
        if m.name in (replace or {}):
            m.size = len(replace[m.name])
            items[i] = (m, replace[m.name])
            extra = [*extra, (m, replace[m.name])]
    header = json.loads(items[0][1])
    for m, data in extra:
        header["members"][m.name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    extra = [(m, d) for m, d in extra if m.name not in (replace or {})]
    patch(header)
    data = json.dumps(header).encode()
    items[0][0].size = len(data)
    items = [(items[0][0], data)] + [it for it in items[1:] if keep(it[0])] + list(extra)
    with tarfile.open(out, "w:gz") as tar:
        for m, body in items:
            tar.addfile(m, io.BytesIO(body) if m.isreg() else None)
    return out


def member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple[tarfile.TarInfo, bytes]:
    m = tarfile.TarInfo(name)
    m.type, m.linkname, m.size = kind, link, len(data) if kind == tarfile.REGTYPE else 0
    return m, data


@pytest.mark.parametrize("bad, said", [
    (member("index/../../escaped.txt"), "escapes"),
    (member("/tmp/delphi-absolute-escape.txt"), "unexpected member"),
    (member("index/whoosh/../../../escaped.txt"), "escapes"),
    (member("index/whoosh/link", kind=tarfile.SYMTYPE, link="/etc/passwd"), "link"),
    (member("index/whoosh/hard", kind=tarfile.LNKTYPE, link="index/meta.sqlite"), "link"),
    (member("index/meta.sqlite/x"), "not part of an index"),  # L2: was a NotADirectoryError traceback
    (member("index/traces.jsonl"), "not part of an index"),
])
def test_hostile_archives_are_refused_and_nothing_lands_outside(built, tmp_path: Path, bad, said) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    idx = tmp_path / "deep" / "er" / "index-b"
    hostile = rewrite(snap, tmp_path / "hostile.snap", extra=[bad])
    with pytest.raises(SnapshotError, match=said):
        Engine.load_snapshot(hostile, other, index_dir=idx)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "deep" / "escaped.txt").exists()
    assert not Path("/tmp/delphi-absolute-escape.txt").exists()
    assert not (idx / "meta.sqlite").exists()  # nothing installed
    assert {p.name for p in idx.iterdir()} <= {"writer.lock", "open.lock"}  # no staging left behind


def test_a_manifest_carrying_its_own_trigger_is_refused(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    with tarfile.open(snap, "r:gz") as tar:
        (tmp_path / "meta.sqlite").write_bytes(tar.extractfile("index/meta.sqlite").read())
    db = sqlite3.connect(tmp_path / "meta.sqlite")
    db.execute("CREATE TRIGGER sneaky AFTER UPDATE ON files BEGIN DELETE FROM chunks; END")
    db.commit()
    db.close()
    bad = rewrite(snap, tmp_path / "trigger.snap", replace={"index/meta.sqlite": (tmp_path / "meta.sqlite").read_bytes()})
    other = checkout(ws, tmp_path / "b" / "repo")
    with pytest.raises(SnapshotError, match="triggers or views this Delphi does not make .*trigger sneaky"):
        Engine.load_snapshot(bad, other, index_dir=tmp_path / "index-b")
    assert not (tmp_path / "index-b" / "meta.sqlite").exists()


@pytest.mark.parametrize("sql, said", [
    # Rows naming files outside the workspace were loaded and answered as file:///ws/../../etc/passwd
    # until the next index (a security audit, session 26).
    ("UPDATE files SET path = '../../etc/passwd' WHERE rowid = (SELECT MIN(rowid) FROM files)", "files.path"),
    ("UPDATE chunks SET path = '/etc/shadow' WHERE rowid = (SELECT MIN(rowid) FROM chunks)", "chunks.path"),
    ("UPDATE symbols SET path = 'src/./x.py' WHERE rowid = (SELECT MIN(rowid) FROM symbols)", "symbols.path"),
    ("INSERT INTO commit_messages VALUES ('m', '[\"../out.py\"]')", "commit"),
    # A state value that is not JSON made every command a traceback, for good.
    ("INSERT OR REPLACE INTO state VALUES ('embedder', '{')", "state 'embedder'"),
])
def test_a_manifest_naming_files_outside_or_unreadable_is_refused(built, tmp_path: Path, sql: str, said: str) -> None:
    ws, snap, _answers = built
    with tarfile.open(snap, "r:gz") as tar:
        (tmp_path / "meta.sqlite").write_bytes(tar.extractfile("index/meta.sqlite").read())
    db = sqlite3.connect(tmp_path / "meta.sqlite")
    db.execute(sql)
    db.commit()
    db.close()
    bad = rewrite(snap, tmp_path / "paths.snap", replace={"index/meta.sqlite": (tmp_path / "meta.sqlite").read_bytes()})
    other = checkout(ws, tmp_path / "b" / "repo")
    with pytest.raises(SnapshotError, match=re.escape(said)):
        Engine.load_snapshot(bad, other, index_dir=tmp_path / "index-b")
    assert not (tmp_path / "index-b" / "meta.sqlite").exists()


def test_a_snapshots_skipped_list_never_arrives(built, tmp_path: Path) -> None:
    """A crafted skipped row (`../../etc/passwd`) reached the editor as a diagnostic's URI; a size and mtime of a
    file skipped for its bytes, from another machine, could hide a file (review, session 26)."""
    ws, snap, _answers = built
    with tarfile.open(snap, "r:gz") as tar:
        (tmp_path / "meta.sqlite").write_bytes(tar.extractfile("index/meta.sqlite").read())
    db = sqlite3.connect(tmp_path / "meta.sqlite")
    db.execute("INSERT INTO skipped VALUES ('../../etc/passwd', 'secret file')")
    db.execute("INSERT INTO skipped VALUES ('src/app.py', 'binary content (NUL byte)')")
    db.execute("INSERT INTO skipped_seen VALUES ('src/app.py', 1, 1)")
    db.commit()
    db.close()
    crafted = rewrite(snap, tmp_path / "skipped.snap", replace={"index/meta.sqlite": (tmp_path / "meta.sqlite").read_bytes()})
    other = checkout(ws, tmp_path / "b" / "repo")
    Engine.load_snapshot(crafted, other, index_dir=tmp_path / "index-b")
    db = sqlite3.connect(tmp_path / "index-b" / "meta.sqlite")
    try:
        assert db.execute("SELECT COUNT(*) FROM skipped").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM skipped_seen").fetchone()[0] == 0
    finally:
        db.close()


def test_snapshot_out_that_is_not_a_regular_file_is_refused(built, tmp_path: Path) -> None:
    """``--out /dev/null`` as root replaced the device node with the snapshot; a FIFO the same way."""
    ws, _snap, _answers = built
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    with Engine(ws, index_dir=tmp_path / "ix", vectors=False) as eng:
        eng.index()
        with pytest.raises(SnapshotError, match="not a regular file"):
            eng.snapshot(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_another_index_format_parser_or_schema_is_refused_naming_each(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")

    def older(h: dict) -> None:
        h["built"].update(index_format=h["built"]["index_format"] - 1, parser_version=1, manifest_schema="0" * 16)
    with pytest.raises(SnapshotError) as e:
        Engine.load_snapshot(rewrite(snap, tmp_path / "old.snap", patch=older), other, index_dir=tmp_path / "ix")
    for what in ("engine index format", "chunker/parser version: the snapshot has 1", "manifest schema"):
        assert what in str(e.value)
    assert "lexical schema" not in str(e.value)  # only what differs
    # ... and what to do (an upgrade newcomer, session 37: refused with no way on).
    assert "build the snapshot again with this version of Delphi" in str(e.value)
    assert not (tmp_path / "ix" / "meta.sqlite").exists()


def test_a_header_that_claims_too_much_or_lies_is_refused(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    idx = tmp_path / "index-b"

    def huge(h: dict) -> None:
        h["members"]["index/meta.sqlite"]["size"] = 1 << 60
    with pytest.raises(SnapshotError, match="unpacks to .* MiB free"):
        Engine.load_snapshot(rewrite(snap, tmp_path / "huge.snap", patch=huge), other, index_dir=idx)

    def bad_size(h: dict) -> None:
        h["members"]["index/meta.sqlite"]["size"] = "12"
    with pytest.raises(SnapshotError, match="does not list its members properly"):
        Engine.load_snapshot(rewrite(snap, tmp_path / "bad.snap", patch=bad_size), other, index_dir=idx)

    def wrong_hash(h: dict) -> None:
        h["members"]["index/meta.sqlite"]["sha256"] = "0" * 64
    with pytest.raises(SnapshotError, match="does not match its checksum"):
        Engine.load_snapshot(rewrite(snap, tmp_path / "hash.snap", patch=wrong_hash), other, index_dir=idx)
    assert not (idx / "meta.sqlite").exists()


def test_truncated_corrupt_or_incomplete_snapshots_are_refused_and_the_index_kept(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    idx = tmp_path / "index-b"
    with Engine(other, index_dir=idx, vectors=False) as eng:
        eng.index()
        counts = eng.counts()
    data = snap.read_bytes()
    cut = tmp_path / "cut.snap"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(SnapshotError, match="corrupt or truncated"):
        Engine.load_snapshot(cut, other, index_dir=idx)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    (tmp_path / "flip.snap").write_bytes(bytes(flipped))
    with pytest.raises(SnapshotError, match="corrupt"):
        Engine.load_snapshot(tmp_path / "flip.snap", other, index_dir=idx)
    # A whole archive that lost a member its header lists (cut at a member boundary).
    short = rewrite(snap, tmp_path / "short.snap", keep=lambda m: m.name != "index/meta.sqlite")
    with pytest.raises(SnapshotError, match="lacks 1 member"):
        Engine.load_snapshot(short, other, index_dir=idx)
    (tmp_path / "not.snap").write_bytes(b"hello, not a snapshot")
    with pytest.raises(SnapshotError, match="not a readable snapshot"):
        Engine.load_snapshot(tmp_path / "not.snap", other, index_dir=idx)
    with Engine(other, index_dir=idx, vectors=False) as eng:
        assert eng.counts() == counts
        assert eng.check_stores() == {}


def test_with_hnsw_the_vector_branch_waits_for_the_refill_and_says_so(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "renamed")  # another folder name: another Chroma collection
    Engine.load_snapshot(snap, other, index_dir=tmp_path / "index-b")
    with Engine(other, index_dir=tmp_path / "index-b", vector_search="hnsw") as eng:
        ok, status = eng.vector_status()
        assert not ok and "snapshot was loaded" in status
        assert eng.context("retry backoff")["branchesReady"]["vector"] == status  # said, not silent
        eng.index(reembed=False)  # a question's catch-up leaves Chroma alone
        assert not eng.vector_status()[0]
        eng.index()
        assert eng.vector_status() == (True, "ready")
        h = eng.health()
        assert h["ok"] and h["model"]["probe"]["cosine"] > 0.99, h["problems"]


def readme_block() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Index snapshots", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```sh\n(.*?)```", section, re.S)
    assert m, "README lost the ```sh block under ### Index snapshots"
    return m.group(1)


def test_the_readme_snapshot_commands_run_as_written(tmp_path: Path) -> None:
    """The README's block: the first command on the machine that builds (cwd: its checkout), the rest
    on the other (cwd: its checkout, another folder; the snapshot file carried beside it)."""
    lines = [ln.split("#", 1)[0].strip() for ln in readme_block().splitlines()]
    lines = [ln for ln in lines if ln]
    assert lines[0].startswith("delphi snapshot create") and lines[1].startswith("delphi snapshot load")
    a = build_workspace(tmp_path / "a" / "repo", huge_bytes=2_000)
    b = checkout(a, tmp_path / "b" / "repo")
    bin_ = Path(sys.executable).parent
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-a"), "HOME": str(tmp_path)}
    outs = []
    for i, line in enumerate(lines):
        if i == 1:  # the other machine: its own cache, the snapshot copied over
            env["XDG_CACHE_HOME"] = str(tmp_path / "cache-b")
            made = list((tmp_path / "a").glob("*.delphi-snapshot"))
            assert len(made) == 1, made
            shutil.copy(made[0], tmp_path / "b" / made[0].name)
        cwd = a if i == 0 else b
        proc = subprocess.run(["bash", "-c", f'PATH="{bin_}:$PATH" {line}'], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        outs.append(proc.stdout)
    assert re.search(r"indexed 0 files \(\d+ unchanged", outs[-1]), outs[-1]


def test_index_with_snapshot_starts_a_new_index_from_it_and_ignores_it_after(built, tmp_path: Path) -> None:
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    cmd = [str(Path(sys.executable).parent / "delphi"), "index", str(other), "--index-dir", str(tmp_path / "ix"),
           "--quiet", "--snapshot", str(snap)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert re.search(r"indexed 0 files \(\d+ unchanged", first.stdout), first.stdout  # nothing parsed again
    (other / "shipyard" / "harbour.py").write_text("def moor():\n    return 1\n")
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "--snapshot ignored" in again.stderr
    assert "indexed 1 files (" in again.stdout  # the existing index was kept and brought up to date


def test_index_with_a_refused_snapshot_on_a_new_workspace_says_no_index_was_made(built, tmp_path: Path) -> None:
    # It said "the existing index is unchanged" where there was none (a newcomer, session 31).
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    cmd = [str(Path(sys.executable).parent / "delphi"), "index", str(other), "--index-dir", str(tmp_path / "ix"),
           "--quiet", "--snapshot", str(snap), "--embedder", "minilm-l6-int8"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "snapshot refused, no index was made: embedding model" in proc.stderr, proc.stderr
    assert "existing index" not in proc.stderr
    assert not (tmp_path / "ix" / "meta.sqlite").exists()


def test_the_snapshot_setting_starts_a_new_index_and_a_refused_one_is_named(built, tmp_path: Path) -> None:
    ws, snap, answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    with Engine(other, index_dir=tmp_path / "ix", snapshot=str(snap)) as eng:
        assert eng.problems == {} and eng.counts()["files"] > 10  # there before any run
        assert {q: top(eng, q) for q in QUESTIONS} == answers
    (other / "shipyard" / "harbour.py").write_text("def moor():\n    return 1\n")
    with Engine(other, index_dir=tmp_path / "ix", snapshot=str(snap)) as eng:  # an index exists: not reloaded
        assert eng.index().files_indexed == 1
    with Engine(other, index_dir=tmp_path / "iy", snapshot=str(snap), chunk_chars=800) as eng:
        assert "chunk size" in eng.problems["snapshot"] and eng.counts()["files"] == 0
        assert any("not loaded, indexing the workspace instead" in p["message"] for p in eng.health()["problems"])
        assert eng.index().files_indexed > 10  # built from the workspace
    # A later process (`delphi health` after the editor's start refused it) names it too (a newcomer, session 31).
    with Engine(other, index_dir=tmp_path / "iy", snapshot=str(snap), chunk_chars=800) as eng:
        said = [p for p in eng.health()["problems"] if p["code"] == "snapshot"]
        assert said and "chunk size" in said[0]["message"] and said[0]["severity"] == "warning", said


def test_a_repository_file_may_not_set_the_snapshot(tmp_path: Path) -> None:
    from delphi_ls.settings import Settings

    (tmp_path / "delphi.toml").write_text('snapshot = "/tmp/somebody-elses.delphi-snapshot"\n')
    s = Settings.load(tmp_path, env={}, user_config=tmp_path / "none.toml")
    assert s.snapshot is None and any("'snapshot'" in r for r in s.refused)


# ---------------------------------------------------------------- review fixes (H1, H2, M2, M4, M5, L1-L3)
class _Payload:
    """A pickle that, when loaded, writes a marker file: what a crafted Whoosh TOC did (H1)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("store", ["whoosh"], indirect=True)  # Whoosh's own files
def test_no_whoosh_file_travels_and_a_pickled_member_is_refused_unread(built, tmp_path: Path) -> None:
    """H1: Whoosh reads its TOC and segments with pickle; a snapshot ships only the manifest, the loader
    rebuilds Whoosh from it, and a snapshot carrying a Whoosh file is refused before anything opens it."""
    import pickle

    ws, snap, answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    marker = tmp_path / "PWNED"
    toc = pickle.dumps(_Payload(marker))
    for name in ("index/whoosh/_MAIN_1.toc", "index/whoosh/MAIN_abc.seg"):
        bad = rewrite(snap, tmp_path / "pickle.snap", extra=[member(name, toc)])
        with pytest.raises(SnapshotError, match="not part of an index"):
            Engine.load_snapshot(bad, other, index_dir=tmp_path / "ix")
        assert not (tmp_path / "ix" / "meta.sqlite").exists()
    with Engine(other, index_dir=tmp_path / "ix") as eng:  # opening never reads a staged or shipped pickle
        pass
    assert not marker.exists()
    # A good snapshot: Whoosh is there, rebuilt from the manifest, before any engine opens the index.
    shutil.rmtree(tmp_path / "ix")
    Engine.load_snapshot(snap, other, index_dir=tmp_path / "ix")
    assert any((tmp_path / "ix" / "whoosh").glob("*.toc"))
    with Engine(other, index_dir=tmp_path / "ix") as eng:
        assert eng.check_stores() == {} and eng.lexical.doc_count() >= eng.counts()["chunks"] > 0
        assert eng.health()["branches"]["bm25"] == "ready"
        assert {q: top(eng, q) for q in QUESTIONS} == answers


def test_removed_and_ignored_text_never_travels(tmp_path: Path) -> None:
    """H2: a line removed from a file, and a file later ignored, leave no trace in the snapshot (FTS5
    segments and free pages keep deleted text until a merge or VACUUM)."""
    ws = tmp_path / "repo"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "alpha.py").write_text("def keep():\n    return 'zebrafoxtrotalpha'\n\ndef other():\n    return 1\n")
    (ws / "pkg" / "bravo.py").write_text("def bravo_secret():\n    return 'quokkalimabravo'\n")
    (ws / "pkg" / "plain.py").write_text("def plain():\n    return 2\n")
    with Engine(ws, index_dir=tmp_path / "ix", branch_weights={"filedoc": 1.0}) as eng:
        eng.index()
        assert eng.context("zebrafoxtrotalpha")["results"]  # (the check can fail: the tokens were indexed)
        (ws / "pkg" / "alpha.py").write_text("def keep():\n    return 'plain'\n\ndef other():\n    return 1\n")
        eng.index()
        (ws / ".delphiignore").write_text("pkg/bravo.py\n")
        eng.index()
        eng.snapshot(tmp_path / "s.snap")
    raw = gzip.decompress((tmp_path / "s.snap").read_bytes())
    for token in (b"zebrafoxtrotalpha", b"quokkalimabravo", b"bravo_secret"):
        assert token not in raw and token.upper() not in raw, token
    assert b"plain" in raw


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("moved", [["lexical", "meta.sqlite"], ["lexical"]])
def test_a_load_killed_mid_swap_leaves_an_index_that_comes_back(tmp_path: Path, store: str, moved: list[str]) -> None:
    """M2: kill -9 during the swap strands the old stores in .snapshot-old-PID; the next open puts
    them back (the state on disk a kill leaves: the manifest moved out or not, a new lexical store half in)."""
    lex = LEXICAL_FOLDERS[store]
    moved = [lex if n == "lexical" else n for n in moved]
    ws = build_workspace(tmp_path / "repo", huge_bytes=2_000)
    idx = tmp_path / "ix"
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.index()
        counts = eng.counts()
        answer = top(eng, "retry backoff")
    pid = dead_pid()
    aside = idx / f".snapshot-old-{pid}"
    aside.mkdir()
    for n in moved:
        (idx / n).rename(aside / n)
    if "meta.sqlite" in moved:
        (idx / lex).mkdir()  # a new store that got in before the kill
        (idx / lex / "half").write_text("x")
    for stale in (f".snapshot-in-{pid}", f".snapshot-out-{pid}"):
        (idx / stale).mkdir()
        (idx / stale / "meta.sqlite").write_text("staged")
    live = idx / f".snapshot-in-{os.getpid()}"  # a live process's staging is left alone
    live.mkdir()
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        assert eng.recovered_snapshot and eng.counts() == counts
        assert eng.check_stores() == {} and top(eng, "retry backoff") == answer
    left = sorted(p.name for p in idx.iterdir() if p.name.startswith(".snapshot"))
    assert left == [live.name]
    live.rmdir()


def test_a_huge_tar_extension_header_is_refused_before_it_is_read(built, tmp_path: Path) -> None:
    """M4: a GNU long name (or pax header) claiming many MiB was read whole into memory by tarfile."""
    ws, snap, _answers = built
    for kind in (tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE):
        bomb = tmp_path / "bomb.snap"
        ti = tarfile.TarInfo("././@LongLink")
        ti.type, ti.size = kind, 8 << 20
        with gzip.open(bomb, "wb", compresslevel=1) as g:
            g.write(ti.tobuf(format=tarfile.GNU_FORMAT))
            g.write(b"a" * (8 << 20))
            g.write(b"\0" * 1024)
        with pytest.raises(SnapshotError, match="extension header of 8,388,608 bytes"):
            Engine.load_snapshot(bomb, checkout(ws, tmp_path / f"b{kind!r}"[:8] / "repo"), index_dir=tmp_path / "ix")


def test_paths_with_hash_or_question_mark_work(tmp_path: Path) -> None:
    """M5: SQLite URIs were built from raw paths; a `#` cut them (a folder named c#-tools)."""
    ws = build_workspace(tmp_path / "c#-tools" / "repo", huge_bytes=2_000)
    with Engine(ws, index_dir=tmp_path / "c#-tools" / "ix", vectors=False) as eng:
        head = eng.snapshot(tmp_path / "c#-tools" / "s.snap")
    assert head["counts"]["files"] > 10
    other = checkout(ws, tmp_path / "d#x" / "repo")
    Engine.load_snapshot(tmp_path / "c#-tools" / "s.snap", other, index_dir=tmp_path / "d#x" / "ix", vectors=False)
    with Engine(other, index_dir=tmp_path / "d#x" / "ix", vectors=False) as eng:
        assert eng.counts()["files"] == head["counts"]["files"]


def test_the_partial_file_is_private_and_never_follows_a_planted_link(built, tmp_path: Path) -> None:
    """L1: the partial snapshot was created with the umask's mode, and a link at its name was followed."""
    ws, _snap, _answers = built
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    out = tmp_path / "out" / "s.snap"
    out.parent.mkdir()
    (out.parent / f".{out.name}.part-{os.getpid()}").symlink_to(target)
    with Engine(ws, index_dir=tmp_path / "ix", vectors=False) as eng:
        with pytest.raises(SnapshotError, match="in the way"):
            eng.snapshot(out)
        assert target.read_text() == "keep me" and not out.exists()
        (out.parent / f".{out.name}.part-{os.getpid()}").unlink()
        old = os.umask(0o022)
        try:
            eng.snapshot(out)
        finally:
            os.umask(old)
    assert oct(out.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.parametrize("patch", [
    lambda h: h.update(built="x"),
    lambda h: h.update(embedder="potion"),
    lambda h: h.update(counts=[1]),
    lambda h: h["workspace"].update(head=5),
])
def test_a_header_with_fields_of_the_wrong_type_is_refused(built, tmp_path: Path, patch) -> None:
    """L2: such headers gave AttributeError tracebacks instead of a refusal."""
    ws, snap, _answers = built
    bad = rewrite(snap, tmp_path / "types.snap", patch=patch)
    with pytest.raises(SnapshotError, match="wrong type"):
        Engine.load_snapshot(bad, checkout(ws, tmp_path / "b" / "repo"), index_dir=tmp_path / "ix")


def test_the_builders_root_and_skipped_files_do_not_travel(built, tmp_path: Path) -> None:
    """L3: the state's absolute root and the skipped-file list (which can name secret files)."""
    ws, snap, _answers = built
    raw = gzip.decompress(snap.read_bytes())
    assert str(ws).encode() not in raw and str(ws.parent.parent).encode() not in raw
    with tarfile.open(snap, "r:gz") as tar:
        (tmp_path / "m.sqlite").write_bytes(tar.extractfile("index/meta.sqlite").read())
    db = sqlite3.connect(tmp_path / "m.sqlite")
    try:
        assert db.execute("SELECT COUNT(*) FROM skipped").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM skipped_seen").fetchone()[0] == 0
        assert db.execute("SELECT value FROM state WHERE key='root'").fetchone() is None
    finally:
        db.close()
    with Engine(ws, index_dir=tmp_path / "src-ix", vectors=False) as eng:
        eng.index()
        assert eng.meta.skipped()  # (the check can fail: the builder does skip files)
        assert eng.meta.skipped_for_bytes()  # those skipped for their bytes too (the binary logo.dat)


def test_loading_an_index_another_engine_has_open_is_refused(built, tmp_path: Path) -> None:
    """M1: a load under an open engine (a language server, another process) split its stores."""
    ws, snap, _answers = built
    other = checkout(ws, tmp_path / "b" / "repo")
    idx = tmp_path / "ix"
    with Engine(other, index_dir=idx, vectors=False) as eng:
        eng.index()
        counts = eng.counts()
        code = ("import sys; from delphi_ls import Engine; "
                "Engine.load_snapshot(sys.argv[1], sys.argv[2], index_dir=sys.argv[3], vectors=False)")
        proc = subprocess.run([sys.executable, "-c", code, str(snap), str(other), str(idx)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and "is open in a Delphi process" in proc.stderr, proc.stderr[-2000:]
        with pytest.raises(SnapshotError, match="is open in a Delphi process"):
            Engine.load_snapshot(snap, other, index_dir=idx, vectors=False)
        assert eng.counts() == counts and eng.check_stores() == {}
    Engine.load_snapshot(snap, other, index_dir=idx, vectors=False)  # closed: loads


def test_a_snapshot_inside_the_workspace_is_refused(built, tmp_path: Path) -> None:
    """A newcomer's finding (session 25): `--out ./inside.delphi-snapshot` in the checkout wrote it there,
    because the refusal (a ValueError) was raised inside the try that caught relative_to's ValueError."""
    ws, _snap, _answers = built
    with Engine(ws, index_dir=ws.parent.parent / "index-a") as eng:
        for out in (ws / "inside.delphi-snapshot", ws / "src" / ".." / "deep.delphi-snapshot"):
            with pytest.raises(SnapshotError, match="inside the workspace"):
                eng.snapshot(out)
            assert not out.exists()
    proc = subprocess.run([sys.executable, "-m", "delphi_ls.cli", "snapshot", "create", ".", "--out",
                           "./inside.delphi-snapshot", "--index-dir", str(ws.parent.parent / "index-a")],
                          cwd=ws, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "inside the workspace" in proc.stderr, (proc.stdout, proc.stderr)
    assert not (ws / "inside.delphi-snapshot").exists()


def test_a_manifest_with_a_damaged_page_and_a_true_header_is_refused(built, tmp_path: Path) -> None:
    """Loaded before (its checksum matched its bytes), and every question after it died "database disk image is
    malformed", `delphi index` repairing nothing (a hostile-input audit, session 46)."""
    from tests.test_store_recovery import _garble_page_of

    ws, snap, _answers = built
    with tarfile.open(snap, "r:gz") as tar:
        (tmp_path / "meta.sqlite").write_bytes(tar.extractfile("index/meta.sqlite").read())
    _garble_page_of(tmp_path / "meta.sqlite", "chunks")
    bad = rewrite(snap, tmp_path / "page.snap", replace={"index/meta.sqlite": (tmp_path / "meta.sqlite").read_bytes()})
    other = checkout(ws, tmp_path / "b" / "repo")
    with pytest.raises(SnapshotError, match="manifest is damaged"):
        Engine.load_snapshot(bad, other, index_dir=tmp_path / "index-b")
    assert not (tmp_path / "index-b" / "meta.sqlite").exists()
