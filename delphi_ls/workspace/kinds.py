"""What kind of file a path is: code, test, doc, config or other.

Decided from the path alone so that it costs nothing at query time and agrees
between the index and the router.
"""

from __future__ import annotations

import os
import re

from ..languages import SPECS, TEST_NAME_PATTERNS, in_test_folder, test_affixes

CODE_EXT = {
    ".py", ".pyi", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".go", ".rs", ".java",
    ".kt", ".kts", ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs", ".rb", ".php",
    ".swift", ".m", ".mm", ".lua", ".sh", ".bash", ".zsh", ".fish", ".pl", ".pm", ".r", ".jl", ".ex",
    ".exs", ".erl", ".hs", ".ml", ".mli", ".clj", ".dart", ".vue", ".svelte", ".sql", ".groovy", ".zig",
    ".nim", ".ps1", ".fs", ".elm", ".proto", ".css", ".scss", ".less", ".html", ".ipynb",
    # Languages test suites are written in beside the code they test: redis's `tests/unit/*.tcl` were "other",
    # so `related_tests src/expire.c` found none (an agents' newcomer, session 43); Bats. Not `.exp`: expected
    # output files (`x.py.exp`) use it as often as Expect scripts do.
    ".tcl", ".bats",
} | {ext for spec in SPECS for ext in spec.extensions}  # and whatever a registered grammar parses
DOC_EXT = {".md", ".rst", ".txt", ".adoc", ".asciidoc", ".org", ".tex", ".textile"}
DOC_NAMES = {"readme", "changelog", "changes", "history", "news", "license", "licence", "copying",
             "authors", "contributors", "contributing", "code_of_conduct", "security", "notice"}
# Infrastructure and build files are config too: Terraform and HCL, make fragments, Nomad jobs, `Dockerfile.worker`
# and `api.Dockerfile`, Jenkinsfiles, `go.mod` (kind "other": a newcomer's `--kind config` missed them; session 41).
# Not `.tpl`: PHP's and Go's templates are that too.
CONFIG_EXT = {".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml", ".properties",
              ".gradle", ".lock", ".env", ".editorconfig", ".gitignore", ".gitattributes", ".tf", ".hcl",
              ".mk", ".nomad", ".dockerignore", ".dockerfile", ".containerfile"}
CONFIG_NAMES = {"makefile", "dockerfile", "containerfile", "justfile", "rakefile", "gemfile", "procfile",
                "cmakelists.txt", "setup.py", "setup.cfg", "conftest.py", "noxfile.py", "tox.ini", "jenkinsfile",
                "vagrantfile", "brewfile", "caddyfile", "go.mod", "go.work", "codeowners"}
_CONFIG_PREFIXES = ("dockerfile.", "containerfile.", "jenkinsfile.")
# Documents that record rather than instruct: a changelog answers "what changed", not "how do I" (express's 3,600-line
# `History.md` came first for three how-to questions, "deps: serve-static@~1.6.1" for serving static files; a
# newcomer, session 45).
# (Not SECURITY.md: it says how to report a vulnerability.)
RECORD_NAMES = (DOC_NAMES - {"readme", "contributing", "security"}) | {"releases", "release_notes", "release-notes",
                                                                       "releasenotes"}

# Test support folders are tests' code, not the product's: koa's `test-helpers/`, Go's `internal/testutil/`,
# `test-utils/`, Rust's `test-support/` (issue 19: koa's `test-helpers/stream.js` ranked 2nd for source questions).
_SUPPORT = r"test[-_]?(?:utils?|helpers?|support)"
_TEST_DIR = re.compile(rf"(^|/)(tests?|__tests__|spec|specs|testing|testdata|{_SUPPORT}|e2e|integration[-_]tests?)/")
_TEST_SUPPORT_DIR = re.compile(rf"(^|/){_SUPPORT}/")
# Test-file names of languages that have no module under delphi_ls/languages/ yet; a language's module
# takes its own over (a name listed twice is harmless).
_UNPARSED_TEST_NAMES = (r".*Tests?\.(cs|swift|scala)$",)
_TEST_FILE = re.compile("(" + "|".join(TEST_NAME_PATTERNS + _UNPARSED_TEST_NAMES) + ")")


def _named_as_test(base: str) -> bool:
    return bool(_TEST_FILE.match(base) or _TEST_FILE.match(base.lower()))


def is_test_name(path: str) -> bool:
    """A test by its file name (`test_x.py`, `x_test.go`, `XTest.java`, `x.spec.ts`, `test-x.c`), whatever its
    folder: a test pattern of its language, or a test affix :func:`stem_of` takes off."""
    base = os.path.basename(path)
    return _named_as_test(base) or stem_of(path) != base.split(".", 1)[0]


def names_its_source(path: str) -> bool:
    """Whether a test file's name can link it to the source files of its stem. A Python file in a test folder not
    named as a test is no test module (pytest and unittest collect `test_*.py`): a fixture app, a helper; flask's
    `tests/test_apps/cliapp/app.py` (3 lines) was named after every `app.py` and led each of flask's app.py lenses
    (a newcomer, session 38). Other languages' test folders hold tests by folder alone (Jest's `__tests__/x.js`,
    Rust's `tests/x.rs`)."""
    return not path.endswith((".py", ".pyi")) or is_test_name(path)


