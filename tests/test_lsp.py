"""End to end: the real server over stdio, driven by pytest-lsp, on a fixture workspace."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.conftest import build_workspace

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "delphi_ls"])


def as_dict(obj):
    if isinstance(obj, dict):
        return {k: as_dict(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [as_dict(v) for v in obj]
    if hasattr(obj, "_asdict"):
        return as_dict(obj._asdict())
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return as_dict(vars(obj))
    return obj


async def request(client: LanguageClient, method: str, params) -> dict:
    return as_dict(await client.protocol.send_request_async(method, params))


async def wait_for(predicate, timeout: float = 90.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = await predicate()
        if result:
            return result
        await asyncio.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


async def indexed(client: LanguageClient) -> dict:
    async def done():
        h = await request(client, "delphi/health", {})
        w = h["workspaces"][0]
        c = w["counts"]
        return h if c["files"] > 10 and c["vectors"] == c["chunks"] and w["branches"]["vector"] == "ready" else None
    return await wait_for(done, what="indexing")


async def top_paths(client: LanguageClient, query: str, **extra) -> list[str]:
    ans = await request(client, "delphi/context", {"query": query, **extra})
    return [r["path"] for r in ans["results"]]


def accept_registrations(client: LanguageClient) -> list:
    """pytest-lsp's client does not answer client/registerCapability; answer it like an editor."""
    seen: list = []

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def _register(params: lsp.RegistrationParams) -> None:
        seen.extend(params.registrations)

    # VS Code's capabilities declare codeLens refreshSupport, and the server asks for it after each index run.
    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(_params: None) -> None:
        client.lens_refreshes = getattr(client, "lens_refreshes", 0) + 1  # type: ignore[attr-defined]

    return seen


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws")


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, ws: Path, tmp_path: Path):
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=ws.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
        initialization_options={"indexDir": str(tmp_path / "index"), "chunkChars": "lots",
                                "reranker": "off"},
    )
    lsp_client.registrations = accept_registrations(lsp_client)
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def test_progress_context_and_bad_option_message(client: LanguageClient, ws: Path):
    await indexed(client)

    # Work-done progress: begin, reports, end. The counts are ready a moment before `end` is sent (the
    # session ends the progress after the run returns), so wait for it rather than race it.
    async def ended():
        kinds = [[v.kind for v in reports] for reports in client.progress_reports.values()]
        return any(k[0] == "begin" and k[-1] == "end" for k in kinds)
    await wait_for(ended, timeout=30, what="work-done progress to end")
    # One rising percentage across the files and the vectors (it ran 0-100, then from about 5 again; session 39).
    for reports in client.progress_reports.values():
        pcts = [v.percentage for v in reports if v.kind == "report" and v.percentage is not None]
        assert pcts == sorted(pcts), pcts
    phases = [v.message.split(":")[0] for r in client.progress_reports.values() for v in r if v.kind == "report"]
    assert "vectors" in phases, phases  # both phases were reported, so the order above spans them
    # The bad initialization option was named, and the default used for it alone.
    assert any("chunkChars" in m.message for m in client.messages)
    # File watchers were registered dynamically (the client allows it).
    assert [r.method for r in client.registrations] == [lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    ans = await request(client, "delphi/context", {"query": "where is TLS set up for the gRPC proxy?", "limit": 5})
    assert ans["results"][0]["path"] == "proxy/grpc_proxy.go"
    r = ans["results"][0]
    assert r["uri"] == (ws / "proxy/grpc_proxy.go").as_uri() and r["why"] and r["spans"] and r["branches"]
    assert set(ans) >= {"results", "health", "timingsMs", "traceId", "branchesReady"}
    ans = await request(client, "delphi/context", {"query": "which tests cover this?",
                                                   "anchors": [(ws / "shipyard/retry.py").as_uri()]})
    assert ans["results"][0]["path"] == "tests/test_retry.py"
    ans = await request(client, "delphi/context", {"query": "exponential backoff", "budgetTokens": 200})
    assert 0 < ans["packedTokens"] <= 200


async def test_buffers_saves_and_deletes_change_the_answer(client: LanguageClient, ws: Path):
    await indexed(client)
    uri = (ws / "shipyard/scheduler.py").as_uri()
    text = (ws / "shipyard/scheduler.py").read_text()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    unsaved = text + "\n\ndef quarantine_flaky_worker(worker):\n    '''Take a flaky worker out of rotation.'''\n"
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=unsaved)]))

    async def unsaved_found():
        return "shipyard/scheduler.py" in (await top_paths(client, "quarantine_flaky_worker"))[:1]
    await wait_for(unsaved_found, what="the unsaved buffer to be searchable")
    assert "quarantine_flaky_worker" not in (ws / "shipyard/scheduler.py").read_text()

    # A file saved on disk (and announced) is re-indexed.
    new = ws / "shipyard" / "artifacts.py"
    new.write_text("def prune_stale_artifacts(days):\n    '''Delete artifacts older than days.'''\n")
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
        changes=[lsp.FileEvent(uri=new.as_uri(), type=lsp.FileChangeType.Created)]))

    async def saved_found():
        return (await top_paths(client, "prune_stale_artifacts"))[:1] == ["shipyard/artifacts.py"]
    await wait_for(saved_found, what="a new file to be indexed")

    # A deleted file disappears.
    (ws / "web/src/format.js").unlink()
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
        changes=[lsp.FileEvent(uri=(ws / "web/src/format.js").as_uri(), type=lsp.FileChangeType.Deleted)]))

    async def gone():
        return "web/src/format.js" not in await top_paths(client, "formatDuration humanBytes")
    await wait_for(gone, what="a deleted file to leave the index")


