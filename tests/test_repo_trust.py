"""A cloned repository is not the user (issue 12, item 8).

Its own ``delphi.toml`` / ``[tool.delphi]`` may not point Delphi at the network, at output paths, at
another index folder or at models in folders; those keys come only from the user's own configuration
and a repository that sets one is told so (health warning). Traces stay under the index folder and
are inert if a shell ever reads them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.settings import Settings, SettingsError
from delphi_ls.traces import dumps_inert
from tests.lsp_wire import Wire

EVIL_NAME = "$(touch${IFS}X).py"  # a file name that is a command when a shell expands it


def no_user_config(tmp: Path) -> dict[str, str]:
    return {"DELPHI_CONFIG": str(tmp / "absent.toml")}


# ---------------------------------------------------------------------- settings
@pytest.mark.parametrize("line,key", [
    ('chroma_url = "http://203.0.113.7:8000"', "chroma_url"),
    ('chromaUrl = "http://203.0.113.7:8000"', "chromaUrl"),
    ('trace_file = "~/.bashrc"', "trace_file"),
    ('index_dir = "/tmp/anywhere"', "index_dir"),
    ('embedder = "./models/mine"', "embedder"),
    ('reranker = "/opt/models/ce"', "reranker"),
])
@pytest.mark.parametrize("where", ["delphi.toml", "pyproject.toml"])
def test_repo_file_cannot_set_user_only_keys(tmp_path: Path, line: str, key: str, where: str) -> None:
    text = line + "\nchunk_chars = 900\n"
    (tmp_path / where).write_text(text if where == "delphi.toml" else "[tool.delphi]\n" + text)
    s = Settings.load(tmp_path, env=no_user_config(tmp_path))
    assert s.chunk_chars == 900  # the rest of the file still applies
    assert s.as_dict() == {**Settings(chunk_chars=900).as_dict()}, "the refused key changed something"
    assert len(s.refused) == 1 and f"'{key}'" in s.refused[0] and "ignored" in s.refused[0]
    assert where.split(".")[0] in s.refused[0]


def test_repo_file_may_raise_max_file_bytes_only_so_far(tmp_path: Path) -> None:
    """A cloned repository's `max_file_bytes = 100000000` had a 20 MB file cut into 14,000 chunks (a newcomer,
    session 25): a repository may raise it to 10 MB; above that only your own configuration may."""
    (tmp_path / "delphi.toml").write_text("max_file_bytes = 100000000\nchunk_chars = 900\n")
    s = Settings.load(tmp_path, env=no_user_config(tmp_path))
    assert (s.max_file_bytes, s.chunk_chars) == (Settings().max_file_bytes, 900)
    assert len(s.refused) == 1 and "'max_file_bytes' to 100000000, over 10,000,000" in s.refused[0]
    for sneaky in ("1e9", '"100000000"'):  # a float or a string the setting reads as a number (review)
        (tmp_path / "delphi.toml").write_text(f"max_file_bytes = {sneaky}\n")
        s = Settings.load(tmp_path, env=no_user_config(tmp_path))
        assert s.max_file_bytes == Settings().max_file_bytes and len(s.refused) == 1, (sneaky, s.refused)
    (tmp_path / "delphi.toml").write_text("max_file_bytes = 5000000\n")
    assert Settings.load(tmp_path, env=no_user_config(tmp_path)).max_file_bytes == 5_000_000
    user = tmp_path / "user.toml"
    user.write_text("max_file_bytes = 100000000\n")
    s = Settings.load(tmp_path, env={"DELPHI_CONFIG": str(user)})
    assert s.max_file_bytes == 100_000_000 and s.refused == []


def test_repo_file_may_pick_builtin_models_and_tuning(tmp_path: Path) -> None:
    (tmp_path / "delphi.toml").write_text('embedder = "minilm-l6-int8"\nreranker = "off"\nvectors = false\n'
                                          'extra_ignores = ["gen/"]\nbranch_weights = {bm25 = 2.0}\n')
    s = Settings.load(tmp_path, env=no_user_config(tmp_path))
    assert (s.embedder, s.reranker, s.vectors, s.extra_ignores, s.branch_weights) == \
        ("minilm-l6-int8", "off", False, ["gen/"], {"bm25": 2.0})
    assert s.refused == []


def test_the_users_own_sources_may_set_them(tmp_path: Path) -> None:
    (tmp_path / "delphi.toml").write_text('chroma_url = "http://203.0.113.7:8000"\n')
    user = tmp_path / "user.toml"
    user.write_text(f'index_dir = "{tmp_path / "idx"}"\ntrace_file = "traces.jsonl"\n')
    env = {"DELPHI_CONFIG": str(user), "DELPHI_CHROMA_URL": "http://127.0.0.1:8000"}
    s = Settings.load(tmp_path, overrides={"embedder": "minilm-l6-int8"}, env=env)
    assert s.index_dir == tmp_path / "idx" and s.chroma_url == "http://127.0.0.1:8000"
    assert s.trace_path(tmp_path / "idx") == tmp_path / "idx" / "traces.jsonl"
    assert len(s.refused) == 1  # the repository's attempt is still reported, though the user set the key
    # Command line / editor overrides win over the user's file too.
    s = Settings.load(tmp_path, overrides={"index_dir": str(tmp_path / "cli")}, env=env)
    assert s.index_dir == tmp_path / "cli"


def test_user_config_file_errors_name_the_file(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("chroma_url = = 1\n")
    with pytest.raises(SettingsError, match="user.toml"):
        Settings.load(tmp_path, env={"DELPHI_CONFIG": str(user)})


def test_trace_path_is_under_the_index_unless_absolute(tmp_path: Path) -> None:
    assert Settings().trace_path(tmp_path) is None
    assert Settings(trace_file=Path("t/q.jsonl")).trace_path(tmp_path) == tmp_path / "t" / "q.jsonl"
    assert Settings(trace_file=Path("/var/tmp/q.jsonl")).trace_path(tmp_path) == Path("/var/tmp/q.jsonl")


def test_health_warns_about_a_refused_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELPHI_CONFIG", str(tmp_path / "absent.toml"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def f():\n    return 1\n")
    (ws / "delphi.toml").write_text('trace_file = "~/.bashrc"\n')
    with Engine(ws, index_dir=str(tmp_path / "index"), vectors=False) as eng:
        problems = eng.health(check_staleness=False)["problems"]
    refused = [p for p in problems if p["code"] == "repo_setting_refused"]
    assert len(refused) == 1 and refused[0]["severity"] == "warning" and "'trace_file'" in refused[0]["message"]


# ---------------------------------------------------------------------- traces
def sourced_creates_x(tmp: Path, text: str) -> bool:
    """Append ``text`` to an rc file and source it with bash in an empty folder: did X appear?"""
    tmp.mkdir(parents=True, exist_ok=True)
    rc = tmp / "rc"
    rc.write_text("# a shell rc file\n" + text)
    subprocess.run(["bash", "-c", f"source {rc}"], cwd=tmp, capture_output=True, timeout=30,
                   env={"PATH": os.environ["PATH"], "HOME": str(tmp)})
    return (tmp / "X").exists()


def test_sourcing_the_old_trace_format_would_run_the_file_name(tmp_path: Path) -> None:
    """The check below can fail: plain json.dumps of the same record does run $(...)."""
    assert sourced_creates_x(tmp_path / "plain", json.dumps({"path": EVIL_NAME}) + "\n")


def test_a_trace_is_inert_when_a_shell_sources_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELPHI_CONFIG", str(tmp_path / "absent.toml"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / EVIL_NAME).write_text("def touch_it():\n    return 'touch'\n")
    (ws / "b.py").write_text("x = '`id` !! $HOME'\n")
    index = tmp_path / "index"
    with Engine(ws, index_dir=str(index), vectors=False, trace_file="traces.jsonl") as eng:
        eng.index()
        ans = eng.context("touch it $(touch${IFS}X) `touch X` !!", draft="$(touch X)\n`touch X`")
    assert EVIL_NAME in [r["path"] for r in ans["results"]]
    trace = index / "traces.jsonl"  # relative trace_file: under the index folder
    text = trace.read_text()
    assert len(text.splitlines()) == 1
    rec = json.loads(text)
    assert EVIL_NAME in json.dumps(rec) and rec["params"]["draft"] == "$(touch X)\n`touch X`"
    assert not any(c in text for c in "$`!")
    assert not sourced_creates_x(tmp_path / "sh", text)


def test_inert_dumps_round_trip() -> None:
    rec = {"a": "$x `y` !z \\$ \\\\$ \n\u2028 é", "$k": ["!"]}
    line = dumps_inert(rec)
    assert json.loads(line) == rec and "\n" not in line and not any(c in line for c in "$`!")


# ---------------------------------------------------------------------- end to end: CLI and editor
class Listener:
    """A loopback port that records any connection made to it (a stand-in for a remote Chroma)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> int:
        self._stop.set()
        self._t.join(5)
        self.sock.close()
        return self.connections


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def hostile_repo(tmp: Path, port: int) -> Path:
    ws = tmp / "clone"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "upload.py").write_text("def retry_upload(n):\n    return n + 1\n")
    (ws / EVIL_NAME).write_text("def touch_it():\n    return 1\n")
    (ws / "delphi.toml").write_text(f'chroma_url = "http://127.0.0.1:{port}"\ntrace_file = "~/.bashrc"\n'
                                    f'index_dir = "{tmp / "chosen-by-repo"}"\n'
                                    f'reranker = "{tmp / "repo-model"}"\n')
    (tmp / "repo-model").mkdir()
    (tmp / "repo-model" / "ltr.json").write_text("{}")
    return ws


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def user_env(tmp: Path) -> dict[str, str]:
    """A user with no config of their own; HOME and caches inside tmp so every write can be seen."""
    return {"HOME": str(tmp / "home"), "XDG_CACHE_HOME": str(tmp / "home" / ".cache"),
            "XDG_CONFIG_HOME": str(tmp / "home" / ".config"), "DELPHI_CONFIG": ""}


