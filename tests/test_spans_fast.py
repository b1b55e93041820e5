"""Span scoring written for speed (issue 17, session 8) gives exactly what the plain formulas give.

Each fast path in ``retrieval/spans.py`` and ``retrieval/packing.py`` is checked here against a plain
reference written out in the test (the code as it was before it was made fast), on the chunks of a small
real workspace indexed by the engine, to the bit: the golden spans pin a few questions, these pin the
arithmetic on every chunk.
"""

from __future__ import annotations

import math
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval import spans as S
from delphi_ls.retrieval.packing import MERGE_GAP, _cost, tokens_of
from delphi_ls.retrieval.query import analyse
from delphi_ls.stores.meta import ChunkRow

SERVER = '''"""A small HTTP server: routes, handlers and the request parser."""

import re

ROUTES = {}


def register_route(path, handler):
    """Add a route; the path may hold <name> parts."""
    ROUTES[path] = handler
    return handler


def find_route(path):
    for pattern, handler in ROUTES.items():
        if re.fullmatch(pattern.replace("<name>", "[^/]+"), path):
            return handler
    return None


class Request:
    """One parsed request: method, path, headers and the client's address."""

    def __init__(self, raw):
        self.method, self.path, self.headers = parse_request(raw)

    def client_ip(self, trusted_proxies=()):
        xff = self.headers.get("x-forwarded-for", "")
        for addr in reversed([a.strip() for a in xff.split(",") if a.strip()]):
            if addr not in trusted_proxies:
                return addr
        return self.headers.get("remote-addr")


def parse_request(raw):
    head, _, _body = raw.partition("\\r\\n\\r\\n")
    lines = head.split("\\r\\n")
    method, path, _version = lines[0].split(" ")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, path, headers


def serve(host="127.0.0.1", port=8080):
    """Serve forever: parse each request, find its route, call the handler."""
    raise NotImplementedError("a real server is out of scope here")
'''

TEST_SERVER = '''from server import Request, find_route, register_route


def test_client_ip_skips_trusted_proxies():
    req = Request("GET / HTTP/1.1\\r\\nX-Forwarded-For: 1.2.3.4, 10.0.0.1\\r\\n\\r\\n")
    assert req.client_ip(trusted_proxies=("10.0.0.1",)) == "1.2.3.4"


def test_register_and_find_route():
    register_route("/users/<name>", print)
    assert find_route("/users/ada") is print
'''

QUESTIONS = [
    ("client ip from x-forwarded-for should skip trusted proxies", []),
    ("register_route with a <name> part is not found by find_route", []),
    ("parse_request lowercases header names; add url api", []),
    ("Which tests cover this change? client_ip and parse_request", ["server.py"]),
]


@pytest.fixture(scope="module")
def eng(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("ws")
    (root / "server.py").write_text(SERVER)
    (root / "test_server.py").write_text(TEST_SERVER)
    e = Engine(root, index_dir=str(tmp_path_factory.mktemp("index")))
    e.index(vectors=False)
    yield e
    e.close()


def _plain_score(path: str, chunks: list[ChunkRow], sq: S.SpanQuery) -> list[tuple[float, float, list[str]]]:
    """The hand score as first written (one loop, idf and length term per word and chunk)."""
    counts = S._counts(chunks, sq)
    n = len(chunks)
    df: dict[str, int] = {}
    for cs in counts:
        for w in cs:
            df[w] = df.get(w, 0) + 1
    lengths = [max(len(c.text), 1) for c in chunks]
    avg = sum(lengths) / n
    out = []
    for c, cs, ln in zip(chunks, counts, lengths, strict=True):
        lex = 0.0
        contrib = []
        for w, tf in cs.items():
            weight = sq.words.get(w, S.W_TERM)
            idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) + 0.1
            v = weight * idf * tf * (S.K1 + 1) / (tf + S.K1 * (1 - S.B + S.B * ln / avg))
            lex += v
            contrib.append((v, w))
        defines = 0.0
        for sym in c.symbols:
            if sym.lower() in sq.words:
                defines += S.W_DEFINES * sq.words[sym.lower()] * (math.log(1 + n) + 0.1)
        contrib.sort(reverse=True)
        out.append((lex, defines, [w for _v, w in contrib]))
    return out