async def test_symbols_lens_hover(client: LanguageClient, ws: Path):
    await indexed(client)
    syms = await client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="grpcprox"))
    assert syms[0].name in ("GrpcProxy", "NewGrpcProxy")
    assert syms[0].location.uri == (ws / "proxy/grpc_proxy.go").as_uri()
    uri = (ws / "shipyard/retry.py").as_uri()
    doc = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert {s.name for s in doc} >= {"RetryPolicy", "delay_for", "with_backoff"}
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    titles = {lens.range.start.line: lens.command.title for lens in lenses}
    # RetryPolicy (line 6) and with_backoff (line 19) are both used by tests/test_retry.py
    assert titles[5] == "1 related test" and titles[18] == "1 related test"
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=18, character=6)))
    assert "with_backoff" in hover.contents.value and "tests/test_retry.py" in hover.contents.value
    # A test file: one lens at the top naming the source it exercises, and the same on hover.
    test_uri = (ws / "tests/test_retry.py").as_uri()
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=test_uri)))
    top = [lens for lens in lenses if lens.range.start.line == 0]
    assert top and top[0].command.title.startswith("tests ") and top[0].command.arguments[0][0] == uri
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=test_uri), position=lsp.Position(line=0, character=1)))
    assert "Source this test exercises" in hover.contents.value and "shipyard/retry.py" in hover.contents.value
    # A definition no test exercises: no popup ("none found" covered other servers' hovers; session 25).
    java = (ws / "jvm/src/main/java/dev/shipyard/CacheKey.java").as_uri()
    assert await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=java), position=lsp.Position(line=12, character=20))) is None


async def test_diagnostics_appear_and_clear(client: LanguageClient, ws: Path):
    await indexed(client)
    huge = (ws / "data/huge.txt").as_uri()

    async def has_diag():
        return client.diagnostics.get(huge)
    diags = await wait_for(has_diag, what="a diagnostic on the skipped file")
    assert "too large" in diags[0].message
    latin = client.diagnostics.get((ws / "legacy/latin1.py").as_uri())
    assert latin and "UTF-8" in latin[0].message
    health_doc = client.diagnostics.get((ws / "delphi.toml").as_uri())
    # initializationOptions turned the reranker off: health says so, on the workspace's delphi.toml
    assert health_doc is not None and any("reranker" in d.message for d in health_doc)
    (ws / "data/huge.txt").write_text("small now\n")
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
        changes=[lsp.FileEvent(uri=huge, type=lsp.FileChangeType.Changed)]))

    async def cleared():
        return huge in client.diagnostics and len(client.diagnostics[huge]) == 0
    await wait_for(cleared, what="the diagnostic to clear")


