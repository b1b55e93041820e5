"""MCP fronts beside the direct engine call, in one run: warm latency and resident memory.

    python -m bench.mcp_perf FOLDER [--rounds 3] [--agents 4] [--json OUT]

One index of FOLDER is built first; then the same questions (context, limit 10, the MCP
default budget of 6,000 tokens) are asked of: the session in this process (the bar),
``delphi mcp`` over stdio opening the index itself, ``delphi serve`` over streamable HTTP,
and ``delphi mcp`` over stdio forwarding to that daemon. p50/p95 per front, and the ratio
to the bar. Memory: the summed RSS of one daemon plus N forwarding ``delphi mcp``
processes (N agent sessions sharing one index) against N ``delphi mcp --no-daemon``
processes each opening the index, every process having answered a question.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from delphi_ls.api import ContextRequest
from delphi_ls.session import Session

from .perf import QUESTIONS

CLI = [sys.executable, "-m", "delphi_ls.cli"]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(ms), 1), "p95": round(pct(ms, 0.95), 1), "n": len(ms)}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(of: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == of:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def stdio(folder: Path, index: Path, *extra: str) -> Client:
    return Client(StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", str(folder), "--index-dir",
                                                              str(index), *extra], env=dict(os.environ)))


async def ask_all(client: Client, questions: list[str]) -> list[float]:
    ms = []
    for q in questions:
        t0 = time.perf_counter()
        res = await client.call_tool("context", {"query": q})
        ms.append((time.perf_counter() - t0) * 1000)
        assert not res.is_error, res
    return ms


async def wait_ready(client: Client) -> None:
    for _ in range(600):
        res = await client.call_tool("context", {"query": "warm up", "limit": 1})
        if not (res.structured_content or {}).get("indexing"):
            return
        await anyio.sleep(0.2)


async def run(folder: Path, rounds: int, agents: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="delphi-mcp-perf-"))
    index = work / "index"
    questions = QUESTIONS * rounds
    out: dict[str, Any] = {"folder": str(folder), "questions": len(questions), "agents": agents}

    # The bar: the same session object the fronts use, in this process.
    t0 = time.perf_counter()
    session = Session(None, {"index_dir": str(index)})
    session.start([folder])
    session.wait_idle(1800)
    out["index_seconds"] = round(time.perf_counter() - t0, 1)
    for q in QUESTIONS:  # warm caches as the fronts' warm-up does
        session.context(ContextRequest(query=q, limit=10, budget_tokens=6000))
    ms = []
    for q in questions:
        t0 = time.perf_counter()
        session.context(ContextRequest(query=q, limit=10, budget_tokens=6000))
        ms.append((time.perf_counter() - t0) * 1000)
    out["direct"] = summary(ms)
    session.shutdown()

    async with stdio(folder, index, "--no-daemon") as client:
        await wait_ready(client)
        await ask_all(client, QUESTIONS)
        out["stdio"] = summary(await ask_all(client, questions))

    daemon = subprocess.Popen([*CLI, "serve", str(folder), "--index-dir", str(index)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        url = re.search(r"(http://\S+)", daemon.stdout.readline()).group(1)  # type: ignore[union-attr]
        token = (index / "daemon.token").read_text().strip()
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            await wait_ready(client)
            await ask_all(client, QUESTIONS)
            out["http"] = summary(await ask_all(client, questions))
        async with stdio(folder, index) as client:
            await ask_all(client, QUESTIONS)
            out["stdio_forwarded"] = summary(await ask_all(client, questions))

        # Memory: N agent sessions through one daemon.
        async with _many(folder, index, agents, ()) as pids:
            shared = rss_mb(daemon.pid) + sum(rss_mb(p) for p in pids)
            out["rss_shared_mb"] = {"daemon": round(rss_mb(daemon.pid)), "forwarders": [round(rss_mb(p)) for p in pids],
                                    "total": round(shared)}
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    async with _many(folder, index, agents, ("--no-daemon",)) as pids:
        separate = sum(rss_mb(p) for p in pids)
        out["rss_separate_mb"] = {"each": [round(rss_mb(p)) for p in pids], "total": round(separate)}
    out["rss_ratio_separate_over_shared"] = round(out["rss_separate_mb"]["total"] / out["rss_shared_mb"]["total"], 2)
    for front in ("stdio", "http", "stdio_forwarded"):
        out[front]["p50_ratio_to_direct"] = round(out[front]["p50"] / out["direct"]["p50"], 2)
    return out


class _many:
    """N stdio MCP clients at once, each having answered a question; yields their server pids."""

    def __init__(self, folder: Path, index: Path, n: int, extra: tuple[str, ...]) -> None:
        self.args = (folder, index, n, extra)

    async def __aenter__(self) -> list[int]:
        from contextlib import AsyncExitStack

        folder, index, n, extra = self.args
        self.stack = AsyncExitStack()
        before = set(children(os.getpid()))
        for _ in range(n):
            client = await self.stack.enter_async_context(stdio(folder, index, *extra))
            await wait_ready(client)
            await client.call_tool("context", {"query": QUESTIONS[0]})
        return sorted(set(children(os.getpid())) - before)

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--json")
    a = ap.parse_args()
    res = anyio.run(run, Path(a.folder).resolve(), a.rounds, a.agents)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
