"""File events for `delphi serve` / `delphi mcp` (issue 18): told of changes by inotify instead of walking the
tree every 2 s. Real inotify on real folders; the session test shows an edit found with polling put off
for an hour, and its control shows the same edit not found without events."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from delphi_ls.api import ContextRequest
from delphi_ls.session import Session, SessionEvents
from delphi_ls.workspace.watch import Watcher, watched_folders

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    for d in ("src/pkg", "build/gen", "node_modules/dep", ".git/objects", "docs"):
        (ws / d).mkdir(parents=True)
    outside.mkdir()
    (outside / "deep").mkdir()
    (ws / ".gitignore").write_text("build/\nnode_modules/\n")
    (ws / "src" / "pkg" / "mod.py").write_text("def alpha():\n    return 1\n")
    os.symlink(outside, ws / "src" / "link")
    return ws, outside


class Collector:
    def __init__(self) -> None:
        self.reports: list[set[str] | None] = []
        self.cv = threading.Condition()

    def __call__(self, paths: set[str] | None) -> None:
        with self.cv:
            self.reports.append(paths)
            self.cv.notify_all()

    def wait(self, pred, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cv:
            while not pred(self.reports):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)
        return True


@contextmanager
def _watching(ws: Path) -> Iterator[tuple[Watcher, Collector]]:
    """A started watcher on ``ws`` and what it reported, stopped on the way out."""
    got = Collector()
    w = Watcher(ws, got)
    w.start()
    try:
        yield w, got
    finally:
        w.stop()


def _named(reports: list[set[str] | None]) -> set[str]:
    return set().union(*(r for r in reports if r is not None))


def test_watched_folders_are_the_walks(tmp_path: Path):
    """Ignored folders, version-control folders and links are not watched (a link to `/` must not watch the
    machine; node_modules costs thousands of watches and is never indexed)."""
    ws, _ = _tree(tmp_path)
    assert watched_folders(ws) == ["", "docs", "src", "src/pkg"]
    assert watched_folders(ws, ["docs/"]) == ["", "src", "src/pkg"]


def test_events_name_paths_and_never_come_through_links(tmp_path: Path):
    ws, outside = _tree(tmp_path)
    with _watching(ws) as (w, got):
        assert w.count == 4
        (outside / "deep" / "secret.py").write_text("x = 1\n")  # reached only through src/link
        (ws / "build" / "gen" / "out.py").write_text("x = 1\n")  # an ignored folder: not watched
        (ws / "src" / "pkg" / "mod.py").write_text("def alpha():\n    return 2\n")
        assert got.wait(lambda r: "src/pkg/mod.py" in _named(r))
        time.sleep(0.3)
        named = _named(got.reports)
        assert named == {"src/pkg/mod.py"}, named
        assert None not in got.reports
        (ws / "src" / "pkg" / "mod.py").rename(ws / "src" / "pkg" / "moved.py")
        assert got.wait(lambda r: {"src/pkg/mod.py", "src/pkg/moved.py"} <= _named(r))


def test_new_folder_means_walk_and_is_then_watched(tmp_path: Path):
    """A folder that appears may hold files no event named: report "walk everything", then watch it."""
    ws, _ = _tree(tmp_path)
    with _watching(ws) as (w, got):
        (ws / "src" / "fresh").mkdir()
        assert got.wait(lambda r: None in r)
        assert got.wait(lambda r: w.count == 5)
        (ws / "src" / "fresh" / "new.py").write_text("def beta():\n    pass\n")
        assert got.wait(lambda r: "src/fresh/new.py" in _named(r))
        (ws / ".gitignore").write_text("build/\nnode_modules/\nsrc/fresh/\n")  # the rules changed
        assert got.wait(lambda r: r[-1] is None and w.count == 4)


class _Quiet(SessionEvents):
    pass


def _found(s: Session, word: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.wait_idle(10)
        ans = s.context(ContextRequest(query=word, limit=5))
        if any(r["path"] == "src/pkg/added.py" for r in ans["results"]):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("events", [True, False])
def test_session_learns_of_an_edit_from_events(tmp_path: Path, events: bool):
    """With a poll put off for an hour, only events can bring a new file into the answers: found with
    events (within seconds), not found without them (the control that shows the test can fail)."""
    ws, _ = _tree(tmp_path)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    try:
        s.watch(interval=3600, events=events)
        assert s.wait_idle(120)
        state = s.status()["workspaces"][0]["changes"]
        assert state.startswith("file events (inotify" if events else "polling every 3600 s"), state
        (ws / "src" / "pkg" / "added.py").write_text("def zanzibar_quokka():\n    return 3\n")
        (ws / "build" / "gen" / "ignored.py").write_text("def zanzibar_quokka_ignored():\n    return 3\n")
        assert _found(s, "zanzibar_quokka", 8.0) is events
        eng = next(iter(s.engines.values()))
        assert "build/gen/ignored.py" not in {row[0] for row in eng.meta.files()}
    finally:
        s.shutdown()


def test_a_name_that_is_not_utf8_does_not_cost_the_other_edits(tmp_path: Path):
    """The walk never indexes such a name (and the manifest could not store it): it is dropped from the
    report, and the edit beside it in the same burst is still reported."""
    ws, _ = _tree(tmp_path)
    with _watching(ws) as (w, got):
        with open(os.path.join(os.fsencode(ws / "src" / "pkg"), b"bad\xff.py"), "w") as fh:
            fh.write("x = 1\n")
        (ws / "src" / "pkg" / "mod.py").write_text("def alpha():\n    return 3\n")
        assert got.wait(lambda r: "src/pkg/mod.py" in _named(r))
        time.sleep(0.2)
        assert all(n.isprintable() and "\udcff" not in n for n in _named(got.reports)), got.reports


def test_a_writer_that_never_pauses_does_not_hold_reports_back(tmp_path: Path):
    """A log written every 20 ms (a dev server in the workspace) would keep a burst open for ever: a report
    waits at most about a second."""
    ws, _ = _tree(tmp_path)
    stop = threading.Event()

    def writer() -> None:
        with open(ws / "server.log", "a") as fh:
            while not stop.is_set():
                fh.write("tick\n")
                fh.flush()
                time.sleep(0.02)

    with _watching(ws) as (_w, got):
        t = threading.Thread(target=writer)
        t.start()
        try:
            time.sleep(0.3)
            (ws / "src" / "pkg" / "mod.py").write_text("def alpha():\n    return 4\n")
            assert got.wait(lambda r: "src/pkg/mod.py" in _named(r), timeout=2.5)
        finally:
            stop.set()
            t.join()


def test_replaced_workspace_folder_is_watched_again(tmp_path: Path):
    """`rm -rf ws && git clone ... ws`: the old folder's watches are gone with it. The watcher says so
    (one full pass asked), and the session starts a fresh one on the new folder, so later edits are found
    within seconds, not at the 10-minute rescan."""
    ws, _ = _tree(tmp_path)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    try:
        s.watch(interval=0.2)
        assert s.wait_idle(120)
        old = s._watchers[ws.resolve()]
        ws.rename(tmp_path / "old-ws")
        (ws / "src" / "pkg").mkdir(parents=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and s._watchers.get(ws.resolve()) in (None, old):
            time.sleep(0.1)
        assert old.failed and old.replaced
        new = s._watchers.get(ws.resolve())
        assert new is not None and new is not old and new.failed is None
        assert s.status()["workspaces"][0]["changes"].startswith("file events (inotify, 3 folders")
        (ws / "src" / "pkg" / "added.py").write_text("def zanzibar_quokka():\n    return 3\n")
        assert _found(s, "zanzibar_quokka", 8.0)
    finally:
        s.shutdown()


class _Said(SessionEvents):
    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []

    def message(self, severity: str, text: str) -> None:
        self.said.append((severity, text))


@pytest.mark.parametrize("events", [True, False])
def test_a_workspace_moved_away_keeps_its_index_and_is_caught_up_when_back(tmp_path: Path, events: bool):
    """`mv repo repo.old` for a few seconds under `delphi mcp`: the index used to be emptied (every file
    "deleted"), the status said "ready; 0 files", and the server polled for good (a hostile newcomer, session
    28). Now nothing is removed, status and answers say the folder is gone, once; when it is back the index
    is brought up to date with what changed meanwhile, and file events are used again."""
    ws, _ = _tree(tmp_path)
    (ws / "delphi.toml").write_text('extra_ignores = ["docs/"]\n')
    said = _Said()
    s = Session(said, {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    root = ws.resolve()
    try:
        s.watch(interval=0.2, events=events)
        assert s.wait_idle(120)
        files = s.engines[root].counts()["files"]
        assert files >= 2
        away = tmp_path / "away"
        ws.rename(away)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and root not in s._gone:
            time.sleep(0.1)
        time.sleep(1.0)  # several polls while it is gone
        assert s.wait_idle(30)
        assert s.engines[root].counts()["files"] == files  # nothing deleted
        st = s.status()["workspaces"][0]
        assert st["state"] == "degraded"
        assert any(p["code"] == "workspace_gone" for p in st["problems"]), st["problems"]
        assert st["changes"].startswith("waiting for the workspace folder to come back")
        ans = s.context(ContextRequest(query="alpha", limit=5))
        assert [r["path"] for r in ans["results"]][:1] == ["src/pkg/mod.py"]
        assert ans["query"]["workspaceGone"] == str(root)
        # No settings file while it is gone is not "back to the defaults" (review, session 29).
        assert s.engines[root].settings.extra_ignores == ["docs/"]
        assert not any(p["code"] == "settings_changed" for p in st["problems"])
        assert sum("is gone" in t for _, t in said.said) == 1, said.said  # said once, not at every poll
        (away / "src" / "pkg" / "added.py").write_text("def zanzibar_quokka():\n    return 3\n")
        away.rename(ws)
        assert _found(s, "zanzibar_quokka", 10.0)  # what changed while away, caught up
        st = s.status()["workspaces"][0]
        assert not any(p["code"] == "workspace_gone" for p in st["problems"])
        if events:
            assert st["changes"].startswith("file events (inotify"), st["changes"]
            (ws / "src" / "pkg" / "added.py").write_text("def zanzibar_quokka_two():\n    return 3\n")
            assert _found(s, "zanzibar_quokka_two", 8.0)
    finally:
        s.shutdown()


@pytest.mark.parametrize("events", [True, False])
def test_a_settings_file_edited_under_a_server_applies_its_ignores_and_says_what_waits(tmp_path: Path, events: bool):
    """`extra_ignores = ["docs/"]` written into delphi.toml under a running `delphi mcp`: the folder's files
    used to stay in answers until a restart (a hostile newcomer, session 28). They leave the index at the
    next pass; a key read only when a folder opens is said to wait for a restart; a broken file keeps the
    settings in use and says so."""
    ws, _ = _tree(tmp_path)
    (ws / "docs" / "notes.py").write_text("def porcupine_ledger():\n    return 1\n")
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    root = ws.resolve()
    eng = s.engines[root]

    def symbols(word: str) -> list[str]:
        return [r["path"] for r in eng.symbols(word)]

    def codes() -> set[str]:
        return {p["code"] for p in s.status()["workspaces"][0]["problems"]}

    def until(pred, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.wait_idle(10)
            if pred():
                return True
            time.sleep(0.2)
        return pred()

    try:
        s.watch(interval=0.2, events=events)
        assert s.wait_idle(120)
        assert symbols("porcupine_ledger") == ["docs/notes.py"]
        (ws / "delphi.toml").write_text('extra_ignores = ["docs/"]\n')
        assert until(lambda: symbols("porcupine_ledger") == [])
        assert "settings_changed" not in codes()
        (ws / "delphi.toml").write_text('extra_ignores = ["docs/"]\nrrf_k = 61\n')
        assert until(lambda: "settings_changed" in codes())
        (ws / "delphi.toml").write_text('extra_ignores = ["docs/"]\nrrf_k = "many"\n')
        assert until(lambda: "settings_file" in codes())
        assert eng.settings.extra_ignores == ["docs/"] and symbols("porcupine_ledger") == []
        (ws / "delphi.toml").unlink()
        assert until(lambda: symbols("porcupine_ledger") == ["docs/notes.py"])
        assert not codes() & {"settings_file", "settings_changed"}
    finally:
        s.shutdown()


def _gone_with_a_new_file(tmp_path: Path, tell: Callable[[Session, Path], object]) -> tuple[Session, Path, Path, Path]:
    """An indexed folder moved away, a run told of it (``tell``) finding it gone, and a file added while away."""
    ws, _ = _tree(tmp_path)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    root = ws.resolve()
    assert s.wait_idle(120)
    away = tmp_path / "away"
    ws.rename(away)
    tell(s, root)
    assert s.wait_idle(30) and root in s._gone
    assert s.engines[root].counts()["files"] >= 2
    (away / "src" / "pkg" / "added.py").write_text("def zanzibar_quokka():\n    return 3\n")
    return s, ws, root, away


def test_an_editor_s_folder_moved_away_and_back_is_caught_up_whole(tmp_path: Path):
    """The language server has no watch loop: the editor's events tell it the folder is back, and the run they
    start is followed by a full pass for what changed while it was away (review, session 29)."""
    s, ws, root, away = _gone_with_a_new_file(tmp_path, lambda s, root: s.file_changed(
        str(root / "src" / "pkg" / "mod.py"), saved=True))
    try:
        away.rename(ws)
        s.file_changed(str(root / "src" / "pkg" / "mod.py"), saved=True)  # only this file is named
        assert _found(s, "zanzibar_quokka", 10.0)
        assert root not in s._gone
    finally:
        s.shutdown()


def test_a_folder_back_with_no_editor_event_is_caught_up_by_the_next_question(tmp_path: Path):
    """Re-cloned while the editor sent no file event (a client without file watching): the language server has no
    watch loop, and its answers kept the deleted files for good (a newcomer, session 36). A question (or a status
    poll) finds the folder back; a small folder's question waits for that catch-up, as at the start."""
    s, ws, root, away = _gone_with_a_new_file(tmp_path, lambda s, _root: s.reindex())
    try:
        away.rename(ws)
        ans = s.context(ContextRequest(query="zanzibar_quokka"))  # the first question after: no event came
        assert [r["path"] for r in ans["results"]][:1] == ["src/pkg/added.py"], ans["results"][:3]
        assert root not in s._gone
    finally:
        s.shutdown()