async def test_malformed_requests_and_commands(client: LanguageClient, ws: Path):
    for params, field in [({}, "query"), ({"query": ""}, "query"), ({"query": "x", "limit": "many"}, "limit"),
                          ({"query": "x", "anchors": ["/etc/passwd"]}, "anchors"), ({"query": "x", "bogus": 1}, "bogus")]:
        with pytest.raises(JsonRpcInvalidParams) as e:
            await request(client, "delphi/context", params)
        assert field in str(e.value.message)
    # The server is still up and answering.
    await indexed(client)
    res = as_dict(await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="delphi.showContext", arguments=[{"query": "BuildGraph"}])))
    assert res["results"][0]["path"] == "engine/src/lib.rs"
    res = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="delphi.reindex"))
    assert as_dict(res) == {"scheduled": True, "folders": [str(ws.resolve())]}


@pytest.fixture
def big_ws(tmp_path: Path) -> Path:
    ws = build_workspace(tmp_path / "big")
    for i in range(300):
        d = ws / "gen" / f"pkg{i % 15}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text("\n".join(f"def handler_{i}_{j}(x):\n    return x + {j}\n" for j in range(25)))
    return ws


@pytest_lsp.fixture(config=SERVER)
async def busy_client(lsp_client: LanguageClient, big_ws: Path, tmp_path: Path):
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=big_ws.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=big_ws.as_uri(), name="big")],
        initialization_options={"indexDir": str(tmp_path / "index")})
    accept_registrations(lsp_client)
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def test_concurrent_requests_while_indexing(busy_client: LanguageClient):
    t0 = time.monotonic()
    answers = await asyncio.gather(*[request(busy_client, "delphi/context", {"query": f"handler_{i}_3"})
                                     for i in range(12)])
    assert all("results" in a and "branchesReady" in a for a in answers)
    assert time.monotonic() - t0 < 60
    # Some answers came while indexing and said so, or indexing was already done.
    await indexed(busy_client)
    final = await request(busy_client, "delphi/context", {"query": "handler_7_3"})
    assert final["results"][0]["path"] == "gen/pkg7/mod7.py"
    assert all(v == "ready" for k, v in final["branchesReady"].items() if k in ("bm25", "symbol", "path"))


async def test_incremental_edits_below_a_page_break_land_on_their_line(client: LanguageClient, ws: Path):
    """The server applied edits by str.splitlines() lines: below a form feed (a page break, ordinary in PEP 8
    Python) an edit went onto the line above it, and the server's copy drifted from the editor's (a newcomer,
    session 30). Symbol ranges now cover their last line."""
    await indexed(client)
    uri = (ws / "shipyard" / "paged.py").as_uri()
    text = "def one():\n    return 1\n\x0c\ndef two():  # \U0001F600\n    return 2\n"
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(line=3, character=4), lsp.Position(line=3, character=7)), text="deux")]))

    async def renamed():
        syms = await client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
        return {s.name: s for s in syms or []} if any(s.name == "deux" for s in syms or []) else None
    syms = await wait_for(renamed, timeout=30, what="the edited buffer's symbols")
    assert "two" not in syms
    deux = syms["deux"].location.range
    assert (deux.start.line, deux.end.line) == (3, 5)  # lines 4-5, the end at the start of the line after
    one = syms["one"].location.range
    assert (one.start.line, one.end.line) == (0, 2)


def test_a_runs_percentage_rises_across_its_phases() -> None:
    """The files ran 0-100, then the vectors from about 5 again (a monorepo newcomer, session 39)."""
    from delphi_ls.session import run_percentage
    seen, pct = [], 0
    for phase, done, total in [("lexical", 1, 4), ("lexical", 4, 4), ("vectors", 100, 2000), ("vectors", 2000, 2000)]:
        pct = run_percentage(phase, done, total, 60, pct)
        seen.append(pct)
    assert seen == [15, 60, 62, 100]
    assert run_percentage("lexical", 10, 10, 100, 0) == 100  # no vectors to follow
    assert run_percentage("lexical", 1, 10, 60, 70) == 70  # never lower