def _cases(eng: Engine) -> list[tuple[str, list[ChunkRow], S.SpanQuery]]:
    out = []
    for text, anchors in QUESTIONS:
        sq = S.SpanQuery.build(analyse(text), None, anchors, eng.meta)
        for path in ("server.py", "test_server.py"):
            out.append((path, eng.chunks(path), sq))
    return out


def test_score_is_the_plain_bm25_to_the_bit(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "LEARNED", None)
    seen = 0
    for path, chunks, sq in _cases(eng):
        got = S.score_chunks(path, chunks, sq)
        want = _plain_score(path, chunks, sq)
        assert [(g.lex, g.defines, g.matched) for g in got] == want
        assert [g.score for g in got] == [lex + 0.0 + d for lex, d, _m in want]
        seen += sum(1 for lex, _d, _m in want if lex > 0)
    assert seen >= 6  # the questions do name words of these files


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_learned_logit_is_the_feature_dot_product(eng: Engine, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    # Random weights (zeros among them), so a term dropped or summed out of order shows.
    w = tuple(0.0 if rng.random() < 0.15 else rng.uniform(-2, 2) for _ in S.FEATURES)
    monkeypatch.setattr(S, "LEARNED", None)
    for path, chunks, sq in _cases(eng):
        sc = S.score_chunks(path, chunks, sq)
        want = [sum(a * b for a, b in zip(w, row, strict=True)) for row in S.features(sc, sq)]
        assert S._learned_z(sc, sq, w) == want
    monkeypatch.setattr(S, "LEARNED", w)
    for path, chunks, sq in _cases(eng):
        sc = S.score_chunks(path, chunks, sq)
        want = [sum(a * b for a, b in zip(w, row, strict=True)) for row in S.features(sc, sq)]
        assert [s.score for s in sc] == [math.exp(max(min(z, 30.0), -30.0)) + 0.0 for z in want]


def test_learned_logit_of_another_width_falls_back_to_the_rows(eng: Engine) -> None:
    path, chunks, sq = _cases(eng)[0]
    sc = S.score_chunks(path, chunks, sq)
    with pytest.raises(ValueError):  # zip(strict=True): a model of the wrong width is an error, not a guess
        S._learned_z(sc, sq, (1.0, 2.0))


@pytest.mark.parametrize("text", [
    "def register_blueprint(self, bp):\n    return self._bp_list  # __init__ x_y_z\n",
    "Ünïcödé_name = café(ß)  # non-ASCII: the regex path\nplain_word another_one\n",
    "a__b _lead trail_ __dunder__ 9to5 x.y-z\tTAB\r\nCRLF",
    "",
])
def test_tokens_translate_path_is_the_regex_tokens(text: str) -> None:
    c = ChunkRow("fast-tokens-" + str(hash(text)), "f.py", 0, 1, 1, [], "code", "h", text)
    low = text.lower()
    want = Counter(re.findall(r"[a-z0-9_]+", low))
    for t in [t for t in want if "_" in t]:
        for part in t.split("_"):
            if part:
                want[part] += want[t]
    got = S._tokens(c, low)
    assert got == want and list(got) == list(want)


def _plain_best_line(sc: S.ScoredChunk, symbol: str | None) -> tuple[int, str]:
    c = sc.chunk
    lines = c.text.split("\n")
    top = [w for w in sc.matched[:5] if w in c.text.lower()]
    best, best_v = None, 0.0
    sym = symbol.lower() if symbol else None
    if sym and not S._TOKEN.fullmatch(sym):
        sym = None
    for i, ln in enumerate(lines):
        low = ln.lower()
        v = 0.0
        for k, w in enumerate(top):
            if w in low:
                v += 1.0 / (1 + k)
        if sym is not None and sym in low and S._defines(low, sym):
            v += 3.0
        if v > best_v:
            best, best_v = i, v
    if best is None:
        return c.start_line, _plain_preview(c)
    return c.start_line + best, lines[best].strip()[:160]


def _plain_preview(c: ChunkRow) -> str:
    return next((ln.strip() for ln in c.text.splitlines() if ln.strip()), "")[:160]


def test_best_line_is_the_line_walk(eng: Engine) -> None:
    checked = 0
    for path, chunks, sq in _cases(eng):
        for sc in S.score_chunks(path, chunks, sq):
            for sym in [None, "", "client_ip", "parse_request", "Request", "re.fullmatch", *sc.chunk.symbols]:
                assert S._best_line(sc, sym) == _plain_best_line(sc, sym)
                checked += 1
    assert checked > 50


@pytest.mark.parametrize("text", [
    "\n\n   \n  first real line  \nsecond\n",
    "x" * 3000 + "\nnext\n",
    " " * 2100 + "late start\n",
    "\n" * 2047 + "\r\nafter a CRLF split by the head\n",
    "abc" + " " * 3000 + "d\n",
    "\u2028\x0b\x0c  after odd separators\n",
    "   \n\t\n",
    "",
])
def test_preview_reads_the_head_as_the_whole_text(text: str) -> None:
    c = ChunkRow("p", "f.py", 0, 1, 1, [], "code", "h", text)
    assert S._preview(c) == _plain_preview(c)


def test_pack_cost_is_the_tokens_of_text_and_separator() -> None:
    for n in range(0, 40):
        c = ChunkRow("c", "f.py", 0, 1, 1, [], "code", "h", "y" * n)
        sc = S.ScoredChunk(c, 1.0, [], [])
        assert _cost(sc) == tokens_of(c.text + "\n" * (1 + MERGE_GAP))


def test_context_answers_with_the_fast_paths(eng: Engine, tmp_path: Path) -> None:
    """The whole answer: the first listed span of server.py for a client-ip question is the method that
    reads the header, and every packed span's text is the file's lines."""
    ans = eng.context("client ip should skip trusted proxies in x-forwarded-for", budget_tokens=400, limit=5)
    top = next(r for r in ans["results"] if r["path"] == "server.py")
    first = top["spans"][0]
    lines = SERVER.split("\n")
    assert "client_ip" in "\n".join(lines[first["startLine"] - 1: first["endLine"]])
    assert first["preview"].startswith("def client_ip")
    assert ans["packedTokens"] <= 400
    for p in ans["packed"]:
        if p["path"] == "server.py":
            assert p["text"].rstrip("\n") == "\n".join(lines[p["startLine"] - 1: p["endLine"]]).rstrip("\n")


@pytest.mark.parametrize("seed", range(4))
def test_score_is_the_plain_bm25_on_random_files(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks of random lengths and word counts: every length ratio and tf the formula meets."""
    rng = random.Random(seed)
    vocab = ["route", "handler", "client", "proxy", "parse_request", "url", "api", "header", "x_forwarded"]
    chunks = []
    for i in range(40):
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 30))]
        filler = " ".join("z" * rng.randint(1, 9) for _ in range(rng.randint(0, 60)))
        text = f"def f_{i}():\n    " + " ".join(words) + "\n    " + filler + "\n"
        chunks.append(ChunkRow(f"rand-{seed}-{i}", "r.py", i, 3 * i + 1, 3 * i + 3, [f"f_{i}", "parse_request"][: 1 + i % 2],
                               "code", f"h{i}", text))
    q = analyse("the route handler drops the client proxy header for parse_request; url api")
    sq = S.SpanQuery.build(q)
    monkeypatch.setattr(S, "LEARNED", None)
    got = S.score_chunks("r.py", chunks, sq)
    assert [(g.lex, g.defines, g.matched) for g in got] == _plain_score("r.py", chunks, sq)
    assert sum(1 for g in got if g.lex > 0) >= 20


_SEED_SCRIPT = """
import sys
from delphi_ls.retrieval import spans as S
from delphi_ls.retrieval.query import analyse
from delphi_ls.stores.meta import ChunkRow
words = "add api bar baz cat dog egg fig get hat ink jam key log map net".split()
chunks = []
for i in range(12):
    text = " ".join(w for k, w in enumerate(words) for _ in range((i * 7 + k * 3) % 5)) + " filler " * i
    chunks.append(ChunkRow(f"s{i}", "s.py", i, i + 1, i + 1, [], "code", f"h{i}", text))
sq = S.SpanQuery.build(analyse("fix " + " ".join(words)))
S.LEARNED = None
print([repr(s.lex) for s in S.score_chunks("s.py", chunks, sq)])
"""


def test_scores_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Short words are summed in the question's order: before, a set's order (which moves with each
    process's hash seed) set the BM25 sum's order and its last bits differed between processes."""
    outs = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        got = subprocess.run([sys.executable, "-c", _SEED_SCRIPT], env=env, capture_output=True, text=True,
                             check=True, cwd=tmp_path)
        outs.add(got.stdout)
    assert len(outs) == 1


def _many_files(root: Path, n: int = 45) -> None:
    """``n`` modules that all name the question's words (so an answer lists every one), of 1 to 4 chunks,
    beside an empty file (no chunks)."""
    for i in range(n):
        funcs = [f"def retry_backoff_{i}_{k}(attempt):\n    \"\"\"Retry with backoff, attempt {k}.\"\"\"\n"
                 f"    return min(2 ** attempt, {10 + k})\n" for k in range(1 + i % 4)]
        (root / f"mod{i:02d}.py").write_text("import time\n\n\n" + "\n\n".join(funcs))
    (root / "empty.py").write_text("")


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("many")
    _many_files(root)
    e = Engine(root, index_dir=str(tmp_path_factory.mktemp("many-index")))
    e.index(vectors=False)
    yield e
    e.close()


def test_chunks_of_many_paths_are_each_files_chunks(many: Engine) -> None:
    paths = [f"mod{i:02d}.py" for i in range(45)] + ["empty.py", "not/indexed.py", "mod03.py"]
    got = many.meta.chunks_of_paths(paths)
    assert got == {p: many.meta.chunks_of(p) for p in paths if many.meta.chunks_of(p)}
    assert sum(len(v) > 1 for v in got.values()) >= 20  # files of several chunks, in their order
    assert many.meta.first_chunks(paths) == {p: many.meta.chunks_of(p)[0] for p in paths if many.meta.chunks_of(p)}
    assert many.meta.chunks_of_paths([]) == {} and many.meta.first_chunks([]) == {}


def test_evidence_spans_are_the_legacy_spans(many: Engine) -> None:
    """The results below SCORED_FILES: one batched read gives each file's legacy spans, for evidence that
    is real, reordered, longer than three, unknown (a chunk since replaced) or absent."""
    rng = random.Random(7)
    files = []
    for i in range(45):
        p = f"mod{i:02d}.py"
        ids = [c.id for c in many.meta.chunks_of(p)]
        rng.shuffle(ids)
        shape = i % 5
        ev = ([] if shape == 0 else ["gone-" + p] if shape == 1 else ids + ["gone-" + p] if shape == 2 else
              ["gone-" + p] + ids if shape == 3 else ids[:1] + [f"mod{(i + 1) % 45:02d}.py-other"])
        files.append((p, ev))
    files += [("empty.py", []), ("not/indexed.py", ["x"])]
    asked = {"retry", "backoff", "retry_backoff_3_0"}
    want = [S.legacy_spans(many.meta, p, ev, asked) for p, ev in files]
    assert S.evidence_spans(many.meta, files, asked) == want
    assert sum(1 for w in want if w) == 45 and want[-1] == [] and want[-2] == []


def test_an_answer_reads_its_spans_in_a_few_queries(many: Engine) -> None:
    """Every chunk read of a 100-result answer (branches, spans, packing) stays a handful of queries, not
    one or two per listed file: the spans of ranks 21+ and the top 20's chunks are read in batches."""
    q = "retry backoff attempt"
    many.context(q, limit=100, budget_tokens=2000)  # warm: the view's chunk lines are read once
    seen: list[str] = []
    many.meta.db.set_trace_callback(seen.append)
    try:
        ans = many.context(q, limit=100, budget_tokens=2000)
    finally:
        many.meta.db.set_trace_callback(None)
    assert len(ans["results"]) >= 40
    reads = [s for s in seen if "FROM chunks" in s]
    assert len(reads) <= 4, reads
