"""The language server: LSP types in, engine calls, LSP types out.

Handlers stay thin; the workspace bookkeeping (one engine per folder, debounced
background indexing, open buffers, diagnostics) lives in :mod:`delphi_ls.workspaces`.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from . import __version__
from .engine import RequestError
from .workspaces import Workspaces, uri_to_path

log = logging.getLogger("delphi_ls")

CONTEXT = "delphi/context"
HEALTH = "delphi/health"
CMD_REINDEX = "delphi.reindex"
CMD_SHOW_CONTEXT = "delphi.showContext"


class DelphiServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("delphi-ls", __version__)
        self.workspaces = Workspaces(self)
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


@server.feature(lsp.INITIALIZE)
def initialize(ls: DelphiServer, params: lsp.InitializeParams) -> None:
    ls.workspaces.configure(params)


@server.feature(lsp.INITIALIZED)
def initialized(ls: DelphiServer, params: lsp.InitializedParams) -> None:
    ls.workspaces.start()


@server.feature(CONTEXT)
@server.thread()
def context(ls: DelphiServer, params: Any) -> dict[str, Any]:
    p = _params(params)
    unknown = set(p) - {"query", "anchors", "draft", "limit", "budgetTokens", "kinds", "workspace"}
    if unknown:
        raise JsonRpcInvalidParams(f"unknown field(s): {', '.join(sorted(unknown))}")
    try:
        return ls.workspaces.context(p)
    except RequestError as e:
        raise JsonRpcInvalidParams(str(e)) from None


@server.feature(HEALTH)
@server.thread()
def health(ls: DelphiServer, params: Any) -> dict[str, Any]:
    return ls.workspaces.health()


@server.feature(lsp.WORKSPACE_SYMBOL)
@server.thread()
def workspace_symbol(ls: DelphiServer, params: lsp.WorkspaceSymbolParams) -> list[lsp.SymbolInformation]:
    return [_symbol_information(s) for s in ls.workspaces.symbols(params.query)]


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbol(ls: DelphiServer, params: lsp.DocumentSymbolParams) -> list[lsp.SymbolInformation]:
    return [_symbol_information(s) for s in ls.workspaces.document_symbols(params.text_document.uri)]


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
@server.thread()
def code_lens(ls: DelphiServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    lenses = []
    code = ls.workspaces.related_code_of(params.text_document.uri)
    if code:  # a test file: one lens at the top, the source it exercises
        title = f"tests {len(code)} source file{'s' if len(code) != 1 else ''}"
        lenses.append(lsp.CodeLens(
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
            command=lsp.Command(title=title, command="delphi.openTests",
                                arguments=[[c["uri"] for c in code], "Source this test exercises"]),
        ))
    for sym, tests in ls.workspaces.related_tests_by_symbol(params.text_document.uri):
        line = sym["line"] - 1
        title = f"{len(tests)} related test{'s' if len(tests) != 1 else ''}"
        lenses.append(lsp.CodeLens(
            range=lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
            command=lsp.Command(title=title, command="delphi.openTests", arguments=[[t["uri"] for t in tests]]),
        ))
    return lenses


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
@server.thread()
def hover(ls: DelphiServer, params: lsp.HoverParams) -> lsp.Hover | None:
    found = ls.workspaces.related_tests_at(params.text_document.uri, params.position.line + 1)
    if found is None:
        code = ls.workspaces.related_code_of(params.text_document.uri) if params.position.line == 0 else None
        if not code:
            return None
        lines = ["**Source this test exercises** (Delphi)", ""]
        lines += [f"- [{c['path']}]({c['uri']}): {c['why']}" for c in code]
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n".join(lines)))
    name, tests = found
    lines = [f"**Related tests for `{name}`** (Delphi)", ""]
    lines += [f"- [{t['path']}]({t['uri']}): {t['why']}" for t in tests] or ["- none found"]
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n".join(lines)))


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DelphiServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.workspaces.buffer_changed(params.text_document.uri, params.text_document.text)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DelphiServer, params: lsp.DidChangeTextDocumentParams) -> None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    ls.workspaces.buffer_changed(params.text_document.uri, doc.source)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: DelphiServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.workspaces.file_changed(params.text_document.uri, saved=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DelphiServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.workspaces.buffer_closed(params.text_document.uri)


@server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: DelphiServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    for change in params.changes:
        ls.workspaces.file_changed(change.uri)


@server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: DelphiServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    for f in params.event.removed:
        ls.workspaces.remove_folder(uri_to_path(f.uri))
    for f in params.event.added:
        ls.workspaces.add_folder(uri_to_path(f.uri))


@server.command(CMD_REINDEX)
def cmd_reindex(ls: DelphiServer, *args: Any) -> dict[str, Any]:
    ls.workspaces.reindex_all()
    return {"scheduled": True}


@server.command(CMD_SHOW_CONTEXT)
@server.thread()
def cmd_show_context(ls: DelphiServer, *args: Any) -> dict[str, Any]:
    if not args or not isinstance(args[0], (dict, str)):
        raise JsonRpcInvalidParams("arguments: pass {query, anchors?, ...} or a query string")
    p = args[0] if isinstance(args[0], dict) else {"query": args[0]}
    try:
        return ls.workspaces.context(dict(p))
    except RequestError as e:
        raise JsonRpcInvalidParams(str(e)) from None


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: DelphiServer, params: Any) -> None:
    ls.workspaces.shutdown()


def _symbol_information(s: dict[str, Any]) -> lsp.SymbolInformation:
    kind = {"class": lsp.SymbolKind.Class, "method": lsp.SymbolKind.Method, "function": lsp.SymbolKind.Function,
            "interface": lsp.SymbolKind.Interface, "struct": lsp.SymbolKind.Struct, "enum": lsp.SymbolKind.Enum,
            "trait": lsp.SymbolKind.Interface, "impl": lsp.SymbolKind.Class, "module": lsp.SymbolKind.Module,
            "constructor": lsp.SymbolKind.Constructor, "type": lsp.SymbolKind.TypeParameter,
            "macro": lsp.SymbolKind.Function}.get(s["kind"], lsp.SymbolKind.Variable)
    rng = lsp.Range(lsp.Position(max(s["line"] - 1, 0), 0), lsp.Position(max(s["endLine"] - 1, 0), 0))
    return lsp.SymbolInformation(name=s["name"], kind=kind, location=lsp.Location(s["uri"], rng),
                                 container_name=s.get("container") or None)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="delphi-ls %(levelname)s %(message)s")
    server.start_io()
    return 0


if __name__ == "__main__":
    sys.exit(main())
