"""BM25 parity (issue 19, session 8): tantivy scores the engine's BM25 queries as Whoosh does.

Both stores are filled with the same documents of a small real workspace; tantivy with ``bm25_scoring =
"whoosh"`` must give Whoosh's scores (exactly on the content field, where no boost is involved; the same
order of files over every field), and tantivy's own scoring must not (so these tests can tell them apart).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.settings import Settings, SettingsError
from delphi_ls.stores.lexical import LexicalStore, open_lexical
from delphi_ls.stores.tantivy_store import TantivyStore, tantivy_idf, whoosh_idf

# Short documents (field lengths below 40 tokens: both stores keep those lengths exactly) with words common
# and rare, repeated and not, in the content, symbols and path fields.
DOCS = [
    ("shipyard/retry.py", "class RetryPolicy delay attempt backoff backoff jitter", ["RetryPolicy", "delay_for"]),
    ("shipyard/uploads.py", "upload artifact client put blob retry with backoff", ["upload_artifact"]),
    ("shipyard/scheduler.py", "heapq queue job submit next job queue retry", ["BuildScheduler", "submit", "next_job"]),
    ("shipyard/config.py", "settings load toml file path default retry count", ["load_settings"]),
    ("shipyard/cli.py", "command line parse flags help output usage", ["main", "parse_flags"]),
    ("tests/test_retry.py", "test delay retry policy attempt three equals eight", ["test_delay"]),
    ("tests/test_uploads.py", "test upload artifact fake client retry", ["test_upload"]),
    ("docs/retry.md", "retries use exponential backoff with jitter between attempts", []),
]
QUERIES = [["retry", "backoff"], ["delay", "attempt", "jitter"], ["queue", "job"], ["retry"], ["upload", "client", "retry"],
           ["help", "usage", "flags"]]


def _fill(store, docs=DOCS) -> None:
    w = store.writer()
    for i, (path, text, symbols) in enumerate(docs):
        store.add_chunk(w, f"{path}#{i}", path, "test" if path.startswith("tests/") else "code", text, symbols)
    w.commit()
    store.refresh()


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[LexicalStore, TantivyStore]:
    base = tmp_path_factory.mktemp("parity")
    wh, tv = LexicalStore(base / "whoosh"), TantivyStore(base / "tantivy")
    _fill(wh)
    _fill(tv)
    yield wh, tv
    wh.close()
    tv.close()


def _scores(rows) -> dict[str, float]:
    return {cid: s for cid, _p, s in rows}


def test_idf_formulas_are_the_libraries_own(stores):
    """whoosh_idf is Whoosh's (its weighting model's idf on this index), tantivy_idf is what tantivy uses
    (a one-term query on a one-term content field scores idf * (K1+1) * tf / (tf + K1 * norm))."""
    wh, tv = stores
    s = wh.searcher()
    n, df = s.doc_count_all(), s.doc_frequency("content", "retry")
    assert s.weighting.idf(s, "content", "retry") == pytest.approx(whoosh_idf(n, df))
    import json

    import tantivy

    ts = tv.searcher()
    q = tantivy.Query.term_query(tv.ix.schema, "content", "retry")
    explained = json.loads(q.explain(ts, ts.search(q, 1).hits[0][1]).to_json())
    idf = next(d["value"] for d in explained["details"] if d["description"].startswith("idf"))
    assert idf == pytest.approx(tantivy_idf(ts.num_docs, ts.doc_freq("content", "retry")), rel=1e-5)
    assert abs(whoosh_idf(ts.num_docs, df) - idf) > 0.5  # the two differ: the conversion is not a no-op


def test_content_scores_equal_whooshs(stores):
    """On the content field (no field boost) Whoosh's idf is all that differs: put in, the scores match."""
    wh, tv = stores
    for terms in QUERIES:
        w = _scores(wh.search_terms(terms, 50, fields=("content",)))
        t = _scores(tv.search_terms(terms, 50, fields=("content",), scoring="whoosh"))
        assert set(t) == set(w), terms
        for cid, score in w.items():
            assert t[cid] == pytest.approx(score, rel=1e-4), (terms, cid)


def test_tantivys_own_scoring_differs(stores):
    """The contrast: Lucene's idf gives other scores (and, for a common word beside a rare one, another
    balance), so the test above could fail."""
    wh, tv = stores
    w = _scores(wh.search_terms(["retry", "backoff"], 50, fields=("content",)))
    t = _scores(tv.search_terms(["retry", "backoff"], 50, fields=("content",), scoring="tantivy"))
    assert any(abs(t[c] - s) / s > 0.2 for c, s in w.items())


