"""The engine is a facade: the retrieval pipeline runs on explicit inputs, and no front reads a store.

- ``Retriever`` answers from an :class:`IndexState` it is handed, with the branch list it is given: run
  here on a real indexed fixture with two branches, and with a branch that raises.
- The fronts (CLI, language server, session, MCP, evaluation, benchmarks) never reach the engine's
  stores or its private state: checked over their source with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.core import Need, Shape
from delphi_ls.retrieval.branches.base import Hit
from delphi_ls.retrieval.branches.registry import BranchSpec, registered
from delphi_ls.retrieval.context import IndexView, SearchContext
from delphi_ls.retrieval.query import QueryInfo, analyse
from delphi_ls.retrieval.retriever import IndexState, Retriever
from tests.conftest import copy_fixture

REPO = Path(__file__).resolve().parents[1]
FRONTS = ["delphi_ls/cli.py", "delphi_ls/server.py", "delphi_ls/session.py", "delphi_ls/lsp_protocol.py",
          *sorted(str(p.relative_to(REPO)) for p in (REPO / "delphi_ls" / "mcp").glob("*.py")),
          *sorted(str(p.relative_to(REPO)) for p in (REPO / "delphi_ls" / "evaluation").glob("*.py")),
          *sorted(str(p.relative_to(REPO)) for p in (REPO / "bench").glob("*.py"))]
# The engine's stores and private state: what a front must ask the engine for instead.
INSIDE = {"meta", "lexical", "vectors", "_vectors", "_view", "_exact", "db", "retriever", "_indexer",
          "_retrieve", "_catch_up"}
# (file, attribute) -> why this front may reach inside. Keep this short.
ALLOWED = {
    ("bench/perf.py", "_indexer"): "times the lexical pass, a first answer and the vector pass apart; "
                                   "Engine.index() runs them as one",
    ("bench/cold_index.py", "_indexer"): "bench.perf's cold index alone (the 100k workspace, session 32), its "
                                         "passes driven as bench.perf drives them",
    ("bench/perf.py", "_view"): "drops the view between the lexical pass and the first answer (same reason)",
}


def reaches_inside(path: str, root: Path = REPO) -> list[tuple[int, str]]:
    tree = ast.parse((root / path).read_text(encoding="utf-8"), path)
    return [(n.lineno, n.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in INSIDE and (path, n.attr) not in ALLOWED
            and not (isinstance(n.value, ast.Name) and n.value.id == "self")]


def test_no_front_reads_the_engine_stores() -> None:
    found = {p: hits for p in FRONTS if (hits := reaches_inside(p))}
    assert not found, f"fronts reaching past the engine's facade: {found}"


def test_the_check_can_fail(tmp_path: Path) -> None:
    """The scan sees an attribute read through a local name (what a front would write)."""
    (tmp_path / "probe.py").write_text("def f(eng):\n    return eng.meta.counts()\n", encoding="utf-8")
    assert reaches_inside("probe.py", tmp_path) == [(2, "meta")]


def test_allowances_are_still_needed() -> None:
    stale = [(p, a) for p, a in ALLOWED if not any(
        isinstance(n, ast.Attribute) and n.attr == a for n in ast.walk(ast.parse((REPO / p).read_text())))]
    assert not stale, f"ALLOWED lists reads that are gone: {stale}"


class OnlyTests:
    """Every test file, in path order: a branch whose answer is known without running the others."""

    name = "only_tests"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        return [Hit(p, 1.0, [], "a test file") for p, k in sorted(ctx.files.items()) if k == "test"]


class Broken:
    name = "broken"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        raise RuntimeError("segment gone")


ALL_SHAPES = {s: 1.0 for s in Shape}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory):
    root = copy_fixture("shipyard", tmp_path_factory.mktemp("ws"))
    eng = Engine(root, index_dir=str(tmp_path_factory.mktemp("idx")), vectors=False)
    eng.index()
    yield eng
    eng.close()


def state_of(eng: Engine, searcher: object = None) -> IndexState:
    """The inputs a query reads, taken from a real index (what the engine hands the retriever)."""
    return IndexState(eng.meta, eng.lexical, IndexView.build(eng.meta), eng.counts(), searcher, None,
                      "off: vectors disabled by settings (vectors = false)", lexical_ready=True, partial=False,
                      cochange_status="off: not a git repository")


def test_retriever_runs_the_branches_it_is_given_on_the_state_it_is_handed(indexed: Engine) -> None:
    settings = indexed.settings
    bm25 = next(s for s in registered() if s.name == "bm25")
    toy = BranchSpec("only_tests", OnlyTests, ALL_SHAPES)
    ret = Retriever(settings, [(bm25, bm25.make()), (toy, toy.make())])
    r = ret.retrieve(analyse("retry backoff delay"), state_of(indexed), [], None)
    assert set(r.lists) == {"bm25", "only_tests"} and r.ready == {"bm25": "ready", "only_tests": "ready"}
    tests = [p for p, k in sorted(r.ctx.files.items()) if k == "test"]
    assert [h.path for h in r.lists["only_tests"]] == tests
    # Fusion saw both lists: every fused file came from one of them, and the test files carry the toy's rank.
    fused = {f.path: f for f in r.fused}
    assert set(fused) == {h.path for h in r.lists["bm25"]} | set(tests)
    assert all("only_tests" in fused[p].branches for p in tests)
    # The same retriever on a state whose lexical pass has not been written: nothing runs, and it says why.
    empty = state_of(indexed)
    not_yet = IndexState(**{**empty.__dict__, "lexical_ready": False})
    r2 = ret.retrieve(analyse("retry backoff delay"), not_yet, [], None)
    assert r2.lists == {} and r2.fused == []
    assert r2.ready["bm25"].startswith("not ready") and r2.ready["only_tests"].startswith("not ready")


def test_a_branch_that_raises_is_reported_and_the_others_still_answer(indexed: Engine) -> None:
    failures: list[tuple[str, str]] = []
    toy = BranchSpec("only_tests", OnlyTests, ALL_SHAPES)
    broken = BranchSpec("broken", Broken, ALL_SHAPES, needs=frozenset({Need.INDEX, Need.LEXICAL}))
    ret = Retriever(indexed.settings, [(broken, broken.make()), (toy, toy.make())],
                    on_failure=lambda spec, e: failures.append((spec.name, str(e))))
    r = ret.retrieve(analyse("retry"), state_of(indexed), [], None)
    assert r.ready["broken"] == "error: RuntimeError: segment gone" and r.lists["broken"] == []
    assert failures == [("broken", "segment gone")] and ret.errors == {"broken": "RuntimeError: segment gone"}
    assert r.fused and all(set(f.branches) == {"only_tests"} for f in r.fused)


def test_vector_branches_wait_for_a_searcher(indexed: Engine) -> None:
    vec = next(s for s in registered() if s.name == "vector")
    ret = Retriever(indexed.settings, [(vec, vec.make())])
    r = ret.retrieve(analyse("retry"), state_of(indexed), [], None)
    assert r.ready == {"vector": "off: vectors disabled by settings (vectors = false)"} and "vector" not in r.lists
