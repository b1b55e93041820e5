"""Issue 18, cold indexing speed: the lexical store's faster writer writes what Whoosh's own writer
writes, batches commit without merging and a run ends with one tiered merge, and none of it changes
what a search finds. Real Whoosh indexes in tmp_path, real engines over small real workspaces."""

from __future__ import annotations

from pathlib import Path

from whoosh import index as windex
from whoosh.writing import SegmentWriter

from delphi_ls import Engine
from delphi_ls.indexing import pipeline
from delphi_ls.stores.lexical import LexicalStore, _tiers_to_merge, schema
from tests.lexical_pin import whoosh_store_only  # noqa: F401  (these tests read Whoosh's own files)

DOCS = [
    ("a1", "src/http/client.py", "code", "def send_request(url, retries):\n    return HttpClient(url).send(retries)",
     ["send_request"]),
    ("a2", "src/http/client.py", "code", "class HttpClient:\n    def send(self, n): pass\n" * 3, ["HttpClient", "send"]),
    ("b1", "tests/test_client.py", "test", "def test_send_request_retries():\n    assert send_request('x', 3)",
     ["test_send_request_retries"]),
    ("c1", "docs/usage.md", "doc", "Send a request with retries. " * 20, []),
    ("d1", "src/util/strings.py", "code", "def camelCaseSplit(s):\n    return s", ["camelCaseSplit"]),
]


def _postings(folder: Path) -> dict[tuple[str, bytes], list]:
    """Every term's postings (doc id, weight) and its stored length bounds, by field and term."""
    ix = windex.open_dir(str(folder))
    out: dict[tuple[str, bytes], list] = {}
    with ix.searcher() as s:
        r = s.reader()
        ids = {d: f["id"] for d, f in r.iter_docs()}
        for field, text in r.all_terms():
            if field in ("id", "path", "kind"):
                continue
            ti = r.term_info(field, text)
            m = r.postings(field, text)
            posts = []
            while m.is_active():
                posts.append((ids[m.id()], m.weight()))
                m.next()
            out[(field, text)] = [sorted(posts), ti.min_length(), ti.max_length(), ti.max_weight()]
    ix.close()
    return out


def test_bulk_writer_writes_what_whoosh_writes(tmp_path: Path):
    ours = LexicalStore(tmp_path / "ours")
    w = ours.writer()
    for d in DOCS:
        LexicalStore.add_chunk(w, *d)
    w.commit()
    ours.close()
    (tmp_path / "theirs").mkdir()
    theirs = windex.create_in(str(tmp_path / "theirs"), schema())
    w = SegmentWriter(theirs, limitmb=256)
    for d in DOCS:
        LexicalStore.add_chunk(w, *d)
    w.commit()
    theirs.close()
    a, b = _postings(tmp_path / "ours"), _postings(tmp_path / "theirs")
    assert a == b
    # The length bounds are really there (a writer that skipped them would write 0 for every term).
    assert any(v[1] > 1 for v in a.values())


def test_tiers():
    assert _tiers_to_merge([3, 5, 9], 4) == []
    # Four segments of tier 1 (4..15 documents) merge; the large one stays.
    assert _tiers_to_merge([4, 7, 100, 15, 8], 4) == [[0, 1, 3, 4]]
    assert _tiers_to_merge([1, 2, 3, 1, 20, 30, 40, 50], 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_batches_commit_without_merging_and_the_run_merges_by_tiers(tmp_path: Path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    for i in range(40):
        (ws / "pkg" / f"mod{i:02d}.py").write_text(
            f'"""Module {i}."""\n\ndef handler_{i}(request):\n    return route_request(request, {i})\n')
    (ws / "pkg" / "router.py").write_text("def route_request(request, n):\n    return n\n")
    # Small batches so that this small workspace commits many segments, as a large one would.
    monkeypatch.setattr(pipeline, "FIRST_BATCH_FILES", 2)
    monkeypatch.setattr(pipeline, "BATCH_FILES", 2)
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off")
    try:
        ind = eng._indexer()
        ind.index_lexical()
        sizes = eng.lexical.segment_sizes()
        docs = eng.lexical.doc_count()
        assert len(sizes) == 21 and sum(sizes) == docs  # one segment per batch: nothing merged during the run
        hits_before = sorted(eng.lexical.search_terms(["route_request", "handler_7"], 50))
        merged = ind.finish_lexical()
        after = eng.lexical.segment_sizes()
        assert merged >= 16 and len(after) == len(sizes) - merged + 1 and sum(after) == docs
        eng.lexical.refresh()
        hits_after = sorted(eng.lexical.search_terms(["route_request", "handler_7"], 50))
        # The same documents. Scores move a little: a Whoosh merge sums the field lengths again from
        # their one-byte forms, so the average length shifts (its own default policy did the same at
        # every commit that merged).
        assert [h[:2] for h in hits_after] == [h[:2] for h in hits_before]
        assert all(abs(a[2] - b[2]) <= 0.1 * b[2] for a, b in zip(hits_after, hits_before, strict=True))
        # An edit of one file later: its segment stays small and unmerged until its tier fills up.
        (ws / "pkg" / "mod03.py").write_text("def handler_3(request):\n    return 'edited'\n")
        eng.index()
        assert len(eng.lexical.segment_sizes()) == len(after) + 1
        assert {p for _i, p, _s in eng.lexical.search_terms(["edited"], 10)} == {"pkg/mod03.py"}
        assert "pkg/mod03.py" not in {p for _i, p, _s in eng.lexical.search_terms(["route_request"], 50)}
    finally:
        eng.close()
