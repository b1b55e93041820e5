"""The vector store behind a `chroma run` server on loopback (how a team shares one index)."""

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from delphi_ls import Engine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path: Path):
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = _free_port()
    proc = subprocess.Popen([exe, "run", "--path", str(tmp_path / "chroma-srv"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("chroma run exited at start")
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("chroma run did not answer within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def test_index_and_query_through_chroma_server(workspace: Path, tmp_path: Path, chroma_server: str):
    with Engine(workspace, index_dir=str(tmp_path / "idx"), chroma_url=chroma_server) as eng:
        eng.index()
        assert eng.vectors.where == chroma_server
        assert eng.vectors.count() == eng.meta.counts()["chunks"]
        res = eng.context("exponential backoff between upload attempts")
        top = res["results"][0]
        assert top["path"] == "shipyard/retry.py" and "vector" in top["branches"]
        assert eng.health(check_staleness=False)["model"]["probe"]["status"] == "ok"


def test_unreachable_server_is_a_health_error(workspace: Path, tmp_path: Path):
    with Engine(workspace, index_dir=str(tmp_path / "idx"), chroma_url=f"http://127.0.0.1:{_free_port()}") as eng:
        eng.index()
        h = eng.health(check_staleness=False)
        assert not h["ok"]
        assert any(p["code"] == "vector_store" for p in h["problems"])
        assert eng.context("backoff")["results"]  # lexical branches still answer
