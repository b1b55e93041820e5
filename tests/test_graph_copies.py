"""Copies of one project side by side (vendored releases, a monorepo's packages): a test is linked to the
source of its own copy, not to every copy's file of that name (issue 18: on the 100k workspace 2.3 M of
2.4 M name links were such cross-copy links, and 4,163 `package-info.java` each had 486 "tests")."""

from __future__ import annotations

from pathlib import Path

from delphi_ls import Engine

JAVA = "package com.acme;\n\npublic class Retry {\n    public int attempts() { return 3; }\n}\n"
JAVA_TEST = ("package com.acme;\n\nimport com.acme.Retry;\n\nclass RetryTests {\n"
             "    void attempts() { new Retry().attempts(); }\n}\n")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _tests(eng: Engine, path: str) -> set[str]:
    return set(eng.view().graph.tests_of.get(path, ()))


def test_each_copy_links_its_own_tests(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    files = {}
    for copy in ("vendor/app@1.0", "vendor/app@2.0", "vendor/app@3.0"):
        files[f"{copy}/src/main/java/com/acme/Retry.java"] = JAVA
        files[f"{copy}/src/main/java/com/acme/package-info.java"] = "package com.acme;\n"
        files[f"{copy}/src/test/java/com/acme/RetryTests.java"] = JAVA_TEST
        files[f"{copy}/src/test/java/com/acme/support/package-info.java"] = "package com.acme.support;\n"
    _write(ws, files)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        for copy in ("vendor/app@1.0", "vendor/app@2.0", "vendor/app@3.0"):
            code = f"{copy}/src/main/java/com/acme/Retry.java"
            assert _tests(eng, code) == {f"{copy}/src/test/java/com/acme/RetryTests.java"}
            info = f"{copy}/src/main/java/com/acme/package-info.java"
            assert _tests(eng, info) == {f"{copy}/src/test/java/com/acme/support/package-info.java"}  # (`fixtures/`: data)
            # the import resolves inside the copy too (it did before; kept)
            assert eng.view().graph.imports[f"{copy}/src/test/java/com/acme/RetryTests.java"] == {code}
            # Related tests: the copy's own test by name; the other copies' tests only by use (they name
            # `Retry` too), below it, never "named after" this copy's file.
            rows = eng.related_tests(code)
            assert rows[0]["path"] == f"{copy}/src/test/java/com/acme/RetryTests.java", rows
            assert all(r["why"].startswith("uses") for r in rows[1:]), rows


def test_equally_near_files_are_all_linked(tmp_path: Path) -> None:
    """In one project the rule changes nothing: `tests/test_utils.py` names both packages' `utils.py`,
    neither nearer than the other."""
    ws = tmp_path / "ws"
    _write(ws, {"pkg_a/utils.py": "def a():\n    return 1\n", "pkg_b/utils.py": "def b():\n    return 2\n",
                "tests/test_utils.py": "def test_nothing():\n    assert True\n"})
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        assert _tests(eng, "pkg_a/utils.py") == {"tests/test_utils.py"}
        assert _tests(eng, "pkg_b/utils.py") == {"tests/test_utils.py"}


def test_a_package_test_links_its_package(tmp_path: Path) -> None:
    """A monorepo's packages: `packages/b/test/client.test.ts` is about `packages/b/src/client.ts`."""
    ws = tmp_path / "ws"
    src = "export function get(url: string): string {\n  return url;\n}\n"
    _write(ws, {"packages/a/src/client.ts": src, "packages/b/src/client.ts": src,
                "packages/b/test/client.test.ts": "import { get } from '../src/client';\nget('x');\n"})
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        assert _tests(eng, "packages/b/src/client.ts") == {"packages/b/test/client.test.ts"}
        assert _tests(eng, "packages/a/src/client.ts") == set()


def test_resolution_does_not_depend_on_which_file_asked_first(tmp_path: Path) -> None:
    """The resolver remembers its answer per importer folder, except when the importer is itself one of
    the candidates (`myapp/logging.py` doing `import logging`): its neighbour `views.py` must get the
    answer it gets when asking first, whatever the row order (a save moves a file's rows last; review)."""
    ws = tmp_path / "ws"
    _write(ws, {"myapp/logging.py": "import logging\n\nlog = logging.getLogger(__name__)\n",
                "myapp/views.py": "import logging\n\n\ndef view():\n    return 1\n",
                "myapp/contrib/logging.py": "def setup():\n    return 2\n"})
    graphs = []
    for _ in range(2):
        with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
            eng.index(vectors=False)
            g = eng.view().graph
            graphs.append({k: sorted(v) for k, v in g.imports.items() if v})
        # a save of logging.py: its rows (imports too) move to the end of the manifest
        (ws / "myapp/logging.py").write_text("import logging\n\nlog = logging.getLogger('x')\n")
    assert graphs[0] == graphs[1]
    # `myapp/contrib/logging.py` is `myapp.contrib.logging` to Python: found by `import logging` only from a
    # folder on the path, and `myapp/contrib/` is one below the importer's (the module roots, session 47).
    assert graphs[0]["myapp/views.py"] == ["myapp/logging.py"]


def test_a_module_deep_in_the_tests_does_not_take_the_package_s_import(tmp_path: Path) -> None:
    """flask's 3-line fixture `tests/test_apps/cliapp/inner1/inner2/flask.py` shared `tests/` with every test, so
    each `import flask` resolved to it and not to `src/flask/__init__.py`: the fixture was every test's related
    code and the package none's (a newcomer, session 47)."""
    ws = tmp_path / "ws"
    _write(ws, {"src/flask/__init__.py": "from .app import Flask\n",
                "src/flask/app.py": "class Flask:\n    def route(self, rule):\n        return rule\n",
                "tests/test_basic.py": "import flask\n\n\ndef test_route():\n    assert flask.Flask().route('/')\n",
                "tests/test_apps/cliapp/inner1/inner2/flask.py": "from flask import Flask\n\napp = Flask()\n"})
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        g = eng.view().graph
        assert sorted(g.imports["tests/test_basic.py"]) == ["src/flask/__init__.py"]
        assert "tests/test_basic.py" not in {r["path"] for r in eng.related_tests(
            "tests/test_apps/cliapp/inner1/inner2/flask.py") if "imports" in r["why"]}


def test_a_fixture_package_does_not_take_the_src_package_s_import() -> None:
    """`tests/fixtures/mypkg/` shares `tests/` with every test: it took `import mypkg` from `src/mypkg/` (a review,
    session 47). Below none of the importer's folders, the shallower root wins."""
    from delphi_ls.languages.base import FileIndex
    from delphi_ls.languages.python import _resolve

    ix = FileIndex(["src/mypkg/__init__.py", "tests/fixtures/mypkg/__init__.py", "tests/test_core.py",
                    "tests/unit/test_x.py", "tests/helpers.py", "tests/unit/helpers.py"])
    assert _resolve(ix, "tests/test_core.py", "mypkg") == ["src/mypkg/__init__.py"]
    assert _resolve(ix, "tests/unit/test_x.py", "mypkg") == ["src/mypkg/__init__.py"]
    # Roots above the importer keep their order: the importer's own folder first.
    assert _resolve(ix, "tests/unit/test_x.py", "helpers") == ["tests/unit/helpers.py"]
