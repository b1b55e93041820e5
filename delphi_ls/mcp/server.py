"""The MCP server: the tools of :mod:`.tools` over the SDK's low-level ``Server``.

Pinned to the ``mcp`` SDK 2.3.0, which serves both protocol revisions it knows: the
2025-11-25 initialize handshake and the stateless 2026-07-28 one (the client's first
request decides). Two backends: a local :class:`~delphi_ls.session.Session` (tools run in a
worker thread, so one slow query does not block the others), or a running Delphi daemon
that ``delphi mcp`` forwards to, so every agent shares one warm index.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from .. import __version__
from .tools import TOOLS, ToolOutput, run_tool

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


def local_call(session: Session | Callable[[], Session]) -> Call:
    """Calls answered by ``session`` in this process; a callable gives it when ready (``delphi mcp`` opens it
    beside the stdio loop) or raises with why there is none."""
    get = session if callable(session) else (lambda: session)

    def answer(name: str, args: dict[str, Any]) -> ToolOutput:
        try:
            sess = get()
        except Exception as e:  # the folder could not be opened: every call says why
            return ToolOutput(str(e), {"error": {"field": None, "message": str(e)}}, True)
        return run_tool(sess, name, args)

    async def call(name: str, args: dict[str, Any]) -> types.CallToolResult:
        try:
            out = await anyio.to_thread.run_sync(answer, name, args)
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


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
