"""Query analysis, the router, fusion, features and the view-only branches, each on its own.

No engine and no stores: a tiny index view is built from a dict of files, a few symbol records and
import lines, so a failure here names the part that changed (the golden rankings say only *that*
the whole order changed).
"""

from __future__ import annotations

import os

import pytest

from delphi_ls.core import Kind, Shape, SymbolRecord
from delphi_ls.core.tokens import stripped
from delphi_ls.indexing.graph import FileGraph
from delphi_ls.retrieval.branches.anchors import AnchorBranch, AnchorTestsBranch
from delphi_ls.retrieval.branches.base import Hit
from delphi_ls.retrieval.branches.path import PathBranch
from delphi_ls.retrieval.branches.registry import registered
from delphi_ls.retrieval.branches.structure import GraphBranch
from delphi_ls.retrieval.branches.symbol import SymbolBranch
from delphi_ls.retrieval.context import ChunkLines, IndexView, SearchContext, SymbolTable
from delphi_ls.retrieval.features import candidate_features, feature_names
from delphi_ls.retrieval.fusion import rrf
from delphi_ls.retrieval.query import analyse
from delphi_ls.retrieval.router import AVOID_FACTOR, PREFER_WEIGHT, weights_for
from delphi_ls.settings import Settings

FILES = {
    "proxy/grpc_proxy.go": "code",
    "proxy/grpc_proxy_test.go": "test",
    "shipyard/retry.py": "code",
    "shipyard/scheduler.py": "code",
    "tests/test_retry.py": "test",
    "docs/retry.md": "doc",
    **{f"gen/retry_{i}.py": "code" for i in range(6)},  # one folder full of the same stem
}
SYMBOLS = [
    SymbolRecord("RetryPolicy", "class", "shipyard/retry.py", 5, 20, ""),
    SymbolRecord("delay_for", "method", "shipyard/retry.py", 12, 15, "RetryPolicy"),
    SymbolRecord("NewGrpcProxy", "function", "proxy/grpc_proxy.go", 14, 22, ""),
    SymbolRecord("BuildScheduler", "class", "shipyard/scheduler.py", 4, 15, ""),
]
IMPORTS = [("tests/test_retry.py", "py:shipyard.retry")]  # as the chunker records them: language:spec


def view() -> IndexView:
    by_base: dict[str, list[str]] = {}
    for p in FILES:
        by_base.setdefault(os.path.basename(p), []).append(p)
    return IndexView(dict(FILES), SymbolTable.of(SYMBOLS, dict(FILES)), [(p, stripped(p), stripped(os.path.basename(p))) for p in FILES],
                     ChunkLines(None, {p: ([1], [f"{p}#0"]) for p in FILES}), by_base,
                     FileGraph.build(dict(FILES), IMPORTS))


def ctx(anchors: list[str] | None = None, settings: Settings | None = None) -> SearchContext:
    # The view-only branches read neither the manifest nor Whoosh nor Chroma.
    return SearchContext(settings or Settings(), None, None, None, None, view(), anchors or [])  # type: ignore[arg-type]


# ------------------------------------------------------------------ query analysis
@pytest.mark.parametrize("question,shape,prefer", [
    ("which tests cover the retry policy?", Shape.TEST, {Kind.TEST}),
    ("RetryPolicy.delay_for with_backoff", Shape.IDENTIFIER, set()),
    ("how does the scheduler pick the next job?", Shape.ENGLISH, {Kind.CODE}),
    ('Traceback (most recent call last):\n  File "/x/shipyard/retry.py", line 27, in with_backoff\nRuntimeError: boom',
     Shape.TRACE, {Kind.CODE}),
])
def test_analysis_gives_the_shape_and_wanted_kinds(question: str, shape: Shape, prefer: set[Kind]) -> None:
    q = analyse(question)
    assert (q.shape, q.prefer) == (shape, prefer)


def test_analysis_reads_paths_and_frames() -> None:
    q = analyse('File "/home/ci/shipyard/retry.py", line 27, in with_backoff')
    assert q.frames == [("/home/ci/shipyard/retry.py", 27)] and q.paths[0] == "/home/ci/shipyard/retry.py"


# ------------------------------------------------------------------ router
def test_router_takes_each_branch_weight_for_the_shape_and_settings_override_it() -> None:
    q = analyse("which tests cover the retry policy?")
    assert weights_for(q, Settings()) == {s.name: s.weights[Shape.TEST] for s in registered()}
    assert weights_for(q, Settings(branch_weights={"bm25": 0.0}))["bm25"] == 0.0


# ------------------------------------------------------------------ fusion
def test_fusion_adds_weighted_reciprocal_ranks_and_ties_share_a_rank() -> None:
    lists = {"a": [Hit("x", 9.0), Hit("y", 5.0), Hit("z", 5.0, tied=True)], "b": [Hit("z", 1.0)]}
    fused = rrf(lists, {"a": 1.0, "b": 2.0}, {}, 10, set(), set())
    score = {f.path: f.score for f in fused}
    assert score["x"] == pytest.approx(1 / 11) and score["y"] == pytest.approx(1 / 12)
    assert score["z"] == pytest.approx(1 / 12 + 2 / 11)  # tied with y in a, first in b
    assert [f.path for f in fused] == ["z", "x", "y"]
    assert fused[0].branches == {"a": 2, "b": 1}