def writes_outside(before: dict, after: dict, index_prefix: str) -> list[str]:
    return sorted(p for p in after if before.get(p) != after[p] and not p.startswith(index_prefix))


def test_cli_on_a_hostile_clone_connects_nowhere_and_writes_only_its_index(tmp_path: Path,
                                                                          listener: Listener) -> None:
    ws = hostile_repo(tmp_path, listener.port)
    env = {**os.environ, **user_env(tmp_path)}
    (tmp_path / "home").mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = snapshot(tmp_path)
    for args in (["index", str(ws), "--quiet"], ["context", str(ws), "touch it", "--json"]):
        p = subprocess.run([sys.executable, "-m", "delphi_ls.cli", *args], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "'chroma_url'" in p.stderr and "'trace_file'" in p.stderr  # the user is told, every run
    health = subprocess.run([sys.executable, "-m", "delphi_ls.cli", "health", str(ws)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=120)
    assert "warning" in health.stdout and "'index_dir'" in health.stdout and "'reranker'" in health.stdout
    after = snapshot(tmp_path)
    assert listener.close() == 0, "a repository's delphi.toml made Delphi open a network connection"
    index_prefix = str(Path("home") / ".cache" / "delphi") + os.sep
    assert writes_outside(before, after, index_prefix) == []
    assert not (tmp_path / "chosen-by-repo").exists() and not (tmp_path / "home" / ".bashrc").exists()
    assert not any(p.name == "X" for p in tmp_path.rglob("X"))


def test_editor_opening_a_hostile_clone_connects_nowhere(tmp_path: Path, listener: Listener) -> None:
    """Opening the folder and asking one question: the path an editor user takes without any flag."""
    ws = hostile_repo(tmp_path, listener.port)
    (tmp_path / "home").mkdir()
    before = snapshot(tmp_path)
    w = Wire(env=user_env(tmp_path), cwd=tmp_path)
    try:
        w.initialize(ws, {})
        ans: dict = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # until the first index run has the file
            ans = w.call("delphi/context", {"query": "touch it"}, timeout=60)
            if EVIL_NAME in json.dumps(ans.get("result", {})):
                break
            time.sleep(0.3)
        assert EVIL_NAME in json.dumps(ans["result"]), ans
        health = w.call("delphi/health", {}, timeout=60)["result"]
        problems = [p for ws_h in health["workspaces"] for p in ws_h["problems"]]
        assert any(p["code"] == "repo_setting_refused" and "'chroma_url'" in p["message"] for p in problems)
    finally:
        assert w.close() == 0
    assert listener.close() == 0, "a repository's delphi.toml made delphi-ls open a network connection"
    index_prefix = str(Path("home") / ".cache" / "delphi") + os.sep
    assert writes_outside(before, snapshot(tmp_path), index_prefix) == []
    assert not (tmp_path / "home" / ".bashrc").exists()
