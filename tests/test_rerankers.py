"""The shipped rerankers load, prove their identity, and put a known answer above known non-answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from delphi_ls import Engine
from delphi_ls.models.cross_encoder import SHIPPED_CROSS_ENCODER, CrossEncoder
from delphi_ls.models.ltr import SHIPPED_LTR, SHIPPED_LTR_HISTORY, LearnedRanker
from delphi_ls.retrieval.features import feature_names
from tests.conftest import git

TEST_QUESTION = "Which tests cover this change?\nGive up on uploads after the last retry attempt"


def _ltr_order(engine: Engine, question: str, anchors: list[str]) -> list[str]:
    cands = engine.candidates(question, anchors, depth=50)
    scores = LearnedRanker().score(np.asarray([c["features"] for c in cands], dtype=np.float32), feature_names())
    return [cands[i]["path"] for i in np.argsort(-scores, kind="stable")]


def test_learned_ranker_puts_the_covering_test_above_docs_and_changelog(engine: Engine) -> None:
    order = _ltr_order(engine, TEST_QUESTION, ["shipyard/retry.py"])
    assert {"CHANGELOG.md", "docs/retry.md", "tests/test_retry.py"} <= set(order)  # all three were candidates
    assert order[0] == "tests/test_retry.py"
    assert order.index("tests/test_retry.py") < order.index("CHANGELOG.md")
    assert order.index("tests/test_retry.py") < order.index("docs/retry.md")


def test_learned_ranker_prefers_source_for_a_code_question(engine: Engine) -> None:
    order = _ltr_order(engine, "Which source files implement this change?\nexponential backoff with jitter between "
                               "upload retry attempts", [])
    assert order[0] == "shipyard/retry.py"
    assert order.index("shipyard/retry.py") < order.index("tests/test_retry.py")


def test_engine_serves_the_learned_ranker_and_health_says_so(workspace: Path, tmp_path: Path) -> None:
    with Engine(workspace, index_dir=str(tmp_path / "i"), reranker="ltr") as eng:
        eng.index()
        ans = eng.context(TEST_QUESTION, anchors=["shipyard/retry.py"])
        assert ans["results"][0]["path"] == "tests/test_retry.py"
        assert "ltr" in ans["timingsMs"]
        status = eng.health()["branches"]["rerank"]
        assert status.startswith("ready: learned ranker delphi-ltr") and "warm" in status


def test_corrupted_learned_ranker_refuses_to_load(tmp_path: Path) -> None:
    folder = tmp_path / "ltr"
    shutil.copytree(SHIPPED_LTR, folder)
    doc = json.loads((folder / "ltr.json").read_text())
    doc["members"][0]["b2"] += 0.5  # moves every score, whichever hidden units the probe wakes
    (folder / "ltr.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="probe score"):
        LearnedRanker(folder)
    # Columns are read by name (issue 15): only a trained column the engine does not compute refuses.
    doc["members"][0]["b2"] -= 0.5
    doc["features"][0] = "rr_retired_branch"
    (folder / "ltr.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="does not compute: rr_retired_branch"):
        LearnedRanker(folder).columns(feature_names())


def test_shipped_cross_encoder_scores_the_relevant_passage_higher() -> None:
    ce = CrossEncoder(SHIPPED_CROSS_ENCODER)
    assert (SHIPPED_CROSS_ENCODER / "model.onnx").stat().st_size < 25_000_000
    scores = ce.score(TEST_QUESTION, [
        "tests/test_retry.py\ndef test_with_backoff_gives_up():\n    policy = RetryPolicy(attempts=3)\n"
        "    with pytest.raises(RuntimeError):\n        with_backoff(boom, policy)",
        "CHANGELOG.md\n# Changelog\n## 1.2.0\n- grpc proxy TLS settings\n- bump version to 1.2.0",
        "web/src/BuildBadge.tsx\nexport function BuildBadge({ status }: Props) {\n  return <span>{status}</span>;\n}",
    ])
    assert scores[0] > scores[1] and scores[0] > scores[2]


def test_tampered_cross_encoder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ce"
    shutil.copytree(SHIPPED_CROSS_ENCODER, folder)
    ident = json.loads((folder / "identity.json").read_text())
    ident["weights_sha256"] = "0" * 64
    (folder / "identity.json").write_text(json.dumps(ident))
    with pytest.raises(ValueError, match="not the model that was trained"):
        CrossEncoder(folder)
    with Engine(tmp_path, index_dir=str(tmp_path / "i"), reranker=str(folder)) as eng:
        assert eng.reranker is None
        assert eng.health()["branches"]["rerank"].startswith("error: cross-encoder")


def _fused(n: int) -> list:
    from delphi_ls.retrieval.fusion import Fused
    return [Fused(f"f{i:02d}", 1.0 / (i + 1)) for i in range(n)]


def test_learned_ranker_keeps_the_fused_top_within_rank_20_when_asked() -> None:
    from delphi_ls.retrieval.rerank import KEEP_WITHIN, learned_rerank
    # The ranker scores the fused order upside down: fused #1 would land at rank 30 of 30.
    scores = np.arange(30, dtype=float)
    free = [f.path for f in learned_rerank(_fused(30), scores)]
    assert free.index("f00") == 29 and free[0] == "f29"
    kept = [f.path for f in learned_rerank(_fused(30), scores, keep=5)]
    # The top five of the fusion sit at the last five places above the line, in the ranker's order.
    assert kept[KEEP_WITHIN - 5: KEEP_WITHIN] == ["f04", "f03", "f02", "f01", "f00"]
    # Everything else keeps the ranker's order: promotions from deep still happen.
    assert kept[:KEEP_WITHIN - 5] == free[:KEEP_WITHIN - 5] and kept[0] == "f29"
    assert [f.path for f in learned_rerank(_fused(30), scores, keep=5)][KEEP_WITHIN:] == \
        [p for p in free if p not in {"f00", "f01", "f02", "f03", "f04"}][KEEP_WITHIN - 5:]


def test_keep_depth_leaves_pinned_files_in_place() -> None:
    from delphi_ls.retrieval.rerank import learned_rerank
    fused = _fused(30)
    scores = np.arange(30, dtype=float)
    out = [f.path for f in learned_rerank(fused, scores, pinned={"f00"}, keep=3)]
    assert out[0] == "f00"  # an anchor keeps its place
    assert {"f01", "f02"} <= set(out[:20])


@pytest.mark.parametrize("keep,pinned", [(15, set()), (20, set()), (20, {"f25"}), (10, {"f02"})])
def test_keep_top_holds_for_every_depth_and_pin(keep: int, pinned: set[str]) -> None:
    from delphi_ls.retrieval.rerank import KEEP_WITHIN, learned_rerank
    out = [f.path for f in learned_rerank(_fused(30), np.arange(30, dtype=float), pinned=pinned, keep=keep)]
    assert sorted(out) == sorted(f.path for f in _fused(30))  # a permutation: nothing lost or doubled
    kept = {f"f{i:02d}" for i in range(keep)}
    assert kept <= set(out[:KEEP_WITHIN]), [p for p in out[KEEP_WITHIN:] if p in kept]
    for p in pinned:
        assert out.index(p) == int(p[1:])  # pinned files keep their places


def test_keep_top_above_the_depth_is_refused() -> None:
    from delphi_ls.settings import Settings, SettingsError
    with pytest.raises(SettingsError, match="ltr_keep_top"):
        Settings.from_dict({"ltr_keep_top": 21})


def test_history_ranker_answers_only_where_git_history_is_read(workspace: Path, tmp_path: Path) -> None:
    # A plain tree: the change-count columns are zero, and the plain ranker orders (it was measured
    # better there, bench/RESULTS.md session 15).
    with Engine(workspace, index_dir=str(tmp_path / "plain")) as eng:
        eng.index(vectors=False)
        assert eng.ltr is not None and eng.ltr_history is not None
        assert eng.ltr_history.identity.name != eng.ltr.identity.name
        churn = {"log_changes", "changes_rel"}  # how often a file changed: zero without history
        assert churn <= set(eng.ltr_history.features) and not churn & set(eng.ltr.features)
        assert eng.retriever.ranker_for(eng.retrieve(TEST_QUESTION, ["shipyard/retry.py"]).state) is eng.ltr
        status = eng.health(check_staleness=False)["branches"]["rerank"]
        assert status.startswith(f"ready: learned ranker {eng.ltr.identity.name}")
        assert f"where git history is read (at least 10 commits): {eng.ltr_history.identity.name}" in status
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "initial")
    # A history of one commit is outside what the history ranker learnt from: in a one-commit repository every
    # file "changed" once and it put an unrelated file second (a newcomer, session 36). The plain one orders.
    with Engine(workspace, index_dir=str(tmp_path / "git1")) as eng:
        eng.index(vectors=False)
        assert eng.retriever.ranker_for(eng.retrieve(TEST_QUESTION, ["shipyard/retry.py"]).state) is eng.ltr
    for n in range(9):
        (workspace / "shipyard" / "retry.py").write_text((workspace / "shipyard" / "retry.py").read_text()
                                                         + f"\n# {n}\n")
        git(workspace, "commit", "-qam", f"tune {n}")
    with Engine(workspace, index_dir=str(tmp_path / "git")) as eng:
        eng.index(vectors=False)
        r = eng.retrieve(TEST_QUESTION, ["shipyard/retry.py"])
        assert eng.retriever.ranker_for(r.state) is eng.ltr_history
        ans = eng.context(TEST_QUESTION, anchors=["shipyard/retry.py"])
        assert "ltr" in ans["timingsMs"] and ans["results"][0]["path"] == "tests/test_retry.py"
    # A folder the user names is their ranker everywhere: no history twin is loaded beside it.
    with Engine(workspace, index_dir=str(tmp_path / "git"), reranker=str(SHIPPED_LTR)) as eng:
        assert eng.ltr_history is None
        assert eng.retriever.ranker_for(eng.retrieve(TEST_QUESTION, ["shipyard/retry.py"]).state) is eng.ltr


def test_a_broken_history_ranker_is_an_error_in_health_and_the_plain_one_answers(
        workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "ltr-history"
    shutil.copytree(SHIPPED_LTR_HISTORY, folder)
    doc = json.loads((folder / "ltr.json").read_text())
    doc["members"][0]["b2"] += 0.5
    (folder / "ltr.json").write_text(json.dumps(doc))
    monkeypatch.setattr("delphi_ls.engine.SHIPPED_LTR_HISTORY", folder)
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "initial")
    with Engine(workspace, index_dir=str(tmp_path / "i")) as eng:
        eng.index(vectors=False)
        assert eng.ltr_history is None and eng.ltr is not None
        status = eng.health(check_staleness=False)["branches"]["rerank"]
        assert status.startswith("error:") and "history ranker failed to load" in status and "probe score" in status
        assert "reranker_history" in eng.problems
        r = eng.retrieve(TEST_QUESTION, ["shipyard/retry.py"])
        assert eng.retriever.ranker_for(r.state) is eng.ltr
        assert eng.context(TEST_QUESTION, anchors=["shipyard/retry.py"])["results"][0]["path"] == "tests/test_retry.py"
