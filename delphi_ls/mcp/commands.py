"""``delphi mcp [PATH]`` and ``delphi serve PATH``: the MCP fronts as processes.

``delphi mcp`` speaks MCP over stdio. When a daemon (``delphi serve``, or a language
server started with ``mcpHttp``) already serves the same workspace, it forwards every
call to it, so N agent sessions share one warm index instead of opening N; otherwise it
opens the index itself, indexes in the background and answers meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..settings import Settings, snake_case
from ..workspace.roots import project_root

if TYPE_CHECKING:
    from ..session import Session

# No editor reports edits to these processes: they look for changes themselves this often.
WATCH_INTERVAL_S = 2.0


def _session(overrides: dict[str, Any], root: Path, on_error: Callable[[str], None] | None = None) -> Session:
    """A session whose messages go to stderr (stdout is the protocol's; MCP clients log stderr); its error
    messages also go to ``on_error``. Imported here, not at the top: a `delphi mcp` that forwards to a
    daemon never loads the engine."""
    from ..session import Session, SessionEvents

    class StderrEvents(SessionEvents):
        def message(self, severity: str, text: str) -> None:
            # The session's messages are written for an editor ("Delphi: ..."): one prefix here, not two.
            print(f"delphi {severity}: {text.removeprefix('Delphi: ')}", file=sys.stderr, flush=True)
            if severity == "error" and on_error is not None:
                on_error(text)

    session = Session(StderrEvents(), overrides)
    try:
        session.start([root])
        session.watch(WATCH_INTERVAL_S)  # no editor reports edits to these processes
    except BaseException:
        session.shutdown()  # what it opened is closed (its locks too): this process goes on serving
        raise
    return session


class Opening:
    """`delphi mcp`'s session, opened beside the stdio loop once the loop is built. The client's `initialize`
    is answered when the MCP SDK is imported instead of after the engine's imports and the index's open as well
    (2.0 → 1.3 s on the shipyard fixture, bench/RESULTS.md "Session 24"): Codex gives a server 10 s to start by default, and under load
    that start took 6-12.8 s. Calls wait for the open; a folder that cannot be opened answers every call with
    the reason (it used to exit 2 before `initialize`, which clients show as "connection closed")."""

    def __init__(self, overrides: dict[str, Any], root: Path) -> None:
        self.root = root
        self._overrides = overrides
        self._done = threading.Event()
        self._session: Session | None = None
        self._errors: list[str] = []
        self._closed = False
        self._started = False
        self._lock = threading.Lock()

    @classmethod
    def refused(cls, root: Path, reason: str) -> Opening:
        """An open that failed before it began (no such folder, settings that do not load): calls get ``reason``."""
        opening = cls({}, root)
        opening._errors.append(reason)
        opening._done.set()
        return opening

    def start(self) -> None:
        with self._lock:
            if self._started:  # once: a second open would leave the first session's stores and threads behind
                return
            self._started = True
        threading.Thread(target=self._open, name="delphi-open", daemon=True).start()

    def _error(self, text: str) -> None:
        if not self._done.is_set():  # the open's own errors: later messages of the session are not the reason
            self._errors.append(text)

    def _open(self) -> None:
        try:
            session = _session(self._overrides, self.root, self._error)
            with self._lock:
                if self._closed or not session.engines:  # stopped meanwhile, or the folder refused: none kept
                    session.shutdown()
                else:
                    self._session = session
        except Exception as e:  # said on every call, never a silent exit
            self._errors.append(f"Delphi cannot open {self.root}: {type(e).__name__}: {e}")
        finally:
            self._done.set()  # calls and close() never wait on an open that ended

    def get(self) -> Session:
        """The open session (waits for the open); raises OpeningFailed with the reason if there is none."""
        self._done.wait()
        if self._session is None:
            raise OpeningFailed("; ".join(self._errors) or f"Delphi cannot open {self.root}")
        return self._session

    def close(self, wait_s: float = 60.0) -> None:
        """Shut the session down, waiting for an open in progress so no store is left half-open."""
        if not self._started and not self._done.is_set():
            return  # never started (a forwarding `delphi mcp` whose daemon stayed): nothing to wait for
        self._done.wait(wait_s)
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is not None:
            session.shutdown()


class OpeningFailed(Exception):
    """The workspace could not be opened; the message says why."""


INTERRUPT_CLOSE_S = 2.0  # how long Ctrl-C lets the index close before the process exits


def _exit_on_interrupt(close: Callable[[], None]) -> None:
    """Ctrl-C ends `delphi mcp` (exit 130). The SDK reads stdin in a worker thread, which a cancelled event loop
    waits on: Ctrl-C printed "interrupted" and the server went on, a third one too, idle or mid-index (a newcomer,
    session 27). The index is closed for at most INTERRUPT_CLOSE_S, then the process exits; an index run cut
    there is what a kill -9 leaves, which the next run resumes (the stores are crash-safe)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupted(_signum: int, _frame: object) -> None:
        print("delphi mcp: interrupted", file=sys.stderr, flush=True)
        closing = threading.Thread(target=close, name="delphi-close", daemon=True)
        closing.start()
        closing.join(INTERRUPT_CLOSE_S)
        os._exit(130)

    signal.signal(signal.SIGINT, interrupted)


def index_dir_of(root: Path, overrides: dict[str, Any]) -> Path:
    return Settings.load(root, overrides).index_path(root)


def run_mcp(path: str | None, overrides: dict[str, Any], connect: bool = True, refusal: str | None = None) -> int:
    """``refusal``: the command line was wrong (`delphi mcp FILE`, an unknown option): served all the same,
    every call saying so, as for a folder that cannot be opened."""
    from .daemon import build_id, daemon_build, find_daemon, untrusted_live
    from .server import build_server, local_call, serve_stdio

    reason = refusal
    try:
        root = Path(path).expanduser().resolve() if path is not None else project_root(Path.cwd())
    except FileNotFoundError:  # the current folder was removed: served all the same, every call saying so
        root = Path(path or ".")
        reason = reason or "the current folder no longer exists; name the workspace: `delphi mcp PATH`"
    # A wrong command line is said as it is, not as a folder (the current one) that cannot be opened (review).
    if reason is None:
        try:
            if not root.is_dir():
                raise FileNotFoundError(f"workspace folder not found: {path}")
            index_dir = index_dir_of(root, overrides)  # once: loading settings reports a repository's refusals
        except Exception as e:
            reason = f"Delphi cannot open {root}: {e}"
    if reason is not None:
        # Served all the same, every call saying why: an exit before `initialize` shows in a client only as
        # "connection closed" (a newcomer's `delphi mcp /nonexistent`, session 25).
        print(f"delphi mcp: {reason}", file=sys.stderr, flush=True)
        opening, to_open = Opening.refused(root, reason), False
    else:
        found = find_daemon(index_dir) if connect else None
        if found is not None and (theirs := daemon_build(index_dir)) != build_id():
            theirs = theirs or "an older one"
            print(f"delphi mcp: the daemon at {found[0]} runs another build of Delphi ({theirs}; this is {build_id()}), "
                  "started before an upgrade?; answering here instead (restart `delphi serve` to share one again)",
                  file=sys.stderr, flush=True)
            found = None
        elif found is None and connect and (why := untrusted_live(index_dir)) is not None:
            print(f"delphi mcp: {why}; answering here instead (stop that daemon, or remove the file)",
                  file=sys.stderr, flush=True)
        if found is not None:
            url, token = found
            print(f"delphi mcp: forwarding to the daemon at {url}", file=sys.stderr, flush=True)
            names = {f.name for f in fields(Settings)} - {"index_dir"}  # the index folder found the daemon
            own = sorted({*(k for k in overrides if snake_case(k) in names),
                          *(k for k in os.environ if k.startswith("DELPHI_") and k[7:].lower() in names)})
            note = None
            if own:  # they were dropped without a word (a newcomer, session 29)
                note = (f"the daemon answers with its own settings; this process's {', '.join(own)} "
                        "do not apply (run with --no-daemon to use them)")
                print(f"delphi mcp: {note}", file=sys.stderr, flush=True)
            fallback = Opening(overrides, root)
            _exit_on_interrupt(fallback.close)
            try:
                anyio.run(_proxy, url, token, root, index_dir, fallback, note)
            finally:
                fallback.close()
            return 0
        opening, to_open = Opening(overrides, root), True
    server = build_server(local_call(opening.get, agents_folder=True))
    if to_open:
        opening.start()
    _exit_on_interrupt(opening.close)
    try:
        anyio.run(serve_stdio, server)
    finally:
        opening.close()
    return 0


# Tools whose answer depends on the folder: a forwarded call names this process's folder, since one
# daemon (an editor's language server) may serve several and would otherwise answer for its first.
FOLDER_TOOLS = ("context", "related_tests", "related_code", "symbols", "reindex")
CALL_TIMEOUT_S = 120.0
RESTART_WAIT_S = 5.0  # how long a forwarding call waits for a daemon to come back before opening the index itself
STARTING_WAIT_S = 60.0  # ... and for one that holds daemon.lock (it is starting)
# The daemon's HTTP front refuses bodies over the MCP SDK's default of 4 MiB (413); a call is refused here
# first, with why, instead of as "not answering" (session 25). The JSON-RPC envelope takes the rest.
MAX_FORWARD_BYTES = 4 * 1024 * 1024 - 16 * 1024


def too_large(args: dict[str, Any]) -> str | None:
    """Why a call's arguments are too large to forward, or None."""
    size = len(json.dumps(args, ensure_ascii=False, separators=(",", ":")).encode())  # as sent: UTF-8
    if size <= MAX_FORWARD_BYTES:
        return None
    # Imported here (0.1 s): a forwarder loads no engine.
    from ..retrieval.query import QUESTION_HEAD_CHARS, QUESTION_TAIL_CHARS

    return (f"this call's arguments are {size:,} bytes; the Delphi daemon takes at most {MAX_FORWARD_BYTES:,} per "
            f"call. Send a shorter question: Delphi searches a long question's first {QUESTION_HEAD_CHARS:,} and "
            f"last {QUESTION_TAIL_CHARS:,} characters only")


def _cause(e: BaseException) -> BaseException:
    """The exception under the SDK's task groups: "ExceptionGroup: unhandled errors in a TaskGroup (1
    sub-exception)" was all a forwarded call said when the daemon had died (an agent newcomer, session 26)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


async def _proxy(url: str, token: str, root: Path, index_dir: Path, fallback: Opening | None = None,
                 note: str | None = None) -> None:
    """Serve stdio, forwarding each call to the daemon. A client per call (connecting to loopback costs
    milliseconds): when the daemon restarts (an editor's "restart language server": new port, new token),
    the next call finds it again through `daemon.json` instead of hanging on the old address. When it is gone
    for good (no live daemon.json), ``fallback`` opens the index in this process and answers from then on, as
    a `delphi mcp` started without a daemon would. ``note``: said under the first answer the daemon gives (this
    process's own settings that do not apply there: a client seldom shows a server's stderr; a newcomer, session 37)."""
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from .daemon import daemon_starting, find_daemon
    from .server import build_server, local_call, serve_stdio
    from .tools import agent_paths

    where = [url, token]
    local: list[Any] = []  # the fallback's call, once the daemon is gone
    notes = [f"note: {note}"] if note else []

    async def once(name: str, args: dict[str, Any]) -> Any:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {where[1]}"})
        async with http, Client(streamable_http_client(where[0], http_client=http), mode="2026-07-28") as upstream:
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await upstream.call_tool(name, args)
        if notes and not result.is_error:
            result.content.append(types.TextContent(type="text", text=notes.pop()))
        return result

    async def call(name: str, args: dict[str, Any]) -> Any:
        args = agent_paths(args, [root])  # here, in the agent's folder: the daemon's is another
        if name in FOLDER_TOOLS and "workspace" not in args:
            args = {**args, "workspace": str(root)}
        if local:
            return await local[0](name, args)
        if (big := too_large(args)) is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=big)], is_error=True)
        failure: BaseException
        try:
            return await once(name, args)
        except Exception as e:
            failure = _cause(e)
        found = find_daemon(index_dir)
        start = anyio.current_time()
        # An editor's "restart language server": a new daemon within seconds; while one holds daemon.lock it is
        # starting (it opens its session before it writes daemon.json), so it is waited for longer.
        while found is None and fallback is not None and not local and (
                anyio.current_time() - start < RESTART_WAIT_S
                or (daemon_starting(index_dir) and anyio.current_time() - start < STARTING_WAIT_S)):
            await anyio.sleep(0.2)
            found = find_daemon(index_dir)
        if found is not None:
            where[:] = list(found)
            try:
                return await once(name, args)
            except Exception as e:
                failure = _cause(e)
        elif fallback is not None:
            if not local:  # two calls in flight when the daemon died: one open, not two (review)
                print(f"delphi mcp: the daemon at {where[0]} is gone ({type(failure).__name__}: {failure}); "
                      "opening the index in this process", file=sys.stderr, flush=True)
                fallback.start()
                local.append(local_call(fallback.get))
            return await local[0](name, args)
        msg = (f"Delphi's daemon for {root} is not answering ({type(failure).__name__}: {failure}); "
               "restart this MCP server to open the index here, or start `delphi serve` again")
        return types.CallToolResult(content=[types.TextContent(type="text", text=msg)], is_error=True)

    await serve_stdio(build_server(call))


def run_serve(path: str, overrides: dict[str, Any], host: str = "127.0.0.1", port: int = 0) -> int:
    from .daemon import (
        LOOPBACK,
        DaemonRunning,
        build_id,
        daemon_build,
        find_daemon,
        start_in_thread,
        untrusted_live,
    )

    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"workspace folder not found: {path}")
    if host not in LOOPBACK:
        print(f"delphi serve: warning: listening on {host}, beyond this machine; every call still needs the "
              "token", file=sys.stderr, flush=True)
    index_dir = index_dir_of(root, overrides)
    running = find_daemon(index_dir)
    if running is not None:  # checked before opening anything: a second daemon would only compete
        theirs = daemon_build(index_dir)
        print(f"delphi serve: a daemon already serves {root} at {running[0]}; " + (
            f"it runs another build of Delphi ({theirs or 'an older one'}): stop it, then start this one"
            if theirs != build_id() else f"`delphi mcp {root}` forwards to it"), file=sys.stderr, flush=True)
        return 1
    if (why := untrusted_live(index_dir)) is not None:
        print(f"delphi serve: {why}; stop that daemon (or remove the file if it is not one), then start again",
              file=sys.stderr, flush=True)
        return 1
    session = _session(overrides, root)
    if not session.engines:
        return 2
    try:
        daemon = start_in_thread(session, host=host, port=port)
    except DaemonRunning as e:
        session.shutdown()
        print(f"delphi serve: {e}", file=sys.stderr, flush=True)
        return 1
    eng = next(iter(session.engines.values()))
    print(f"delphi serve: MCP (streamable HTTP) at {daemon.url}", flush=True)
    print(f"delphi serve: bearer token in {eng.index_dir / 'daemon.token'} (0600)", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        daemon.stop()
        session.shutdown()
    return 0
