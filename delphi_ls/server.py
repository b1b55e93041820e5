"""The language server: LSP types in, session calls, LSP types out.

Handlers stay a few lines; folders, buffers, the debounced indexer and problems live in
the transport-free :class:`delphi_ls.session.Session`, shared with the MCP fronts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcServerNotInitialized
from pygls.lsp.server import LanguageServer

from . import __version__
from .api import ContextRequest, IndexRepairing, RelatedRequest, RequestError, uri_to_path
from .core.processes import running
from .lsp_documents import OpenDocuments
from .lsp_protocol import REQUEST_FAILED, DelphiProtocol, serve_stdio, strict_converter
from .session import LENS_CODE, LENS_TESTS, Problem, Session, SessionEvents

log = logging.getLogger("delphi_ls")

CONTEXT = "delphi/context"
HEALTH = "delphi/health"
RELATED_TESTS = "delphi/relatedTests"
RELATED_CODE = "delphi/relatedCode"
STATUS = "delphi/status"
CMD_REINDEX = "delphi.reindex"
CMD_SHOW_CONTEXT = "delphi.showContext"
HEALTH_DOCUMENT = "delphi.toml"  # where workspace-level problems are published (README)
# The server's own poll where the client registers no file watchers and the operating system gives no file events:
# a full incremental pass each time, so slower than `delphi mcp`'s 2 s (the editor reports the files it edits).
WATCH_INTERVAL_S = 5.0
# Front options, not engine settings: they are taken out of initializationOptions before the
# settings are validated (mcpHttp: serve MCP over HTTP on loopback from this process).
FRONT_OPTIONS = {"mcpHttp": bool, "mcpPort": int, "mcpHost": str}  # this front's own options, with their types


class LspEvents(SessionEvents):
    """The session's progress and problems, as LSP notifications."""

    def __init__(self, ls: DelphiServer) -> None:
        self.ls = ls
        self.progress_supported = False
        self.lens_refresh = False  # the client re-asks for code lenses when told (workspace/codeLens/refresh)
        # Per folder: the URIs its last report gave diagnostics, cleared when a later report of that folder
        # leaves them out. By folder, not by URI prefix: a folder inside another cleared the inner one's (review).
        self.published: dict[str, set[str]] = {}

    def message(self, severity: str, text: str) -> None:
        kind = {"error": lsp.MessageType.Error, "warning": lsp.MessageType.Warning}.get(severity, lsp.MessageType.Info)
        self.ls.window_show_message(lsp.ShowMessageParams(type=kind, message=text))

    def progress_begin(self, root: Path, title: str) -> Any:
        if not self.progress_supported:
            return None
        token = str(uuid.uuid4())
        try:
            # Asked without pygls' `create` callback: that callback reads the answer, and pygls cancels every
            # pending request at `shutdown`, so an editor closed before it answered logged "exception calling
            # callback ... CancelledError" with a traceback (as did a client answering with an error).
            self.ls.protocol.send_request(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE,
                                          lsp.WorkDoneProgressCreateParams(token=token)).result(timeout=10)
            self.ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, percentage=0,
                                                                              cancellable=False))
        except Exception:  # a client that does not answer create gets no progress, not a failure
            return None
        return token

    def progress_report(self, token: Any, message: str, percentage: int) -> None:
        self.ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=message, percentage=percentage))

    def progress_end(self, token: Any, message: str) -> None:
        self.ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=message))

    def problems(self, root: Path, problems: list[Problem]) -> None:
        top = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        sev = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning,
               "info": lsp.DiagnosticSeverity.Information}
        by_uri: dict[str, list[lsp.Diagnostic]] = {(root / HEALTH_DOCUMENT).as_uri(): []}
        for p in problems:
            uri = (p.path or root / HEALTH_DOCUMENT).as_uri()
            by_uri.setdefault(uri, []).append(lsp.Diagnostic(range=top, severity=sev[p.severity], source="delphi",
                                                             code=p.code or None, message=p.message))
        stale = self.published.get(root.as_uri(), set()) - set(by_uri)
        for uri in stale:
            self.ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        for uri, diags in by_uri.items():
            self.ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags))
        self.published[root.as_uri()] = {u for u, d in by_uri.items() if d}

    def indexed(self, root: Path) -> None:
        if self.lens_refresh:
            # The "N related tests" lenses a client asked for while the first index ran were empty and stayed so
            # until the file was entered again (a newcomer, session 27): after each run it is told to ask again.
            self.ls.workspace_code_lens_refresh(None)