def test_fusion_is_kind_aware() -> None:
    lists = {"a": [Hit("docs/retry.md", 2.0), Hit("tests/test_retry.py", 1.0)]}
    kinds = {"docs/retry.md": "doc", "tests/test_retry.py": "test"}
    fused = rrf(lists, {"a": 1.0}, kinds, 10, {"test"}, {"doc"})
    score = {f.path: f.score for f in fused}
    assert score["docs/retry.md"] == pytest.approx(AVOID_FACTOR / 11)
    assert score["tests/test_retry.py"] == pytest.approx(1 / 12 + PREFER_WEIGHT / 11)  # first of the wanted kind


def test_fusion_ignores_branches_without_weight() -> None:
    assert rrf({"a": [Hit("x", 1.0)]}, {"a": 0.0}, {}, 10, set(), set()) == []


# ------------------------------------------------------------------ features
def test_features_are_read_by_name() -> None:
    q = analyse("which tests cover the retry policy?")
    c = ctx(["shipyard/retry.py"])
    fused = rrf({"bm25": [Hit("tests/test_retry.py", 2.0), Hit("shipyard/retry.py", 1.0)],
                 "anchor": [Hit("shipyard/retry.py", 1.0)]}, {"bm25": 1.0, "anchor": 1.0}, c.files, 30, set(), set())
    names = feature_names()
    x = candidate_features(fused, q, c, names)
    assert x.shape == (2, len(names))
    row = {p.path: dict(zip(names, x[i], strict=True)) for i, p in enumerate(fused)}
    anchor, test = row["shipyard/retry.py"], row["tests/test_retry.py"]
    assert anchor["rr_anchor"] == 1.0 and anchor["rr_bm25"] == pytest.approx(0.5) and anchor["is_anchor"] == 1.0
    assert test["rr_bm25"] == 1.0 and test["kind_test"] == 1.0 and test["test_when_test_wanted"] == 1.0
    assert test["shape_test"] == 1.0 and test["imports_anchor"] == 1.0
    assert anchor["n_branches"] == pytest.approx(2 / len(registered()))


# ------------------------------------------------------------------ branches on a tiny view
def test_path_branch_matches_separator_stripped_paths_and_caps_a_folder() -> None:
    hits = PathBranch().search(analyse("grpcproxy setup"), ctx())
    assert [h.path for h in hits[:2]] == ["proxy/grpc_proxy.go", "proxy/grpc_proxy_test.go"]
    assert "'grpcproxy'" in hits[0].note
    retry = PathBranch().search(analyse("retry"), ctx(settings=Settings(path_cap_per_dir=2)))
    assert sum(1 for h in retry if h.path.startswith("gen/")) == 2


def test_path_branch_resolves_a_frame_to_the_workspace_file() -> None:
    hits = PathBranch().search(analyse('File "/home/ci/shipyard/shipyard/retry.py", line 3, in f'), ctx())
    assert hits[0].path == "shipyard/retry.py" and hits[0].note.startswith("named in the question")


def test_symbol_branch_finds_the_defining_file() -> None:
    hits = SymbolBranch().search(analyse("RetryPolicy.delay_for"), ctx())
    assert hits[0].path == "shipyard/retry.py"
    assert hits[0].note == "defines `RetryPolicy`, `delay_for`" and hits[0].chunk_ids == ["shipyard/retry.py#0"]


def test_anchor_branches() -> None:
    c = ctx(["shipyard/retry.py", "no/such/file.py"])
    assert [h.path for h in AnchorBranch().search(analyse("x"), c)] == ["shipyard/retry.py"]
    tests = AnchorTestsBranch().search(analyse("tests"), c)
    assert tests[0].path == "tests/test_retry.py" and tests[0].note == "named after retry.py"


def test_graph_branch_steps_from_the_seeds_not_onto_anchors() -> None:
    c = ctx(["shipyard/retry.py"])
    assert GraphBranch().search(analyse("x"), c) == []  # no seeds yet: stage 2 waits for the first fusion
    c.seeds = {"shipyard/retry.py": 1.0}
    hits = GraphBranch().search(analyse("x"), c)
    assert [h.path for h in hits] == ["tests/test_retry.py"] and hits[0].note == "linked to shipyard/retry.py"


def test_identical_files_fill_one_place_and_the_copy_is_said(tmp_path):
    """lazygit ships `docs/` and `docs-master/` as the same trees: every answer of a newcomer's listed both copies of
    a page (session 45). The later copy is folded into the first's why-line; small files alike by chance stay."""
    from delphi_ls import Engine

    page = "# Custom keybindings\n\n" + "Bind a key to a custom command in config.yml under customCommands.\n" * 6
    files = {"docs/Custom_Keybindings.md": page, "docs-master/Custom_Keybindings.md": page,
             "pkg/a/__init__.py": "", "pkg/b/__init__.py": "",
             "pkg/keys.py": "def bind_custom_key(key, command):\n    return {key: command}\n"}
    for rel, text in files.items():
        (tmp_path / "ws" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "ws" / rel).write_text(text)
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        rows = eng.context("custom keybindings for a command", limit=10)["results"]
        paths = [r["path"] for r in rows]
        assert sum(p.endswith("Custom_Keybindings.md") for p in paths) == 1, paths
        kept = next(r for r in rows if r["path"].endswith("Custom_Keybindings.md"))
        assert kept["why"].endswith("the same text as docs-master/Custom_Keybindings.md"), kept["why"]
        # A copy the caller holds is answered as itself, and the other is folded into it (a review, session 45).
        held = eng.context("custom keybindings", anchors=["docs-master/Custom_Keybindings.md"], limit=10)["results"]
        assert [r["path"] for r in held].count("docs/Custom_Keybindings.md") == 0, held
        own = next(r for r in held if r["path"] == "docs-master/Custom_Keybindings.md")
        assert own["why"].endswith("the same text as docs/Custom_Keybindings.md"), own["why"]