def is_test_path(path: str) -> bool:
    low = path.lower()
    if _named_as_test(os.path.basename(path)):
        return True
    if _TEST_DIR.search(low) and os.path.splitext(low)[1] in CODE_EXT:
        return True
    return in_test_folder(path)


def in_test_dir(path: str) -> bool:
    """Under a folder tests are kept in (`tests/`, `__tests__/`, `testdata/`, `e2e/`...), whatever the file."""
    return bool(_TEST_DIR.search(path.lower()))


def is_test_support(path: str) -> bool:
    """A file that is a test only by its support folder (``test-helpers/context.js``), not by its name: it
    helps tests and is named after no source file, so it links to none by name or folder."""
    return bool(_TEST_SUPPORT_DIR.search(path.lower())) and not _named_as_test(os.path.basename(path))


def file_kind(path: str) -> str:
    base = os.path.basename(path).lower()
    stem, ext = os.path.splitext(base)
    if is_test_path(path):
        return "test"
    if base in CONFIG_NAMES or (base.startswith(_CONFIG_PREFIXES) and ext not in CODE_EXT):  # not dockerfile.go
        return "config"
    if ext in DOC_EXT or stem in DOC_NAMES or "/docs/" in f"/{path.lower()}" or path.lower().startswith("doc/"):
        return "doc" if ext not in CODE_EXT else "code"
    if ext in CODE_EXT:
        return "code"
    if ext in CONFIG_EXT or base.startswith("."):
        return "config"
    return "other"


# Parts of a dotted file name that mark a test, not what it tests: `orders.service.spec.ts`, `app.e2e-spec.ts`.
_TEST_NAME_PARTS = frozenset({"test", "tests", "spec", "specs", "e2e", "e2e-spec", "e2e-test", "unit", "int"})


def dotted_parts(path: str) -> list[str]:
    """A file name's dotted parts before its extension, test markers out: ``orders.service.spec.ts`` ->
    ``orders``, ``service``; ``grpc_proxy.go`` -> ``grpc_proxy``."""
    return [p for p in os.path.basename(path).lower().split(".")[:-1] if p not in _TEST_NAME_PARTS]


def other_dotted_name(code: str, test: str) -> bool:
    """Both names are dotted (`<name>.<role>`, Angular's and NestJS's layout) and differ after their shared stem:
    ``orders.controller.spec.ts`` does not test ``orders.service.ts``, though :func:`stem_of` gives both
    ``orders`` (a newcomer, session 37: it was listed first as the service's test). A one-part name on
    either side (express's ``res.send.js`` testing ``response.js``) is left to the stem."""
    a, b = dotted_parts(code), dotted_parts(test)
    return len(a) >= 2 and len(b) >= 2 and b[:len(a)] != a  # `users.service.integration.spec.ts` is the service's


def stem_of(path: str) -> str:
    """The name a source file's tests are named after: ``grpc_proxy.go`` -> ``grpc_proxy``."""
    base = os.path.basename(path)
    stem = base.split(".", 1)[0]
    for pre in ("test_",):
        if stem.lower().startswith(pre):
            stem = stem[len(pre):]
    for suf in ("_test", "_tests", "Test", "Tests", "IT", "_spec", ".test", ".spec"):
        if stem.endswith(suf) and len(stem) > len(suf):
            stem = stem[: -len(suf)]
    # Then the file's own ecosystem's affixes (`test-x.c`, `x_unittest.cc`), for its files only.
    prefixes, suffixes = test_affixes(base)
    for pre in prefixes:
        if stem.lower().startswith(pre.lower()) and len(stem) > len(pre):
            stem = stem[len(pre):]
    for suf in suffixes:
        if stem.endswith(suf) and len(stem) > len(suf):
            stem = stem[: -len(suf)]
    return stem


def is_record_doc(path: str, kind: str | None = None) -> bool:
    """A changelog, release notes, licence, authors list or the like (:data:`RECORD_NAMES`): a document by its name
    (`shop/history.py` is code). ``kind``: the path's, when the caller holds it (the name is looked at first)."""
    return (os.path.basename(path).lower().split(".", 1)[0] in RECORD_NAMES
            and (kind or file_kind(path)) == "doc")


# What tests read: fixtures, Go's `testdata/` (never compiled as a test), snapshots and golden outputs. In a test folder
# they are tests by kind; as related tests they came before the tests that read them: an HTML fixture first for
# express's `users.js` ("in a test folder named after users.js"), urfave/cli's expected fish output second for
# `fish.go`; as a how-to's guide, cli's `testdata/godoc-v3.x.txt` (a newcomer, session 45).
_DATA_DIR = re.compile(r"(^|/)(fixtures?|__fixtures__|testdata|test[-_]data|__snapshots__|snapshots|golden)/")


def is_test_data(path: str) -> bool:
    return bool(_DATA_DIR.search(path.lower()))
