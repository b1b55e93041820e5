"""Issue 19, session 9: a declaration below the file that implements it, and a squash-merge's leftovers
cleaned from a change description (retrieval/rerank.py, retrieval/description.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval import description
from delphi_ls.retrieval.description import clean_request
from delphi_ls.retrieval.fusion import Fused
from delphi_ls.retrieval.query import analyse
from delphi_ls.retrieval.rerank import TWIN_DEPTH, implementation_first, implementation_twins
from delphi_ls.settings import CLEANINGS, Settings, SettingsError

# --------------------------------------------------------------------------- cleaning
KOA = """feat: replace cache-content-type with mime-types directly
## Checklist

- [x] I have ensured my pull request is not behind the main or master
branch of the original repository.
- [x] I have rebased all commits where necessary so that reviewing this
pull request can be done without having to merge it first.
- [ ] Rename `fooBar` in the
body parser
- [x] I have described my pull request and the reasons for code changes
along with context if necessary.

The mime lookup now happens in the response.
"""

SQUASH = """Fix `optional` validator to accept tuples of len > 1
* Fix `optional` validator to accept tuples of len > 1
* Add changelog
* Add news fragment
* Update CHANGES.md entry
* Apply suggestions from code review
* Merge branch 'main' into fix-optional
* Revert "fixes" from pre-commit.com hooks [skip pre-commit.ci]
This reverts commit 5b413827365559bac9cb7b72e0b75a0ce4328772.
* fix lint
* Handle the empty tuple, seen in 0xdeadbeefcafe and cafe12 and 3.1415926535897
---------
"""


def test_a_wrapped_template_item_goes_with_its_lines_and_a_task_that_names_code_stays() -> None:
    out = clean_request(KOA)
    for gone in ("branch of the original", "pull request can be done", "along with context"):
        assert gone not in out, gone
    assert "Rename `fooBar` in the\nbody parser" in out  # a task naming code keeps its wrapped line
    assert "The mime lookup now happens in the response." in out
    basic = clean_request(KOA, "basic")  # session 5's cleaning left the wrapped lines (the defect)
    assert "branch of the original repository." in basic and "along with context if necessary." in basic
    q = analyse("Which source files implement this change?\n" + KOA, "squash")
    assert not {"context", "request", "branch", "repository"} & set(q.terms)
    assert {"context", "request"} <= set(analyse("Which source files implement this change?\n" + KOA, "basic").terms)


def test_squash_housekeeping_reverts_and_hashes_go_and_the_request_stays() -> None:
    out = clean_request(SQUASH)
    for gone in ("changelog", "news fragment", "CHANGES.md", "suggestions", "Merge branch", "Revert", "reverts commit",
                 "5b4138", "fix lint", "-----"):  # the hash went with its revert line
        assert gone not in out, gone
    assert out.count("Fix `optional` validator to accept tuples of len > 1") == 2
    assert "* Handle the empty tuple, seen in 0xdeadbeefcafe and cafe12 and 3.1415926535897" in out
    assert "Related: 8aaf704f5679 (fix)" in clean_request("Retry uploads\nRelated: 8aaf704f5679 (fix)")  # hashes stay
    assert clean_request(SQUASH, "basic").count("* Add changelog") == 1
    assert clean_request(SQUASH, "off") == SQUASH


def test_prose_bullets_that_mention_the_change_log_in_passing_stay() -> None:
    text = "Retry uploads\n* Add a changelog parser for the release script\n* format the retry message"
    assert clean_request(text) == text


def test_cleaning_setting_is_validated_and_names_the_same_choices() -> None:
    assert CLEANINGS == description.CLEANINGS
    assert Settings().clean_description == "squash" and Settings().implementation_first
    with pytest.raises(SettingsError, match="clean_description"):
        Settings.from_dict({"clean_description": "all"})


# --------------------------------------------------------------------------- declarations and twins
def test_implementation_twins_by_language_convention() -> None:
    listed = ["include/spdlog/details/registry.h", "include/spdlog/details/registry-inl.h", "src/registry.cpp",
              "include/spdlog/logger.h", "src/attr/__init__.pyi", "src/attr/__init__.py", "src/attr/_make.py",
              "types/index.d.ts", "types/index.js", "Slim/Interfaces/RouteGroupInterface.php", "Slim/Routing/RouteGroup.php",
              "src/Core/ILogEventSink.cs", "src/Core/Sinks/LogEventSink.cs", "lib/util.h", "other/util.c", "lib/util-inl.h"]
    assert implementation_twins("include/spdlog/details/registry.h", listed) == [
        "include/spdlog/details/registry-inl.h", "src/registry.cpp"]  # under include/: the same name anywhere
    assert implementation_twins("lib/util.h", listed) == ["lib/util-inl.h"]  # elsewhere: its own folder only
    assert implementation_twins("src/attr/__init__.pyi", listed) == ["src/attr/__init__.py"]
    assert implementation_twins("types/index.d.ts", listed) == ["types/index.js"]
    assert implementation_twins("Slim/Interfaces/RouteGroupInterface.php", listed) == ["Slim/Routing/RouteGroup.php"]
    assert implementation_twins("src/Core/ILogEventSink.cs", listed) == ["src/Core/Sinks/LogEventSink.cs"]
    for not_a_declaration in ("include/spdlog/details/registry-inl.h", "src/attr/_make.py", "src/registry.cpp",
                              "include/spdlog/logger.h"):  # logger.h: a declaration with no twin listed
        assert implementation_twins(not_a_declaration, listed) == []


def _fused(paths: list[str]) -> list[Fused]:
    return [Fused(p, 1.0 - 0.01 * i) for i, p in enumerate(paths)]


def test_a_declaration_moves_just_below_its_highest_twin() -> None:
    order = ["src/attr/__init__.pyi", "src/attr/_make.py", "src/attr/__init__.py", "src/attr/_funcs.py"]
    out = implementation_first(_fused(order), lambda p: False)
    assert [f.path for f in out] == ["src/attr/_make.py", "src/attr/__init__.py", "src/attr/__init__.pyi",
                                     "src/attr/_funcs.py"]
    assert [f.score for f in out] == sorted((f.score for f in out), reverse=True)  # the places keep their scores
    assert out[2].branches == {"twin": 3} and "src/attr/__init__.py ranks above it" in out[2].notes[0][1]
    assert not out[0].branches  # only the declaration that moved says so


def test_a_named_or_pinned_declaration_or_one_below_its_twin_stays() -> None:
    order = ["sds.h", "sds.c", "hiredis.c"]
    assert [f.path for f in implementation_first(_fused(order), lambda p: p == "sds.h")] == order
    assert [f.path for f in implementation_first(_fused(order), lambda p: False, {"sds.h"})] == order
    assert [f.path for f in implementation_first(_fused(["sds.c", "sds.h"]), lambda p: False)] == ["sds.c", "sds.h"]
    deep = [f"f{i}.c" for i in range(TWIN_DEPTH - 1)] + ["x.h", "x.c"]  # the twin below the first page: no move
    assert [f.path for f in implementation_first(_fused(deep), lambda p: False)] == deep


HEADER = """/* Registry of named loggers: find a logger by name, register a logger, drop a logger.
 * The registry keeps every named logger; a lookup by name returns the registered logger. */
