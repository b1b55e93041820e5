"""The path branch's text search over stripped paths (retrieval/path_index.py): the rows it finds are the
rows whose stripped path holds the term, and the branch ranks as a check of every path did (the reference
below is the loop it replaced, 176 ms a query at 100k files)."""

from __future__ import annotations

import os
import pickle
import random

import pytest

from delphi_ls.core.tokens import stripped
from delphi_ls.retrieval.branches.path import PathBranch
from delphi_ls.retrieval.context import ChunkLines, IndexView, SearchContext, SymbolTable
from delphi_ls.retrieval.path_index import StrippedPaths
from delphi_ls.retrieval.query import analyse
from delphi_ls.settings import Settings

WORDS = ["config", "retry", "proxy", "grpc", "test", "tests", "util", "auto", "load", "loader", "cfg", "x"]


def _paths(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = set()
    while len(out) < n:
        depth = rng.randint(0, 3)
        parts = ["_".join(rng.sample(WORDS, rng.randint(1, 2))) for _ in range(depth)]
        name = rng.choice(["", "test_", "Base"]) + rng.choice(WORDS) + rng.choice(["", "_loader", "Config"])
        out.add("/".join([*parts, name + rng.choice([".py", ".go", "_test.go", ".ts"])]))
    return sorted(out, key=lambda p: rng.random())


def _rows(paths: list[str]) -> list[tuple[str, str, str]]:
    return [(p, stripped(p), stripped(os.path.basename(p))) for p in paths]


@pytest.mark.parametrize("seed", range(5))
def test_rows_with_is_every_row_holding_the_term(seed: int) -> None:
    rows = _rows(_paths(300, seed))
    sp = StrippedPaths(rows)
    for term in [*WORDS, "gtest", "configconfig", "py", "go", "oadert", "zzz", rows[0][1], rows[-1][1][-5:]]:
        want = [i for i, r in enumerate(rows) if term in r[1]]
        assert sp.rows_with(term).tolist() == want, term
        assert sp.rows_with(term).tolist() == want  # kept
        assert sp.rows_with(term, basename=True).tolist() == [i for i, r in enumerate(rows) if term in r[2]]


def test_few_terms_are_kept_and_a_pickle_drops_them() -> None:
    sp = StrippedPaths(_rows(_paths(50, 1)))
    for i in range(300):
        sp.rows_with(f"t{i}")
    assert len(sp._found) <= 128
    again = pickle.loads(pickle.dumps(sp))
    assert again == sp and again._found == {} and again._text == {}
    assert again.rows_with("config").tolist() == sp.rows_with("config").tolist()


def _reference(question: str, files: dict[str, str], cap: int, depth: int) -> list[tuple[str, float, str]]:
    """The loop the text search replaced, as it was (named paths left out: see the frame test below)."""
    q = analyse(question)
    terms = sorted(t for t in {stripped(t) for t in q.terms + q.identifiers} if len(t) >= 3)
    scores: dict[str, float] = {}
    why: dict[str, str] = {}
    for path in files:
        spath, sbase = stripped(path), stripped(os.path.basename(path))
        s, matched = 0.0, []
        for t in terms:
            if t in sbase:
                s += 2.0 * len(t) / max(len(sbase), 1) + 1.0
                matched.append(t)
            elif t in spath:
                s += 0.5
                matched.append(t)
        if s >= 1.0 and s > scores.get(path, 0):
            scores[path] = s
            why.setdefault(path, "path matches " + ", ".join(f"'{m}'" for m in matched[:3]))
    per_dir: dict[str, int] = {}
    out = []
    for p, s in sorted(scores.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0])):
        d = os.path.dirname(p)
        if per_dir.get(d, 0) >= cap:
            continue
        per_dir[d] = per_dir.get(d, 0) + 1
        out.append((p, s, why[p]))
        if len(out) >= depth:
            break
    return out


def _ctx(files: dict[str, str], settings: Settings) -> SearchContext:
    by_base: dict[str, list[str]] = {}
    for p in files:
        by_base.setdefault(os.path.basename(p), []).append(p)
    view = IndexView(files, SymbolTable.of([], files), _rows(list(files)), ChunkLines(None, {}), by_base, None)
    return SearchContext(settings, None, None, None, None, view, [], depth=25)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