@pytest.mark.parametrize("last_took", [0.0, 10.0])
def test_a_polls_passes_are_spaced_by_the_last_ones_length(tmp_path: Path, last_took: float):
    """A poll's full pass walks and stats every file: on a large tree it outlasted the interval and the process
    never rested. The next pass waits POLL_SPACING times the last one's length (session 38's review: the language
    server polls too now, where neither the editor nor the system reports changes). The control (a pass that took
    nothing) polls at the interval."""
    ws, _ = _tree(tmp_path)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    try:
        assert s.wait_idle(120)
        root = next(iter(s.engines))
        runs: list[float] = []
        real = s._index

        def counted(eng, paths):
            if paths is None:
                runs.append(time.monotonic())
            return real(eng, paths)

        s._index = counted  # type: ignore[method-assign]
        s._full_pass[root] = (time.monotonic(), last_took)
        s.watch(interval=0.05, events=False)
        time.sleep(2.0)
        assert (len(runs) == 0) if last_took else (len(runs) >= 2), runs
    finally:
        s.shutdown()


def test_a_slow_walk_to_arm_file_events_holds_no_question_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Arming file events walks every folder (13 s of a 100,000-file workspace's start, under its catch-up): the
    language server armed them in its `initialized` handler, and its first answer waited for the walk (and `delphi
    mcp`'s calls for its open). Here the walk is held until released: `watch()` returns, questions and status are
    answered meanwhile (status says the events are starting), and once the walk ends an edit is learnt of by its
    event. On the code before, `watch()` itself blocked until the walk ended."""
    ws, _ = _tree(tmp_path)
    release, walking = threading.Event(), threading.Event()
    real_start = Watcher.start

    def held_start(self: Watcher) -> None:
        walking.set()
        assert release.wait(60)
        real_start(self)

    monkeypatch.setattr(Watcher, "start", held_start)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    try:
        assert s.wait_idle(120)  # an existing index, as a server restarted on a big workspace has
        watcher = threading.Thread(target=s.watch, kwargs={"interval": 3600}, daemon=True)
        watcher.start()
        watcher.join(10)
        assert not watcher.is_alive(), "watch() waited for the walk that arms file events"
        assert walking.wait(10)
        t0 = time.monotonic()
        ans = s.context(ContextRequest(query="where is alpha defined?"))
        assert "src/pkg/mod.py" in [r["path"] for r in ans["results"]]
        assert s.status()["workspaces"][0]["changes"] == "file events starting (listing the folders to watch)"
        assert time.monotonic() - t0 < 30
        assert not s.wait_idle(0.5), "idle said while the events were not yet armed (an edit now could go unseen)"
        # An edit before the folder is watched has no event, and the poll is an hour away: the one full pass after
        # the arming is what sees it.
        (ws / "src" / "pkg" / "added.py").write_text("def zanzibar_quokka():\n    return 3\n")
        release.set()
        assert s.wait_idle(120)
        assert s.status()["workspaces"][0]["changes"].startswith("file events (inotify"), s.status()
        assert _found(s, "zanzibar_quokka", 8.0)
        (ws / "src" / "pkg" / "added.py").write_text("def quokka_after_arming():\n    return 4\n")  # by its event
        assert _found(s, "quokka_after_arming", 8.0)
    finally:
        release.set()
        s.shutdown()


def test_a_walk_that_fails_to_arm_file_events_falls_back_to_polling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A failure of the arming walk other than the ones it names (here an OSError from inside it) left the folder
    "file events starting" for good: never watched, never polled, never retried (a review, session 47)."""
    ws, _ = _tree(tmp_path)

    def failing_sync(self: Watcher) -> None:
        raise PermissionError(13, "Permission denied", str(ws / "src"))

    monkeypatch.setattr(Watcher, "_sync", failing_sync)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])
    try:
        assert s.wait_idle(120)
        s.watch(interval=0.5)
        assert s.wait_idle(30), "idle never said: the folder stayed being armed"
        changes = s.status()["workspaces"][0]["changes"]
        assert changes.startswith("polling") and "PermissionError" in changes, changes
        (ws / "src" / "pkg" / "added.py").write_text("def polled_quokka():\n    return 3\n")
        assert _found(s, "polled_quokka", 15.0)  # the poll sees it
    finally:
        s.shutdown()