def _files(rows) -> list[str]:
    """Files by best chunk; equal scores (to float32's precision, tantivy's) in path order, as neither
    store's tie order is the other's."""
    seen: list[str] = []
    for _cid, p, _s in sorted(rows, key=lambda r: (-round(r[2], 4), r[1])):
        if p not in seen:
            seen.append(p)
    return seen


def test_all_fields_rank_as_whoosh(stores):
    """Over content, symbols and path (boosts 1, 2, 1.5), Whoosh's files in Whoosh's order, scores within
    a few percent (a boost is put in as its worth for a term seen once in a field of average length)."""
    wh, tv = stores
    for terms in QUERIES:
        w_rows = wh.search_terms(terms, 50)
        t_rows = tv.search_terms(terms, 50, scoring="whoosh")
        assert _files(t_rows) == _files(w_rows), terms
        w, t = _scores(w_rows), _scores(t_rows)
        for cid, score in w.items():
            assert t[cid] == pytest.approx(score, rel=0.1), (terms, cid)


def test_weights_scale_a_terms_score_in_both_stores(stores):
    """``weights`` (what pseudo-relevance feedback adds) multiply a term's score alike in both stores."""
    wh, tv = stores
    for store, kw in ((wh, {}), (tv, {"scoring": "whoosh"})):
        one = _scores(store.search_terms(["jitter"], 50, **kw))
        half = _scores(store.search_terms(["jitter"], 50, weights={"jitter": 0.5}, **kw))
        assert one and set(one) == set(half)
        for cid, s in one.items():
            assert half[cid] == pytest.approx(s / 2, rel=1e-4)


def test_setting_reaches_the_store(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "retry.py").write_text("def retry_with_backoff(fn):\n    return fn()\n")
    assert Settings().bm25_scoring == "whoosh"
    with pytest.raises(SettingsError, match="bm25_scoring"):
        Settings.load(overrides={"bm25_scoring": "lucene"}, env={}, user_config=tmp_path / "none.toml")
    for scoring in ("whoosh", "tantivy"):
        with Engine(ws, index_dir=str(tmp_path / f"idx-{scoring}"), vectors=False, reranker="off",
                    lexical_store="tantivy", bm25_scoring=scoring) as eng:
            assert eng.lexical.scoring == scoring
            eng.index()
            assert eng.context("retry backoff", limit=3)["results"][0]["path"] == "pkg/retry.py"
    assert open_lexical(tmp_path / "x", "tantivy", "tantivy").scoring == "tantivy"


def test_idf_counts_deleted_documents_as_tantivy_does(tmp_path: Path):
    """Re-indexed files leave deleted documents in tantivy's frequencies (and its N) until a merge: the
    conversion must use the same N, or a word in every document gets a negative weight."""
    tv = TantivyStore(tmp_path / "tantivy")
    w = tv.writer()
    for i in range(10):
        tv.add_chunk(w, f"a{i}", f"f{i}.py", "code", "retry backoff common", [])
    w.commit()
    w = tv.writer()  # six files re-indexed: their old documents are deleted, the new ones added
    tv.delete_paths(w, [f"f{i}.py" for i in range(6)])
    for i in range(6):
        tv.add_chunk(w, f"b{i}", f"f{i}.py", "code", "retry common", [])
    w.commit()
    tv.refresh()
    s = tv.searcher()
    n = sum(tv.segment_sizes())
    assert s.num_docs == 10 and n > s.num_docs  # the case: deleted documents still counted
    # "retry": in every document, deleted ones too (df > live count); "backoff": in the four files not
    # re-indexed and in deleted documents (df between the live count and N).
    for term, live in (("retry", 10), ("backoff", 4)):
        df = s.doc_freq("content", term)
        own = _scores(tv.search_terms([term], 50, fields=("content",), scoring="tantivy"))
        conv = _scores(tv.search_terms([term], 50, fields=("content",), scoring="whoosh"))
        assert set(own) == set(conv) and len(own) == live
        for cid, score in own.items():
            assert conv[cid] > 0
            assert conv[cid] == pytest.approx(score * whoosh_idf(n, df) / tantivy_idf(n, df), rel=1e-4), term
    tv.close()