#pragma once
struct logger;
struct logger *registry_get(const char *name);
void registry_register(struct logger *logger);
void registry_drop(const char *name);
"""
IMPL = """#include "registry.h"
#include <string.h>
static struct logger *loggers[64];
static const char *names[64];
struct logger *registry_get(const char *name) {
    for (int i = 0; i < 64; i++) if (names[i] && strcmp(names[i], name) == 0) return loggers[i];
    return 0;
}
void registry_register(struct logger *l) { (void)l; }
void registry_drop(const char *name) { (void)name; }
"""


@pytest.fixture()
def c_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "registry.h").write_text(HEADER)
    (ws / "src" / "registry.c").write_text(IMPL)
    (ws / "src" / "main.c").write_text('#include "registry.h"\nint main(void) { return registry_get("x") != 0; }\n')
    return ws


def test_engine_puts_the_implementation_above_its_header_only_when_set(c_workspace: Path, tmp_path: Path) -> None:
    question = "Which source files implement this change?\nFind a named logger in the registry faster"
    with Engine(c_workspace, index_dir=str(tmp_path / "idx"), vectors=False, implementation_first=False) as eng:
        eng.index()
        plain = [r["path"] for r in eng.context(question, limit=5)["results"]]
        plain_tests = [r["path"] for r in eng.context("Which tests cover the registry lookup by name?")["results"]]
    assert plain.index("src/registry.h") < plain.index("src/registry.c")  # the header's words put it first
    with Engine(c_workspace, index_dir=str(tmp_path / "idx"), vectors=False, implementation_first=True) as eng:
        rows = eng.context(question, limit=5)["results"]
        moved = [r["path"] for r in rows]
        assert moved.index("src/registry.c") + 1 == moved.index("src/registry.h")
        header = rows[moved.index("src/registry.h")]
        assert header["branches"]["twin"] == header["rank"]  # the answer shows why it sits there
        named = [r["path"] for r in eng.context(question + " in registry.h", limit=5)["results"]]
        assert named.index("src/registry.h") < named.index("src/registry.c")  # the question names the header
        tests = [r["path"] for r in eng.context("Which tests cover the registry lookup by name?")["results"]]
    assert tests == plain_tests  # a question for tests is not reordered


def test_a_question_about_types_stubs_or_headers_keeps_the_declaration_first(c_workspace: Path, tmp_path: Path) -> None:
    question = "Which source files implement this change?\nfix(types): the signature of the named logger lookup in the registry"
    with Engine(c_workspace, index_dir=str(tmp_path / "idx"), vectors=False, implementation_first=False) as eng:
        eng.index()
        plain = [r["path"] for r in eng.context(question, limit=5)["results"]]
    with Engine(c_workspace, index_dir=str(tmp_path / "idx"), vectors=False, implementation_first=True) as eng:
        assert [r["path"] for r in eng.context(question, limit=5)["results"]] == plain
    assert plain.index("src/registry.h") < plain.index("src/registry.c")
