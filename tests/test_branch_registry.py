"""The registry of branches is the one list: weights for every shape, and a new branch runs everywhere.

The toy branch below is the whole of what adding a branch takes: one ``BranchSpec`` in this file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from delphi_ls import Engine
from delphi_ls.core import Need, Shape
from delphi_ls.models.ltr import SHIPPED_LTR, LearnedRanker
from delphi_ls.retrieval.branches.base import Hit
from delphi_ls.retrieval.branches.registry import BranchSpec, branch_names, registered, registered_branch
from delphi_ls.retrieval.context import SearchContext
from delphi_ls.retrieval.features import feature_names
from delphi_ls.retrieval.query import QueryInfo
from delphi_ls.retrieval.router import weights_for
from delphi_ls.settings import Settings, SettingsError
from tests.conftest import copy_fixture


def test_every_registered_branch_has_a_weight_for_every_shape() -> None:
    for spec in registered():
        missing = [s.value for s in Shape if s not in spec.weights]
        assert not missing, f"branch {spec.name} has no weight for {missing}"


def test_a_branch_without_a_weight_for_some_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="no weight for question shape.*trace"):
        BranchSpec("half", lambda: None, {"english": 1.0, "identifier": 1.0, "test": 1.0})  # type: ignore[arg-type, return-value]


def test_settings_fusion_and_features_name_the_registered_branches() -> None:
    names = branch_names()
    assert names[:2] == ("bm25", "vector") and "anchor_refs" in names
    with pytest.raises(SettingsError, match="unknown branch 'toy'"):
        Settings.from_dict({"branch_weights": {"toy": 1.0}})
    cols = feature_names()
    assert all(f"rr_{b}" in cols and f"top5_{b}" in cols for b in names)


class ToyBranch:
    """Finds the one file whose path contains 'retry.md' -- something no question here asks for by name."""

    name = "toy"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        return [Hit(p, 1.0, [], "the toy branch likes it") for p in ctx.files if p.endswith("retry.md")]


TOY = BranchSpec("toy", ToyBranch, {Shape.ENGLISH: 1.0, Shape.IDENTIFIER: 1.0, Shape.TRACE: 1.0, Shape.TEST: 0.0},
                 needs=frozenset({Need.INDEX}))


def test_a_registered_toy_branch_runs_is_weighed_reported_and_ignored_by_the_learned_ranker(tmp_path: Path) -> None:
    ws = copy_fixture("shipyard", tmp_path / "ws")
    with registered_branch(TOY):
        assert Settings.from_dict({"branch_weights": {"toy": 2.0}}).branch_weights == {"toy": 2.0}
        with Engine(ws, index_dir=str(tmp_path / "index"), vectors=False) as eng:
            eng.index()
            res = eng.context("where is the gRPC proxy set up?")
            assert res["branchesReady"]["toy"] == "ready"
            top = next(r for r in res["results"] if r["path"] == "docs/retry.md")
            assert top["branches"]["toy"] == 1 and "the toy branch likes it" in top["why"]
            assert "ltr" in top["branches"]  # the learned ranker still ran, without the toy's columns
            h = eng.health(check_staleness=False)
            assert h["branches"]["toy"] == "ready"
            assert "rr_toy" in eng.reranker_status and "do not weigh in its order" in eng.reranker_status
            # A test-shaped question gives it no weight: it does not run for that shape.
            res = eng.context("which tests cover the retry policy?")
            assert res["branchesReady"]["toy"] == "ready (not used for this query shape)"
        q = QueryInfo("x", [], [], [], [], [], "english", set(), set())
        assert weights_for(q, Settings())["toy"] == 1.0
    assert "toy" not in branch_names()


def test_learned_ranker_reads_its_columns_by_name() -> None:
    ltr = LearnedRanker(SHIPPED_LTR)
    names = list(ltr.features)  # the columns it was trained on
    rng = np.random.default_rng(0)
    x = rng.random((4, len(names))).astype(np.float32)
    want = ltr.score(x, names)
    # Columns in another order, plus one it was never trained on: the same scores.
    order = list(reversed(range(len(names))))
    shuffled = x[:, order]
    extra = np.concatenate([shuffled, rng.random((4, 1)).astype(np.float32)], axis=1)
    got = ltr.score(extra, [names[i] for i in order] + ["rr_new_branch"])
    assert np.allclose(got, want, atol=1e-6)
    assert ltr.unused_columns([*names, "rr_new_branch"]) == ["rr_new_branch"]
    # A column it was trained on and the engine no longer computes: refused, naming it.
    with pytest.raises(ValueError, match="rr_bm25"):
        ltr.score(x[:, 1:], [n for n in names if n != "rr_bm25"])


def test_a_learned_ranker_trained_on_a_column_the_engine_lacks_refuses_to_load(tmp_path: Path) -> None:
    folder = tmp_path / "ltr"
    shutil.copytree(SHIPPED_LTR, folder)
    data = json.loads((folder / "ltr.json").read_text())
    data["features"].append("rr_retired_branch")
    data["mean"].append(0.0)
    data["std"].append(1.0)
    for m in data["members"]:
        m["w1"].append([0.0] * len(m["w1"][0]))
    data["probe"]["x"].append(0.0)
    (folder / "ltr.json").write_text(json.dumps(data))
    ws = copy_fixture("shipyard", tmp_path / "ws")
    with Engine(ws, index_dir=str(tmp_path / "index"), vectors=False, reranker=str(folder)) as eng:
        assert eng.ltr is None and eng.reranker_status.startswith("error")
        assert "rr_retired_branch" in eng.problems["reranker"]