class DelphiServer(LanguageServer):
    def __init__(self) -> None:
        # DelphiProtocol: every request answered, malformed frames dropped and resynchronised (lsp_protocol)
        # strict_converter: a number where the protocol has a string is refused, not searched as text.
        super().__init__("delphi-ls", __version__, protocol_cls=DelphiProtocol, converter_factory=strict_converter)
        self.events = LspEvents(self)
        self.session = Session(self.events)
        self.front_options: dict[str, Any] = {}
        self.http_daemon: Any = None
        self.folders: list[Path] = []
        self.documents = OpenDocuments()  # their text by LSP's line rules, not pygls' (lsp_documents.py)
        self.dynamic_watchers = False
        # Indexing progress and diagnostics are sent from the indexer thread while handlers
        # answer on others: one message must reach stdout whole before the next starts.
        send, lock = self.protocol._send_data, threading.Lock()

        def locked_send(data: Any) -> None:
            with lock:
                send(data)

        self.protocol._send_data = locked_send  # type: ignore[method-assign]


server = DelphiServer()


def _params(params: Any) -> dict[str, Any]:
    """Custom requests arrive as plain JSON objects (or attribute bags); accept both."""
    if params is None:
        raise JsonRpcInvalidParams("params: an object is required")
    if isinstance(params, dict):
        return params
    if hasattr(params, "_asdict"):
        return params._asdict()
    if hasattr(params, "__dict__"):
        return dict(vars(params))
    raise JsonRpcInvalidParams("params: an object is required")


def _answer(fn: Any, *args: Any) -> Any:
    """Run a session call; a request the caller got wrong is InvalidParams naming the field. Before `initialized`
    the folders are not open: ServerNotInitialized (-32002) says so, where "no workspace folder is open" (-32602)
    blamed the request (an editor newcomer, session 25)."""
    if not server.session.started:
        raise JsonRpcServerNotInitialized("Delphi opens the workspace folders when the client sends `initialized`")
    try:
        return fn(*args)
    except RequestError as e:
        raise JsonRpcInvalidParams(str(e)) from None
    except IndexRepairing as e:
        raise RequestFailed(str(e)) from None


def _said(fn: Any) -> Any:
    """A status or health read: a damaged index found there is said in words (as _answer says it)."""
    try:
        return fn()
    except IndexRepairing as e:
        raise RequestFailed(str(e)) from None


class RequestFailed(JsonRpcException):
    """LSP 3.17's RequestFailed: the request was right and the server could not answer it now (a damaged index being
    rebuilt), said in words rather than as -32603 with a traceback."""

    CODE = REQUEST_FAILED
    MESSAGE = "RequestFailed"


@server.feature(lsp.INITIALIZE)
def initialize(ls: DelphiServer, params: lsp.InitializeParams) -> None:
    opts = params.initialization_options
    if isinstance(opts, dict):
        ls.front_options = {k: opts[k] for k in FRONT_OPTIONS if k in opts}
        opts = {k: v for k, v in opts.items() if k not in FRONT_OPTIONS}
    ls.session.configure(opts)
    for key, kind in FRONT_OPTIONS.items():
        value = ls.front_options.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            # `mcpHttp: "yes"` was taken as true, unsaid; a bad value is now said, like any setting's (session 25).
            what = {bool: "true or false", int: "a whole number", str: "a string"}[kind]
            ls.session.option_errors.append(f"Delphi: '{key}' must be {what}, not {value!r}; ignored")
            del ls.front_options[key]
    caps = params.capabilities
    ls.events.progress_supported = bool(caps.window and caps.window.work_done_progress)
    ws = caps.workspace
    ls.events.lens_refresh = bool(ws and ws.code_lens and ws.code_lens.refresh_support)
    ls.dynamic_watchers = bool(ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration)
    folders = [uri_to_path(f.uri) for f in (params.workspace_folders or [])]
    if not folders and params.root_uri:
        folders = [uri_to_path(params.root_uri)]
    elif not folders and params.root_path:
        folders = [Path(params.root_path)]
    ls.folders = folders
    if isinstance(params.process_id, int) and params.process_id > 0 and params.process_id != os.getpid():
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside serve_stdio's loop (no exit to make)
            return
        _watch_client(ls, params.process_id, loop)


