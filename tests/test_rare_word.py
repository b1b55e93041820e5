"""A question of one word that few chunks hold: the files holding it come first, and the preview shows the line
that holds it. At 100,000 files a word appended to a Java file (bench.reindex's check, session 47) came third:
the learned ranker, trained on whole change descriptions, put a file of similar-looking random words and
`renderer.ts` (both found by the vector branch alone) above the one file holding it, and the preview showed the
interface's declaration (line 27) instead of the word's line (75)."""

from __future__ import annotations

import random

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval.query import analyse
from delphi_ls.retrieval.retriever import RARE_WORD_CHUNKS, one_word, rare_word_first

PARAMS = ("package app;\n\n/** The parameters of an operation. */\npublic interface Params extends Iterable<String> {\n\n"
          "\tint count();\n\n\tboolean isEmpty();\n}\n\n// qxvorbitalclamp\n")


@pytest.fixture(scope="module")
def eng(tmp_path_factory: pytest.TempPathFactory):
    ws = tmp_path_factory.mktemp("ws")
    (ws / "src").mkdir()
    (ws / "src" / "Params.java").write_text(PARAMS, encoding="utf-8")
    rnd = random.Random(3)
    for i in range(6):  # similar-looking words, none of them the one asked: what a vector finds alike
        words = " ".join("qxv" + "".join(rnd.choice("orbitalcmp") for _ in range(9)) for _ in range(40))
        (ws / "src" / f"noise{i}.py").write_text(f"# generated table {i}\nWORDS = '''{words}'''\n", encoding="utf-8")
    (ws / "src" / "env.py").write_text("import os\n\n\ndef load():\n    if os.environ.get('APP_SKIP_DOTENV'):\n"
                                       "        return {}\n    return read_dotenv('.env')\n", encoding="utf-8")
    (ws / "src" / "qxvfolder").mkdir()
    for name in ("alpha.py", "beta.py"):  # the word in their path only
        (ws / "src" / "qxvfolder" / name).write_text(f"def {name[:-3]}():\n    return 1\n", encoding="utf-8")
    (ws / "src" / "notes.py").write_text("# see the qxvfolder helpers\nNOTE = 1\n", encoding="utf-8")
    for i in range(RARE_WORD_CHUNKS + 2):  # a word more chunks hold than a rare one
        (ws / "src" / f"mod{i}.py").write_text(f"def handler_{i}(request):\n    return request.args.get('page', {i})\n",
                                               encoding="utf-8")
    with Engine(ws, index_dir=str(tmp_path_factory.mktemp("idx"))) as e:
        e.index()
        yield e


def test_the_files_holding_a_rare_word_lead_whatever_order_the_rankers_gave(eng: Engine) -> None:
    r = eng.retrieve("qxvorbitalclamp")
    assert any(f.path == "src/Params.java" for f in r.fused)
    # The order the learned ranker gave at 100,000 files: files only similar in meaning first.
    shuffled = sorted(r.fused, key=lambda f: f.path == "src/Params.java")
    assert shuffled[0].path != "src/Params.java"
    assert [f.path for f in rare_word_first(r, shuffled, [])][0] == "src/Params.java"
    # An anchored question is asked around its file: its order is the rankers'.
    assert rare_word_first(r, shuffled, ["src/mod1.py"]) == shuffled


def test_a_word_many_chunks_hold_keeps_the_rankers_order(eng: Engine) -> None:
    r = eng.retrieve("request")
    shuffled = list(reversed(r.fused))
    assert rare_word_first(r, shuffled, []) == shuffled


def test_a_one_word_question_is_answered_and_previewed_at_the_word(eng: Engine) -> None:
    ans = eng.context("qxvorbitalclamp", limit=5)
    top = ans["results"][0]
    assert top["path"] == "src/Params.java"
    first = top["spans"][0]
    # The chunk is labelled by the interface the question does not name; the preview is the word's own line.
    assert first["previewLine"] == 11 and first["preview"] == "// qxvorbitalclamp", first


@pytest.mark.parametrize("question, word", [
    ("qxvorbitalclamp", "qxvorbitalclamp"), ("FLASK_SKIP_DOTENV", "flask_skip_dotenv"),
    ("where is FLASK_SKIP_DOTENV used?", "flask_skip_dotenv"), ("`registerBlueprint`", "registerblueprint"),
    ("retry policy", None), ("where is FLASK_SKIP_DOTENV read from the environment", None),
])
def test_one_word_is_a_lone_word_or_a_lone_identifier(question: str, word: str | None) -> None:
    assert one_word(analyse(question)) == word


def test_a_lone_identifier_puts_the_files_spelling_it_first(eng: Engine) -> None:
    # On flask, `FLASK_SKIP_DOTENV` answered `cli.py` first, which never spells it (found by its parts' words and
    # the graph), above the four files that do (a newcomer, session 47).
    r = eng.retrieve("APP_SKIP_DOTENV")
    shuffled = sorted(r.fused, key=lambda f: f.path == "src/env.py")
    assert shuffled[0].path != "src/env.py"
    assert [f.path for f in rare_word_first(r, shuffled, [])][0] == "src/env.py"


def test_a_word_only_in_paths_lifts_no_file(eng: Engine) -> None:
    # `delphi context . src` on requests lifted files whose path alone held the word (a review, session 47).
    r = eng.retrieve("qxvfolder")
    shuffled = sorted(r.fused, key=lambda f: f.path == "src/notes.py")
    got = [f.path for f in rare_word_first(r, shuffled, [])]
    assert got[0] == "src/notes.py"
    rest = [p for p in got if p.startswith("src/qxvfolder/")]
    assert [p for p in [f.path for f in shuffled] if p.startswith("src/qxvfolder/")] == rest
    assert all(got.index(p) > 0 for p in rest)
