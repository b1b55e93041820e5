"""Golden ranking: known answers on the fixture workspace must stay in the top 3."""

import pytest

from delphi_ls import Engine

GOLDEN = [
    ("where is TLS set up for the gRPC proxy?", [], "proxy/grpc_proxy.go"),
    ("exponential backoff with jitter between upload attempts", [], "shipyard/retry.py"),
    ("which tests cover the retry policy?", ["shipyard/retry.py"], "tests/test_retry.py"),
    ("which tests cover grpc_proxy.go?", [], "proxy/grpc_proxy_test.go"),
    ("NewGrpcProxy returns an error", [], "proxy/grpc_proxy.go"),
    ("How is formatDuration implemented?", [], "web/src/format.js"),
    ("topological_order of the BuildGraph", [], "engine/src/lib.rs"),
    ("content-addressed cache key from bytes", [], "jvm/src/main/java/dev/shipyard/CacheKey.java"),
    ('Traceback (most recent call last):\n  File "/home/ci/shipyard/shipyard/retry.py", line 27, in with_backoff\n'
     '    raise RuntimeError("upload failed after all retry attempts")\nRuntimeError: upload failed after all retry attempts',
     [], "shipyard/retry.py"),
]


@pytest.mark.parametrize("question,anchors,answer", GOLDEN)
def test_known_answer_in_top3(engine: Engine, question, anchors, answer):
    res = engine.context(question, anchors=anchors)
    top = [r["path"] for r in res["results"][:3]]
    assert answer in top, (top, res["query"])


def test_test_question_is_answered_by_tests_not_the_changelog(engine: Engine):
    res = engine.context("which tests cover the retry policy?", anchors=["shipyard/retry.py"])
    assert res["query"]["shape"] == "test"
    assert res["results"][0]["kind"] == "test"
    paths = [r["path"] for r in res["results"]]
    assert paths.index("CHANGELOG.md") > paths.index("tests/test_retry.py") + 3 if "CHANGELOG.md" in paths else True


def test_answer_says_why_and_where(engine: Engine):
    res = engine.context("NewGrpcProxy returns an error")
    r = next(r for r in res["results"] if r["path"] == "proxy/grpc_proxy.go")
    assert "symbol" in r["branches"] and "NewGrpcProxy" in r["why"]
    assert any(s["symbol"] == "NewGrpcProxy" for s in r["spans"])
    assert r["uri"].startswith("file://") and r["kind"] == "code"
    assert set(res["branchesReady"]) >= {"bm25", "vector", "symbol", "path", "trigram"}
    assert res["timingsMs"]["total"] > 0 and res["traceId"]


def test_trace_file_records_branches(engine: Engine, tmp_path):
    import json

    trace = tmp_path / "trace.jsonl"
    engine.context("exponential backoff", trace_file=trace)
    engine.context("grpc proxy tls", trace_file=trace)
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(lines) == 2
    assert lines[0]["params"]["query"] == "exponential backoff"
    assert lines[0]["branches"]["bm25"][0]["rank"] == 1 and lines[0]["final"]
    # A pasted log is traced as it was searched (head and tail), not whole: a 1 MB paste made a 1 MB line.
    engine.context("exponential backoff " + "x" * 100_000, trace_file=trace)
    last = json.loads(trace.read_text().splitlines()[-1])
    assert len(last["params"]["query"]) == 16_001 and last["query"]["cut"]["chars"] == 100_020


def test_budget_packing(engine: Engine):
    res = engine.context("exponential backoff retry", budget_tokens=300)
    assert 0 < res["packedTokens"] <= 300
    assert res["packed"][0]["path"] == res["results"][0]["path"]


def test_kinds_filter_and_draft(engine: Engine):
    res = engine.context("retry", kinds=["doc"])
    assert res["results"] and all(r["kind"] == "doc" for r in res["results"])
    res = engine.context("how do we wait between attempts?", draft="def delay_for(attempt): return base * 2 ** attempt")
    assert res["query"]["draftUsed"] is True
    res = engine.context("RetryPolicy.delay_for with_backoff", draft="def x(): pass")
    assert res["query"]["draftUsed"] is False  # identifier-heavy queries skip the draft


def test_workspace_symbols_and_related_tests(engine: Engine):
    syms = engine.symbols("grpcprox")
    assert syms[0]["name"] in ("GrpcProxy", "NewGrpcProxy")
    assert engine.symbols("RetryPolicy")[0]["path"] == "shipyard/retry.py"
    # A qualified name as a trace or a review writes it: the member, in that container (a newcomer, session 37).
    for q in ("RetryPolicy.delay_for", "RetryPolicy::delay_for", "shipyard.retry.RetryPolicy.delay_for"):
        got = engine.symbols(q)
        assert [(s["name"], s["container"], s["path"]) for s in got[:1]] == [("delay_for", "RetryPolicy",
                                                                           "shipyard/retry.py")], q
    assert all(s["container"] == "RetryPolicy" for s in engine.symbols("RetryPolicy.__init__"))
    rel = engine.related_tests("shipyard/retry.py")
    assert rel[0]["path"] == "tests/test_retry.py"
    assert engine.related_tests("proxy/grpc_proxy.go")[0]["path"] == "proxy/grpc_proxy_test.go"
