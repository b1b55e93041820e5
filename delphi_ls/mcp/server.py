"""The MCP server: the tools of :mod:`.tools` over the SDK's low-level ``Server``.

Pinned to the ``mcp`` SDK 2.3.0, which serves both protocol revisions it knows: the
2025-11-25 initialize handshake and the stateless 2026-07-28 one (the client's first
request decides). Two backends: a local :class:`~delphi_ls.session.Session` (tools run in a
worker thread, so one slow query does not block the others), or a running Delphi daemon
that ``delphi mcp`` forwards to, so every agent shares one warm index.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from .. import __version__
from ..api import IndexRepairing, jsonrpc_id
from .tools import TOOLS, ToolOutput, agent_paths, run_tool

if TYPE_CHECKING:
    from ..session import Session

log = logging.getLogger("delphi_ls.mcp")
INSTRUCTIONS = (
    "Delphi is a local context engine for this codebase. Call `context` with a question, a stack trace or a file "
    "name to get the files (and lines) that answer it, ranked, each with why. `related_tests`/`related_code` link "
    "source and tests. Use grep for exact strings you already know."
)

Call = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


def tool_list() -> list[types.Tool]:
    return [types.Tool(name=t.name, title=t.title, description=t.description, input_schema=t.schema,
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only, open_world_hint=False))
            for t in TOOLS]


def to_result(out: ToolOutput) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=out.text)],
                                structured_content=out.structured, is_error=out.is_error)


def local_call(session: Session | Callable[[], Session], agents_folder: bool = False) -> Call:
    """Calls answered by ``session`` in this process; a callable gives it when ready (``delphi mcp`` opens it
    beside the stdio loop) or raises with why there is none. ``agents_folder``: this process runs in the agent's
    folder (`delphi mcp`, not a daemon), so a path relative to it is read there too (tools.agent_paths)."""
    get = session if callable(session) else (lambda: session)

    def answer(name: str, args: dict[str, Any]) -> ToolOutput:
        try:
            sess = get()
        except Exception as e:  # the folder could not be opened: every call says why
            return ToolOutput(str(e), {"error": {"field": None, "message": str(e)}}, True)
        if agents_folder and isinstance(args, dict):
            args = agent_paths(args, list(sess.engines))
        return run_tool(sess, name, args)

    async def call(name: str, args: dict[str, Any]) -> types.CallToolResult:
        try:
            out = await anyio.to_thread.run_sync(answer, name, args)
        except IndexRepairing as e:  # a damaged index found and being rebuilt: what to do, in words
            log.warning("tool %s: %s", name, e)
            out = ToolOutput(str(e), {"error": {"field": None, "message": str(e)}}, True)
        except Exception as e:  # a failure inside the engine answers as an error; the server keeps serving
            log.exception("tool %s failed", name)
            out = ToolOutput(f"Delphi failed on this call: {type(e).__name__}: {e}", {"error": {"field": None}}, True)
        return to_result(out)

    return call


def build_server(call: Call, name: str = "delphi") -> Server[Any]:
    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await call(params.name, dict(params.arguments or {}))

    return Server(name, version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)


# A JSON string escape of a lone UTF-16 surrogate, with the backslashes before it (an even number: not escaped).
_LONE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
                   r"|(?<!\\)((?:\\\\)*)\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _pair_or_replacement(m: re.Match[str]) -> str:
    if m.group(3):  # a high surrogate followed by its low one: a character outside the BMP, kept
        return m.group(0)
    return (m.group(1) or m.group(4) or "") + "\\ufffd"


def without_lone_surrogates(line: str) -> str:
    """A JavaScript client that cuts a string inside an emoji sends a lone surrogate (``"\\ud83d"``, valid JSON
    that the SDK's parser refuses): the call was dropped with no reply and the agent waited for its timeout (a
    newcomer, session 28). Each lone one becomes U+FFFD, as undecodable file text does."""
    return _LONE.sub(_pair_or_replacement, line) if "\\u" in line else line


# A `params` member whose value is not an object or null (a fast test; a match is parsed to be sure).
_ODD_PARAMS = re.compile(r'"params"\s*:\s*[^\s{n]')


def with_params_checked(line: str) -> str:
    """A request whose ``params`` is not an object (``"params": "str"``, a list) was dropped by the SDK's parser
    with no reply, and the client waited for ever (a hostile newcomer, session 28). It becomes a `tools/call`
    with empty params under the same id, which the SDK answers with JSON-RPC's -32602 "Invalid request
    parameters": the error the original deserved, under its id."""
    if not _ODD_PARAMS.search(line):
        return line
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return line  # the SDK's parser refuses it too, and _Lines answers it
    if not isinstance(msg, dict) or not isinstance(msg.get("method"), str) or msg.get("params") is None:
        return line
    rid = msg.get("id")
    if isinstance(msg["params"], dict) or not isinstance(rid, int | str) or isinstance(rid, bool):
        return line  # a notification gets no reply either way
    log.warning("request %r (%s): params must be an object, got %s; answered as invalid params", rid,
                msg["method"][:80], type(msg["params"]).__name__)
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {}}) + "\n"


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid if jsonrpc_id(rid) else None, "error": {"code": code, "message": message}}


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's parser takes NaN and Infinity