def test_the_branch_ranks_as_the_loop_it_replaced(seed: int) -> None:
    files = {p: "code" for p in _paths(400, seed)}
    settings = Settings(path_cap_per_dir=3)
    c = _ctx(files, settings)
    for question in ["where is the config loader", "grpc proxy retry", "which tests cover auto_util", "x",
                     "BaseConfig loader retry util grpc", "where is testConfig set"]:
        got = [(h.path, h.score, h.note) for h in PathBranch().search(analyse(question), c)]
        assert got == _reference(question, files, 3, 25), question


def test_a_named_file_that_also_matches_keeps_the_larger_score_and_the_named_line() -> None:
    files = {"svc/retry/retry_retry_policy.py": "code", "svc/other.py": "code", "a/retry.py": "code"}
    c = _ctx(files, Settings())
    hits = PathBranch().search(analyse('File "/x/svc/other.py", line 3\nretry retry_policy'), c)
    top = {h.path: h for h in hits}
    assert top["svc/other.py"].score == 10.0 and top["svc/other.py"].note.startswith("named in the question")
    assert [h.path for h in hits][0] == "svc/other.py" and len({h.path for h in hits}) == len(hits)


def test_another_machines_path_sharing_only_a_common_file_name_names_no_file() -> None:
    """A user's `/home/ci/src/myapp/cmd/server/main.go` in a panic was "named in the question" as chi's
    `_examples/fileserver/main.go` (a newcomer pasting traces, session 44): of several files of that name, one that
    shares no folder with the path is not it. A unique name (a checkout elsewhere) and a shared folder still are."""
    files = {"_examples/fileserver/main.go": "code", "_examples/rest/main.go": "code", "tree.go": "code",
             "cmd/server/main.go": "code"}
    c = _ctx(files, Settings())
    assert c.resolve_mention("/home/ci/src/myapp/cmd/server/main.go") == ["cmd/server/main.go"]
    del files["cmd/server/main.go"]
    c = _ctx(files, Settings())
    assert c.resolve_mention("/home/ci/src/myapp/cmd/server/main.go") == []
    assert c.resolve_mention("/home/ci/build/chi/tree.go") == ["tree.go"]
    assert c.resolve_mention("C:\\Users\\x\\app\\main.go".replace("\\", "/")) == []
    assert sorted(c.resolve_mention("main.go")) == ["_examples/fileserver/main.go", "_examples/rest/main.go"]
    notes = [h.note for h in PathBranch().search(analyse("panic\n\t/home/ci/src/myapp/cmd/server/main.go:12 +0x1d\n"), c)]
    assert not any(n.startswith("named in the question") for n in notes), notes


def test_a_named_file_whose_words_score_higher_keeps_that_score_and_the_named_line() -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]
    name = "pkg/" + "_".join(words) + ".py"
    files = {name: "code", "pkg/other.py": "code"}
    hits = PathBranch().search(analyse(f'File "/x/{name}", line 3\n' + " ".join(words)), _ctx(files, Settings()))
    assert hits[0].path == name and hits[0].score > 10.0 and hits[0].note.startswith("named in the question")
    assert [h.path for h in hits].count(name) == 1


def test_a_term_across_the_folder_and_the_basename_is_found() -> None:
    rows = _rows(["grpc/proxy.go", "grpcp/roxy.go", "x/grpcproxy.go", "other/proxy.go", "g/r/p/c.go"])
    sp = StrippedPaths(rows)
    assert sp.rows_with("grpcproxy").tolist() == [0, 1, 2]  # folder|basename, split elsewhere, basename alone
    assert sp.rows_with("grpcgo").tolist() == [4]  # over several folders, then the basename
    # Rows whose stripped path does not end with their basename (not made by the view): the whole paths are read.
    odd = StrippedPaths([("a/b.py", "zzz", "bpy"), ("c/d.py", "cdpy", "dpy")])
    assert odd.rows_with("zz").tolist() == [0] and odd.rows_with("cd").tolist() == [1]
