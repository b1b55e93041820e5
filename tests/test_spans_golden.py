"""Golden spans: what an answer shows *inside* its files, pinned like the rankings (issue 17).

For every question of ``tests/test_rank_golden.py`` (same fixtures), ``tests/golden_spans/<fixture>/<slug>.txt``
holds, for the top 5 files of the default answer, the spans each lists (lines, symbol, why) and the
context packed into 2,000 tokens (path, lines, why, tokens used). A change to span scoring or packing
shows here as a diff; one meant is made with

    pytest tests/test_spans_golden.py --update-goldens

and the rewritten files are reviewed beside the code. Vectors are off (HNSW answers vary by process).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from tests.test_rank_golden import BUILD, QUESTIONS, Q, _check

GOLDEN = Path(__file__).parent / "golden_spans"
TOP = 5
BUDGET = 600  # small: the fixtures' files are small, and whole files would hide the choice of spans


def render(q: Q, ans: dict) -> str:
    lines = [f"query: {q.query!r}"]
    if q.anchors:
        lines.append(f"anchors: {', '.join(q.anchors)}")
    for r in ans["results"][:TOP]:
        lines.append(f"{r['rank']:>2} {r['path']}")
        for sp in r["spans"]:
            lines.append(f"     {sp['startLine']}-{sp['endLine']}  {sp.get('symbol') or '-'}  "
                         f"(preview line {sp.get('previewLine', sp['startLine'])}): {sp.get('why', '')}")
    lines += ["", f"packed into {BUDGET} tokens: {ans['packedTokens']} used"]
    for p in ans["packed"]:
        lines.append(f"  {p['path']}:{p['startLine']}-{p['endLine']}  {p.get('why', '')}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for fixture, qs in QUESTIONS.items():
        base = tmp_path_factory.mktemp(f"spans-{fixture}")
        ws = BUILD[fixture](base / "ws")
        with Engine(ws, index_dir=str(base / "index"), vectors=False) as eng:
            eng.index()
            for q in qs:
                ans = eng.context(q.query, anchors=list(q.anchors), kinds=list(q.kinds) or None,
                                  budget_tokens=BUDGET)
                out[(fixture, q.name())] = render(q, dict(ans))
    return out


CASES = [(fixture, q) for fixture, qs in QUESTIONS.items() for q in qs]


@pytest.mark.parametrize("fixture,q", CASES, ids=[f"{f}/{q.name()}" for f, q in CASES])
def test_spans_match_golden(texts: dict[tuple[str, str], str], request: pytest.FixtureRequest, fixture: str,
                            q: Q) -> None:
    _check(GOLDEN / fixture / f"{q.name()}.txt", texts[(fixture, q.name())],
           request.config.getoption("--update-goldens"))