def invalid_replies(line: str) -> list[dict[str, Any]]:
    """JSON-RPC's answers to a line the SDK's parser refuses (it drops such a line with no reply, and a client
    waited for ever for a batch's or a `"jsonrpc": "1.0"` request's id: a newcomer, session 36): -32700 for a
    line that is not JSON, -32600 under each id that can be read otherwise; none for a response from the client
    (a reply to a reply is not JSON-RPC) or a notification."""
    try:
        msg = json.loads(line, parse_constant=_not_json)
    except (ValueError, RecursionError):  # nested past Python's recursion limit: 2 KB of brackets (a review)
        return [_error(None, -32700, "Parse error: the line is not JSON (one JSON-RPC message per line)")]
    if isinstance(msg, list):
        batch = "Invalid Request: MCP has no batches (since 2025-06-18); send each request on its own line"
        ids = [m["id"] for m in msg if isinstance(m, dict) and "method" in m and jsonrpc_id(m.get("id"))]
        return [_error(i, -32600, batch) for i in ids] or [_error(None, -32600, batch)]
    if not isinstance(msg, dict):
        return [_error(None, -32600, "Invalid Request: a JSON-RPC message is an object")]
    if "method" not in msg and ("result" in msg or "error" in msg):
        return []
    if isinstance(msg.get("method"), str) and "id" not in msg and msg.get("jsonrpc") == "2.0":
        return []  # a notification is never answered, even a malformed one
    if msg.get("jsonrpc") != "2.0":
        why = '"jsonrpc" must be "2.0"'
    elif not isinstance(msg.get("method"), str):
        why = '"method" must be a string'
    elif "id" in msg and not jsonrpc_id(msg["id"]):
        why = '"id" must be a string or an integer'
    else:
        why = "not a request or notification this server reads"
    return [_error(msg.get("id"), -32600, f"Invalid Request: {why}")]


class _Wire:
    """The client's stdout, shared by the SDK's writer and the replies to lines it would drop: each write under
    one lock, so a reply never lands inside another message."""

    def __init__(self, text: io.TextIOWrapper) -> None:
        self._text = text
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        with self._lock:
            return self._text.write(s)

    def flush(self) -> None:
        with self._lock:
            self._text.flush()

    def reply(self, msg: dict[str, Any]) -> None:
        with self._lock:
            self._text.write(json.dumps(msg) + "\n")
            self._text.flush()


class _Lines:
    """stdin's lines, each with its lone surrogate escapes replaced and a request whose params are not an
    object made one the SDK answers (what ``stdio_server`` reads); a line the SDK's parser would refuse is
    answered here (invalid_replies) and not passed on."""

    def __init__(self, text: io.TextIOBase, wire: _Wire) -> None:
        self._text = text
        self._wire = wire

    def readline(self) -> str:
        while True:
            line = with_params_checked(without_lone_surrogates(self._text.readline()))
            if not line.strip():
                return line  # the end of input, or a blank line (the SDK skips it)
            try:
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except (ValueError, RecursionError):
                replies = invalid_replies(line)
                log.warning("refused a line the protocol cannot read (%d bytes): %s", len(line),
                            replies[0]["error"]["message"] if replies else "a malformed response")
                for reply in replies:
                    self._wire.reply(reply)
                continue
            return line


def _claimed_stdio() -> tuple[Any, Any]:
    """The client's stdin and stdout for us alone: fd 0 then reads the null device and fd 1 writes to stderr, so
    a child process or a stray read or print cannot take or break the protocol's bytes (what the SDK's own claim
    does, which explicit streams skip)."""
    import fcntl

    # Above the standard descriptors (a duplicate landing on 0-2 would be taken back below), closed in children.
    fd_in, fd_out = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3), fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        os.dup2(2, 1)
    except OSError:  # stderr closed (`2>&-`): stray output goes nowhere rather than onto the protocol
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    wire = _Wire(io.TextIOWrapper(os.fdopen(fd_out, "wb"), encoding="utf-8"))
    text = io.TextIOWrapper(os.fdopen(fd_in, "rb"), encoding="utf-8", errors="replace")
    return anyio.wrap_file(_Lines(text, wire)), anyio.wrap_file(wire)  # type: ignore[arg-type]


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    stdin, stdout = _claimed_stdio()
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())