# How often the editor's process is looked for (LSP: a server exits when the `processId` it was given is gone).
CLIENT_POLL_S = 2.0


def _watch_client(ls: DelphiServer, pid: int, loop: asyncio.AbstractEventLoop) -> None:
    """Leave (status 1, as `exit` without `shutdown`) once the editor's process is gone, pipes open or not: a server
    whose editor was killed kept running (a newcomer, session 42). Not watched when no such process is here at
    the start: an editor in another process namespace (a container, a remote host through `docker exec` or `ssh`)
    names its own pid, and the server would leave at once."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        log.info("the editor's process %d is not visible from here: not watched", pid)
        return
    except OSError:
        pass

    def watch() -> None:
        while True:
            time.sleep(CLIENT_POLL_S)
            if running(pid) is False:  # gone, or ended and not reaped (another user's: it exists)
                break
        log.warning("the editor's process %d is gone: leaving", pid)
        on_exit = getattr(ls.protocol, "on_exit", None)
        if on_exit is not None:
            loop.call_soon_threadsafe(on_exit, 1)

    threading.Thread(target=watch, name="delphi-client-watch", daemon=True).start()


@server.feature(lsp.INITIALIZED)
def initialized(ls: DelphiServer, params: lsp.InitializedParams) -> None:
    if ls.dynamic_watchers:
        reg = lsp.Registration(id="delphi-watch", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                               register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                                   watchers=[lsp.FileSystemWatcher(glob_pattern="**/*")]))
        ls.client_register_capability(lsp.RegistrationParams(registrations=[reg]))
    ls.session.start(ls.folders)
    if not ls.dynamic_watchers:
        # An editor that registers no file watchers (Neovim on Linux, Vim clients, Helix) sends no event for a file
        # made, deleted or pulled outside it: a test file written from a terminal never reached the lenses (a
        # newcomer, session 38). The server watches the folders itself, as `delphi serve` does.
        ls.session.watch(WATCH_INTERVAL_S, catch_up=False)
    if ls.front_options.get("mcpHttp"):
        from .mcp.daemon import LOOPBACK, start_in_thread

        host = ls.front_options.get("mcpHost", "127.0.0.1")
        try:
            ls.http_daemon = start_in_thread(ls.session, host=host, port=int(ls.front_options.get("mcpPort", 0)))
        except Exception as e:  # the editor features keep working; the user is told why agents cannot connect
            ls.events.message("error", f"Delphi: the MCP HTTP daemon did not start: {e}")
        else:
            if host not in LOOPBACK:  # as `delphi serve --host` says it (this front said nothing: an audit)
                ls.events.message("warning", f"Delphi: the MCP HTTP daemon listens on {host}, beyond this machine; "
                                             "every call still needs the token")


@server.feature(CONTEXT)
@server.thread()
def context(ls: DelphiServer, params: Any) -> dict[str, Any]:
    return _answer(lambda: ls.session.context(ContextRequest.from_wire(_params(params))))


@server.feature(RELATED_TESTS)
@server.thread()
def related_tests(ls: DelphiServer, params: Any) -> dict[str, Any]:
    return {"results": _answer(lambda: ls.session.related_tests(RelatedRequest.from_wire(_params(params))))}


@server.feature(RELATED_CODE)
@server.thread()
def related_code(ls: DelphiServer, params: Any) -> dict[str, Any]:
    return {"results": _answer(lambda: ls.session.related_code(RelatedRequest.from_wire(_params(params))))}


@server.feature(HEALTH)
@server.thread()
def health(ls: DelphiServer, params: Any) -> dict[str, Any]:
    return _said(ls.session.health)


@server.feature(STATUS)
@server.thread()
def status(ls: DelphiServer, params: Any) -> dict[str, Any]:
    return _said(ls.session.status)


@server.feature(lsp.WORKSPACE_SYMBOL)
@server.thread()
def workspace_symbol(ls: DelphiServer, params: lsp.WorkspaceSymbolParams) -> list[lsp.SymbolInformation]:
    from .api import SymbolsRequest

    found = _answer(lambda: ls.session.symbols(SymbolsRequest(query=params.query, limit=500), wait=False))
    return [_symbol_information(s) for s in found]


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@server.thread()
def document_symbol(ls: DelphiServer, params: lsp.DocumentSymbolParams) -> list[lsp.SymbolInformation]:
    return [_symbol_information(s) for s in ls.session.document_symbols(params.text_document.uri)]


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
@server.thread()
def code_lens(ls: DelphiServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    lenses = []
    code = ls.session.related_code_of(params.text_document.uri)
    if code:  # a test file: one lens at the top, the source it exercises
        lenses.append(_lens(0, f"tests {_count(code, LENS_CODE)} source file{'s' if len(code) != 1 else ''}",
                            _open_arguments(code[:LENS_CODE], "Source this test exercises")))
    for sym, tests in ls.session.related_tests_by_symbol(params.text_document.uri):
        lenses.append(_lens(sym["line"] - 1, f"{_count(tests, LENS_TESTS)} related test{'s' if len(tests) != 1 else ''}",
                            _open_arguments(tests[:LENS_TESTS], f"Related tests for {sym['name']}")))
    return lenses


def _count(rows: list[Any], cap: int) -> str:
    """A lens's count: "20+" when there were more than its cap, asked for one more ("20 related tests" read as
    a count where the list had stopped at 20; session 38)."""
    return f"{cap}+" if len(rows) > cap else str(len(rows))


def _open_arguments(rows: list[dict[str, Any]], title: str) -> list[Any]:
    """``delphi.openTests``'s arguments: the URIs (what clients read first, as before), a title, and per URI its
    line, path and why. A Rust file's inline tests are the file itself: a lens of URIs alone opened the file where
    it was, never at the test (891 of 903 lenses of ripgrep's defs.rs; a newcomer, session 38), and VS Code's pick
    listed bare `file://` URIs."""
    return [[r["uri"] for r in rows], title,
            [{"line": int(r.get("line") or 1), "path": r["path"], "why": r["why"]} for r in rows]]


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
@server.thread()
def hover(ls: DelphiServer, params: lsp.HoverParams) -> lsp.Hover | None:
    found = ls.session.related_tests_at(params.text_document.uri, params.position.line + 1)
    if found is not None and found[1]:
        name, rows = found
        return _hover(f"**Related tests for `{name}`** (Delphi)", rows)
    # No tests found: no popup ("none found" showed on every untested function, over the other language servers'
    # hovers in the same float; an editor newcomer, session 25), unless a test file's first line says what it tests.
    code = ls.session.related_code_of(params.text_document.uri) if params.position.line == 0 else None
    return _hover("**Source this test exercises** (Delphi)", code[:LENS_CODE]) if code else None


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DelphiServer, params: lsp.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    ls.session.buffer_changed(doc.uri, ls.documents.opened(doc.uri, doc.text))


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DelphiServer, params: lsp.DidChangeTextDocumentParams) -> None:
    uri, encoding = params.text_document.uri, ls.workspace.position_encoding
    text = ls.documents.changed(uri, params.content_changes, getattr(encoding, "value", encoding) or "utf-16")
    if text is not None:
        ls.session.buffer_changed(uri, text)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: DelphiServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.session.file_changed(params.text_document.uri, saved=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DelphiServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.documents.closed(params.text_document.uri)
    ls.session.buffer_closed(params.text_document.uri)


@server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: DelphiServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    for change in params.changes:
        ls.session.file_changed(change.uri)


@server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: DelphiServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    for f in params.event.removed:
        eng = ls.session.remove_folder(f.uri)
        if eng is not None and ls.http_daemon is not None:
            ls.http_daemon.drop_folder(eng.index_dir)
    for f in params.event.added:
        eng = ls.session.add_folder(f.uri)
        if eng is not None and ls.http_daemon is not None:
            ls.http_daemon.serve_folder(eng.index_dir, eng.root)


@server.command(CMD_REINDEX)
def cmd_reindex(ls: DelphiServer, *args: Any) -> dict[str, Any]:
    return {"scheduled": True, "folders": ls.session.reindex()}


@server.command(CMD_SHOW_CONTEXT)
@server.thread()
def cmd_show_context(ls: DelphiServer, *args: Any) -> dict[str, Any]:
    if not args or not isinstance(args[0], (dict, str)):
        raise JsonRpcInvalidParams("arguments: pass {query, anchors?, ...} or a query string")
    p = args[0] if isinstance(args[0], dict) else {"query": args[0]}
    return _answer(lambda: ls.session.context(ContextRequest.from_wire(dict(p))))


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: DelphiServer, params: Any) -> None:
    if ls.http_daemon is not None:
        ls.http_daemon.stop()
    ls.session.shutdown()


def _lens(line: int, title: str, arguments: list[Any]) -> lsp.CodeLens:
    pos = lsp.Position(max(line, 0), 0)
    return lsp.CodeLens(range=lsp.Range(pos, pos), command=lsp.Command(title=title, command="delphi.openTests",
                                                                       arguments=arguments))


def _hover(title: str, rows: list[dict[str, Any]]) -> lsp.Hover:
    lines = [title, ""] + [f"- [{r['path']}]({r['uri']}): {r['why']}" for r in rows]
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n".join(lines)))


def _symbol_information(s: dict[str, Any]) -> lsp.SymbolInformation:
    kind = {"class": lsp.SymbolKind.Class, "method": lsp.SymbolKind.Method, "function": lsp.SymbolKind.Function,
            "interface": lsp.SymbolKind.Interface, "struct": lsp.SymbolKind.Struct, "enum": lsp.SymbolKind.Enum,
            "trait": lsp.SymbolKind.Interface, "impl": lsp.SymbolKind.Class, "module": lsp.SymbolKind.Module,
            "constructor": lsp.SymbolKind.Constructor, "type": lsp.SymbolKind.TypeParameter,
            "macro": lsp.SymbolKind.Function, "namespace": lsp.SymbolKind.Namespace,
            "property": lsp.SymbolKind.Property, "object": lsp.SymbolKind.Object,
            "constant": lsp.SymbolKind.Constant}.get(s["kind"], lsp.SymbolKind.Variable)
    # Whole lines: the end is the start of the line after the last (it was the last line's start, which left the
    # definition's last line out and made a one-line definition an empty range).
    rng = lsp.Range(lsp.Position(max(s["line"] - 1, 0), 0), lsp.Position(max(s["endLine"], s["line"], 1), 0))
    return lsp.SymbolInformation(name=s["name"], kind=kind, location=lsp.Location(s["uri"], rng),
                                 container_name=s.get("container") or None)


def _arguments(argv: list[str] | None) -> list[str]:
    """The command line: ``--help`` and ``--version`` answer and leave; ``--stdio`` (which vscode-languageclient
    adds for its stdio transport) and ``--clientProcessId`` are accepted. ``delphi-ls --help`` used to start the
    server, which then waited on the terminal for LSP frames without a word (session 37's noticed items)."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="delphi-ls", description="Delphi's language server: it speaks LSP over stdin and stdout, for an editor "
        "to start (README: VS Code, Neovim). For the command line, run `delphi`; for coding agents, `delphi mcp`.")
    ap.add_argument("--version", action="version", version=f"delphi-ls {__version__}")
    ap.add_argument("--stdio", action="store_true", help="talk over stdin and stdout (the default and only transport)")
    ap.add_argument("--clientProcessId", help=argparse.SUPPRESS)
    _, unknown = ap.parse_known_args(argv)
    return unknown


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="delphi-ls %(levelname)s %(message)s")
    unknown = _arguments(sys.argv[1:] if argv is None else argv)
    if unknown:
        # Not an error: an editor's client may add arguments of its own; said, so a typo is seen.
        log.warning("arguments not understood, ignored: %s", " ".join(unknown))
    if sys.stdin.isatty():
        print("delphi-ls: waiting for an editor's LSP messages on stdin (Ctrl-D to leave). "
              "Start it from your editor (README), or run `delphi --help` for the command line.", file=sys.stderr)
    return serve_stdio(server)  # 0 after shutdown+exit, 1 for exit without shutdown (LSP spec)


if __name__ == "__main__":
    sys.exit(main())
