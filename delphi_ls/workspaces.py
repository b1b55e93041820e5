"""The server's bookkeeping: one engine per workspace folder, debounced background
indexing with work-done progress, unsaved buffers, and health as diagnostics.

This is the only module besides server.py that speaks LSP types; the engine does not.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from .engine import Engine, RequestError
from .settings import Settings, SettingsError

if TYPE_CHECKING:
    from .server import DelphiServer

log = logging.getLogger("delphi_ls")
DEBOUNCE_S = 0.3
HEALTH_DOCUMENT = "delphi.toml"  # where workspace-level problems are published (README)
MAX_FILE_DIAGNOSTICS = 500


def uri_to_path(uri: str) -> Path:
    if uri.startswith("file:"):
        return Path(unquote(urlparse(uri).path))
    return Path(uri)


class Workspaces:
    def __init__(self, ls: DelphiServer) -> None:
        self.ls = ls
        self.options: dict[str, Any] = {}
        self.option_errors: list[str] = []
        self.folders: list[Path] = []
        self.engines: dict[Path, Engine] = {}
        self.buffers: dict[str, str] = {}  # uri -> unsaved text
        self.pending: dict[Path, set[str] | None] = {}  # root -> paths to redo (None: everything)
        self.published: set[str] = set()
        self.progress_supported = False
        self.dynamic_watchers = False
        self._cv = threading.Condition()
        self._last_change = 0.0
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._engines_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def configure(self, params: lsp.InitializeParams) -> None:
        opts = params.initialization_options or {}
        if not isinstance(opts, dict):
            self.option_errors.append("initializationOptions must be an object; using defaults")
            opts = {}
        for key, value in opts.items():
            try:
                Settings.from_dict({key: value})
                self.options[key] = value
            except SettingsError as e:
                # A bad key falls back to its default alone, and the user is told which.
                self.option_errors.append(f"Delphi: {e}; using the default for '{key}'")
        folders = [uri_to_path(f.uri) for f in (params.workspace_folders or [])]
        if not folders and params.root_uri:
            folders = [uri_to_path(params.root_uri)]
        elif not folders and params.root_path:
            folders = [Path(params.root_path)]
        self.folders = folders
        caps = params.capabilities
        self.progress_supported = bool(caps.window and caps.window.work_done_progress)
        ws = caps.workspace
        self.dynamic_watchers = bool(ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration)

    def start(self) -> None:
        for msg in self.option_errors:
            self.ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=msg))
        if self.dynamic_watchers:
            reg = lsp.Registration(
                id="delphi-watch", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[lsp.FileSystemWatcher(glob_pattern="**/*")]),
            )
            self.ls.client_register_capability(lsp.RegistrationParams(registrations=[reg]))
        for f in self.folders:
            self.add_folder(f)
        self._worker = threading.Thread(target=self._run, name="delphi-indexer", daemon=True)
        self._worker.start()

    def add_folder(self, root: Path) -> None:
        root = root.resolve()
        with self._engines_lock:
            if root in self.engines:
                return
            try:
                settings = Settings.load(root, self.options)
                self.engines[root] = Engine(root, settings)
            except (SettingsError, FileNotFoundError, OSError) as e:
                self.ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error,
                                                                  message=f"Delphi cannot open {root}: {e}"))
                return
        self._schedule(root, None)

    def remove_folder(self, root: Path) -> None:
        root = root.resolve()
        with self._engines_lock:
            eng = self.engines.pop(root, None)
        if eng is not None:
            eng.stop_indexing()
            eng.close()

    def shutdown(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        for eng in list(self.engines.values()):
            eng.stop_indexing()
        if self._worker is not None:
            self._worker.join(timeout=30)
        with self._engines_lock:
            for eng in self.engines.values():
                eng.close()
            self.engines.clear()

    # ------------------------------------------------------------------ changes
    def engine_for_uri(self, uri: str) -> tuple[Engine, str] | None:
        path = uri_to_path(uri).resolve() if uri.startswith("file:") or uri.startswith("/") else None
        if path is None:
            return None
        for root, eng in sorted(self.engines.items(), key=lambda kv: -len(str(kv[0]))):
            try:
                return eng, path.relative_to(root).as_posix()
            except ValueError:
                continue
        return None

    def buffer_changed(self, uri: str, text: str) -> None:
        found = self.engine_for_uri(uri)
        if found is None:
            return
        self.buffers[uri] = text
        self._schedule(found[0].root, {found[1]})

    def buffer_closed(self, uri: str) -> None:
        self.buffers.pop(uri, None)
        self.file_changed(uri)

    def file_changed(self, uri: str, saved: bool = False) -> None:
        found = self.engine_for_uri(uri)
        if found is None:
            return
        if saved:
            # The disk now holds what the buffer held; the disk is the truth again.
            self.buffers.pop(uri, None)
        self._schedule(found[0].root, {found[1]})

    def reindex_all(self) -> None:
        for root in list(self.engines):
            self._schedule(root, None)

    def _schedule(self, root: Path, paths: set[str] | None) -> None:
        with self._cv:
            if paths is None or (root in self.pending and self.pending[root] is None):
                self.pending[root] = None  # a full pass covers any single files asked for
            else:
                self.pending[root] = (self.pending.get(root) or set()) | paths
            self._last_change = time.monotonic()
            self._cv.notify_all()

    # ------------------------------------------------------------------ the indexing worker
    def _run(self) -> None:
        while True:
            with self._cv:
                while not self.pending and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                # Debounce: let a burst of edits settle before indexing.
                while time.monotonic() - self._last_change < DEBOUNCE_S and not self._stopping:
                    self._cv.wait(timeout=DEBOUNCE_S)
                work, self.pending = self.pending, {}
            for root, paths in work.items():
                eng = self.engines.get(root)
                if eng is None:
                    continue
                try:
                    self._index(eng, paths)
                except Exception as e:  # an indexing failure must show, and not kill the worker
                    log.exception("indexing %s failed", root)
                    self.ls.window_show_message(lsp.ShowMessageParams(
                        type=lsp.MessageType.Error, message=f"Delphi: indexing {root} failed: {e}"))
                self.publish_diagnostics(eng)

    def _buffers_of(self, eng: Engine) -> dict[str, str]:
        out = {}
        for uri, text in list(self.buffers.items()):
            found = self.engine_for_uri(uri)
            if found and found[0] is eng:
                out[found[1]] = text
        return out

    def _index(self, eng: Engine, paths: set[str] | None) -> None:
        buffers = self._buffers_of(eng)
        only = None if paths is None else sorted(paths)
        token = None
        if paths is None and self.progress_supported:
            token = str(uuid.uuid4())
            try:
                self.ls.work_done_progress.create(token).result(timeout=10)
                self.ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
                    title=f"Delphi: indexing {eng.root.name}", percentage=0, cancellable=False))
            except Exception:
                token = None
        last = [0.0]

        def progress(phase: str, done: int, total: int, chunks: int) -> None:
            now = time.monotonic()
            if token is None or (now - last[0] < 0.2 and done < total):
                return
            last[0] = now
            pct = int(100 * done / total) if total else 100
            what = "files" if phase == "lexical" else "chunks embedded"
            self.ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(
                message=f"{phase}: {done}/{total} {what}, {chunks} chunks", percentage=min(pct, 100)))

        rep = eng.index(progress=progress, only=only, buffers=buffers, reembed=paths is None)
        if token is not None:
            c = eng.meta.counts()
            self.ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(
                message=f"{c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors "
                        f"({rep.files_indexed} indexed, {rep.files_skipped} skipped)"))

    # ------------------------------------------------------------------ requests
    def _engine(self, p: dict[str, Any]) -> Engine:
        if not self.engines:
            raise RequestError("workspace", "no workspace folder is open")
        ws = p.get("workspace")
        if ws is not None:
            if not isinstance(ws, str):
                raise RequestError("workspace", "must be a folder path or URI")
            root = uri_to_path(ws).resolve()
            if root not in self.engines:
                raise RequestError("workspace", f"{ws!r} is not an open workspace folder")
            return self.engines[root]
        for a in p.get("anchors") or []:
            if isinstance(a, str):
                found = self.engine_for_uri(a if a.startswith(("file:", "/")) else "")
                if found:
                    return found[0]
        return next(iter(self.engines.values()))

    def context(self, p: dict[str, Any]) -> dict[str, Any]:
        eng = self._engine(p)
        ans = eng.context(p.get("query"), anchors=p.get("anchors"), draft=p.get("draft"), limit=p.get("limit", 20),
                          budget_tokens=p.get("budgetTokens"), kinds=p.get("kinds"))
        if eng.indexing is not None:
            ans["indexing"] = dict(eng.indexing)
        return ans

    def health(self) -> dict[str, Any]:
        return {"workspaces": [eng.health() for eng in self.engines.values()], "settingsErrors": self.option_errors}

    def symbols(self, query: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for eng in self.engines.values():
            out.extend(eng.symbols(query, limit=200))
        return out[:500]

    def document_symbols(self, uri: str) -> list[dict[str, Any]]:
        found = self.engine_for_uri(uri)
        if found is None:
            return []
        eng, rel = found
        return [{"name": s[0], "kind": s[1], "path": s[2], "line": s[3], "endLine": s[4], "container": s[5],
                 "uri": uri} for s in eng.meta.symbols_of(rel)]

    def related_tests_by_symbol(self, uri: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        found = self.engine_for_uri(uri)
        if found is None:
            return []
        eng, rel = found
        if eng.view().files.get(rel) == "test":
            return []
        out = []
        for s in eng.meta.symbols_of(rel):
            if s[1] not in ("function", "method", "class", "struct", "interface", "trait", "enum", "type"):
                continue
            tests = eng.related_tests(rel, symbol=s[0], limit=20)
            for t in tests:
                t["uri"] = (eng.root / t["path"]).as_uri()
            out.append(({"name": s[0], "line": s[3]}, tests))
        return out

    def related_code_of(self, uri: str) -> list[dict[str, Any]] | None:
        """For a test file: the source files it exercises. None for any other file."""
        found = self.engine_for_uri(uri)
        if found is None:
            return None
        eng, rel = found
        if eng.view().files.get(rel) != "test":
            return None
        code = eng.related_code(rel, limit=10)
        for c in code:
            c["uri"] = (eng.root / c["path"]).as_uri()
        return code

    def related_tests_at(self, uri: str, line: int) -> tuple[str, list[dict[str, Any]]] | None:
        found = self.engine_for_uri(uri)
        if found is None:
            return None
        eng, rel = found
        syms = [s for s in eng.meta.symbols_of(rel) if s[3] <= line <= s[4]]
        if not syms:
            return None
        name = max(syms, key=lambda s: s[3])[0]  # the innermost definition around the line
        tests = eng.related_tests(rel, symbol=name, limit=10)
        for t in tests:
            t["uri"] = (eng.root / t["path"]).as_uri()
        return name, tests

    # ------------------------------------------------------------------ diagnostics
    def publish_diagnostics(self, eng: Engine) -> None:
        h = eng.health(check_staleness=False)
        by_uri: dict[str, list[lsp.Diagnostic]] = {}
        top = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        for n, (path, reason) in enumerate(sorted(h["skipped"].items())):
            if n >= MAX_FILE_DIAGNOSTICS or reason.startswith(("symlink", "empty file")):
                continue
            by_uri.setdefault((eng.root / path).as_uri(), []).append(lsp.Diagnostic(
                range=top, severity=lsp.DiagnosticSeverity.Information, source="delphi",
                message=f"Delphi did not index this file: {reason}"))
        for path in h["decodedWithReplacement"]:
            by_uri.setdefault((eng.root / path).as_uri(), []).append(lsp.Diagnostic(
                range=top, severity=lsp.DiagnosticSeverity.Information, source="delphi",
                message="Delphi indexed this file with replacement characters: it is not valid UTF-8"))
        sev = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning,
               "info": lsp.DiagnosticSeverity.Information}
        ws_diags = [lsp.Diagnostic(range=top, severity=sev[p["severity"]], source="delphi", code=p["code"],
                                   message=p["message"])
                    for p in h["problems"] if p["code"] != "not_indexed"]
        by_uri[(eng.root / HEALTH_DOCUMENT).as_uri()] = ws_diags
        prefix = eng.root.as_uri() + "/"
        stale = {u for u in self.published if u.startswith(prefix)} - set(by_uri)
        for uri in stale:
            self.ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        for uri, diags in by_uri.items():
            self.ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags))
        self.published = (self.published - stale) | {u for u, d in by_uri.items() if d}