def test_runs_wait_for_a_long_arming_once_not_once_per_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Runs wait for file events to be armed, at most ARMING_WAIT_S: each batch after the first waited that long
    again while the walk went on (a review, session 47). Here the walk never ends within the test; the first
    re-index waits out the bound, the second runs at once."""
    from delphi_ls import session as session_mod

    monkeypatch.setattr(session_mod, "ARMING_WAIT_S", 4.0)
    ws, _ = _tree(tmp_path)
    release, walking = threading.Event(), threading.Event()
    real_start = Watcher.start

    def held_start(self: Watcher) -> None:
        walking.set()
        release.wait(120)
        real_start(self)

    monkeypatch.setattr(Watcher, "start", held_start)
    s = Session(_Quiet(), {"indexDir": str(tmp_path / "index"), "vectors": False})
    s.start([ws])

    def found_within(word: str, timeout: float) -> float | None:
        # Read from the index as the worker left it (a question would bring a small folder up to date itself).
        t0 = time.monotonic()
        eng = next(iter(s.engines.values()))
        while time.monotonic() - t0 < timeout:
            if any(r["name"] == word for r in eng.symbols(word, limit=5)):
                return time.monotonic() - t0
            time.sleep(0.1)
        return None

    try:
        assert s.wait_idle(120)
        threading.Thread(target=s.watch, kwargs={"interval": 3600}, daemon=True).start()
        assert walking.wait(10)
        (ws / "src" / "pkg" / "added.py").write_text("def first_quokka():\n    return 1\n")
        s.reindex()
        assert found_within("first_quokka", 30) is not None
        (ws / "src" / "pkg" / "added.py").write_text("def second_quokka():\n    return 2\n")
        s.reindex()
        took = found_within("second_quokka", 30)
        assert took is not None and took < 3.0, took  # the bound (4 s) is not waited again
    finally:
        release.set()
        s.shutdown()
