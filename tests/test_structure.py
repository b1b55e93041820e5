"""Structure: imports resolved to files, test links, co-change from git history."""

from pathlib import Path

from delphi_ls import Engine
from delphi_ls.indexing.chunker import chunk_file
from delphi_ls.indexing.imports import Resolver
from tests.conftest import git

FILES = ["pkg/__init__.py", "pkg/core.py", "pkg/util/helpers.py", "src/app/main.ts", "src/app/util.ts",
         "src/app/index.js", "cmd/server/main.go", "internal/store/store.go", "internal/store/store_test.go",
         "crate/src/lib.rs", "crate/src/parser.rs", "crate/src/parser/lexer.rs", "java/src/main/java/a/b/Thing.java"]


def test_imports_resolve_per_language():
    r = Resolver(FILES)
    assert r.resolve("pkg/core.py", "py:.util.helpers") == ["pkg/util/helpers.py"]
    assert r.resolve("pkg/core.py", "py:pkg.util.helpers") == ["pkg/util/helpers.py"]
    assert r.resolve("pkg/core.py", "py:os") == []
    assert r.resolve("src/app/main.ts", "js:./util.js") == ["src/app/util.ts"]
    assert r.resolve("src/app/main.ts", "js:./util") == ["src/app/util.ts"]
    assert r.resolve("src/app/main.ts", "js:react") == []
    assert r.resolve("cmd/server/main.go", "go:github.com/acme/svc/internal/store") == ["internal/store/store.go"]
    assert r.resolve("crate/src/lib.rs", "rsmod:parser") == ["crate/src/parser.rs"]
    assert r.resolve("crate/src/lib.rs", "rs:crate::parser::lexer::Token") == ["crate/src/parser/lexer.rs"]
    assert r.resolve("java/src/main/java/a/Other.java", "java:a.b.Thing") == ["java/src/main/java/a/b/Thing.java"]


def test_imports_extracted_by_tree_sitter():
    assert "py:shipyard.retry.RetryPolicy" in chunk_file("t.py", "from shipyard.retry import RetryPolicy\n").imports
    assert chunk_file("a.ts", "import { x } from './util';\nconst y = require('./z');\n").imports == ["js:./util", "js:./z"]
    assert chunk_file("a.go", 'package a\nimport (\n  "fmt"\n  "x.io/y/z"\n)\n').imports == ["go:fmt", "go:x.io/y/z"]
    assert chunk_file("lib.rs", "mod parser;\nuse crate::parser::Lexer;\n").imports == ["rsmod:parser", "rs:crate::parser::Lexer"]
    assert chunk_file("A.java", "package a;\nimport a.b.Thing;\nclass A {}\n").imports == ["java:a.b.Thing"]


def test_related_tests_golden(engine: Engine):
    """Named tests first, then tests that import the file."""
    tests = [t["path"] for t in engine.related_tests("shipyard/scheduler.py")]
    assert tests[:2] == ["tests/test_scheduler.py", "tests/test_pipeline_integration.py"]
    assert [t["path"] for t in engine.related_tests("shipyard/retry.py")][:1] == ["tests/test_retry.py"]
    g = engine.view().graph
    assert "shipyard/scheduler.py" in g.imports["tests/test_pipeline_integration.py"]
    assert "tests/test_scheduler.py" in g.tests_of["shipyard/scheduler.py"]


def test_graph_branch_finds_importing_tests(engine: Engine):
    res = engine.context("which tests cover this change? drain the queue", anchors=["shipyard/scheduler.py"])
    paths = [r["path"] for r in res["results"][:3]]
    assert paths[:2] == ["tests/test_scheduler.py", "tests/test_pipeline_integration.py"] or \
        set(paths[:2]) == {"tests/test_scheduler.py", "tests/test_pipeline_integration.py"}
    assert any("graph" in r["branches"] for r in res["results"][:3])


def test_cochange_from_history(workspace: Path, tmp_path: Path):
    with Engine(workspace, index_dir=str(tmp_path / "nogit")) as eng:
        eng.index(vectors=False)
        assert eng.health(check_staleness=False)["branches"]["cochange"].startswith("off: not a git repository")
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "initial")
    for i in range(3):  # retry.py and settings.yaml change together, three times
        (workspace / "shipyard/retry.py").write_text((workspace / "shipyard/retry.py").read_text() + f"\n# {i}\n")
        (workspace / "config/settings.yaml").write_text((workspace / "config/settings.yaml").read_text() + f"# {i}\n")
        git(workspace, "commit", "-qam", f"tune retries {i}")
    with Engine(workspace, index_dir=str(tmp_path / "git")) as eng:
        eng.index(vectors=False)
        assert eng.cochange_status.startswith("ready: 4 commits")
        assert eng.meta.cochanged_with("shipyard/retry.py")[0][0] == "config/settings.yaml"
        res = eng.context("what else must change with this?", anchors=["shipyard/retry.py"])
        r = next(r for r in res["results"] if r["path"] == "config/settings.yaml")
        assert r["branches"].get("cochange") == 1
        # HEAD moved: recomputed on the next index.
        (workspace / "shipyard/scheduler.py").write_text("x = 1\n")
        git(workspace, "commit", "-qam", "more")
        eng.index(vectors=False)
        assert eng.cochange_status.startswith("ready: 5 commits")


def test_files_added_by_a_commit_without_a_parent_did_not_change_together(workspace: Path):
    """In a one-commit repository every test "changed with" every source file: `related-code` of a test named an
    unrelated settings file, and a cart test ranked second for retry.py by co-change (a newcomer, session 36). The
    first commit (or a shallow clone's oldest) adds files; it makes no pairs, and still counts as their change."""
    from delphi_ls.indexing.cochange import change_history

    files = {"shipyard/retry.py", "shipyard/scheduler.py", "config/settings.yaml"}
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "initial")
    h = change_history(workspace, files)
    assert h.commits == 1 and h.pairs == {} and set(h.changes) == files
    (workspace / "shipyard/retry.py").write_text((workspace / "shipyard/retry.py").read_text() + "\n# 1\n")
    (workspace / "config/settings.yaml").write_text((workspace / "config/settings.yaml").read_text() + "# 1\n")
    git(workspace, "commit", "-qam", "tune retries")
    assert set(change_history(workspace, files).pairs) == {("shipyard/retry.py", "config/settings.yaml"),
                                                           ("config/settings.yaml", "shipyard/retry.py")}


def test_cochange_discounts_files_that_change_with_everything(tmp_path: Path):
    """A changelog touched by every commit co-changes with everything; the file that changes only
    with retry.py is the stronger partner."""
    from delphi_ls.indexing.cochange import cochange_pairs

    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    files = ["retry.py", "retry_config.yaml", "CHANGES.md", "scheduler.py", "api.py"]
    for f in files:
        (root / f).write_text("0\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    history = [["retry.py", "retry_config.yaml", "CHANGES.md"], ["retry.py", "CHANGES.md"],
               ["scheduler.py", "CHANGES.md"], ["api.py", "CHANGES.md"], ["scheduler.py", "api.py", "CHANGES.md"],
               ["retry.py", "retry_config.yaml", "CHANGES.md"], ["api.py", "CHANGES.md"]]
    for i, changed in enumerate(history):
        for f in changed:
            (root / f).write_text(f"{i + 1}\n")
        git(root, "commit", "-qam", f"change {i}")
    pairs, commits = cochange_pairs(root, set(files))
    assert commits == len(history) + 1
    assert pairs[("retry.py", "retry_config.yaml")] > pairs[("retry.py", "CHANGES.md")]
    assert pairs[("retry.py", "retry_config.yaml")] == pairs[("retry_config.yaml", "retry.py")]


def test_change_counts_kept_and_read_as_ranker_columns(workspace: Path, tmp_path: Path):
    """Each file's weighted change count is kept beside the co-change pairs, and the learned ranker's
    churn columns read it: the file that changed most in the window scores 1 on ``changes_rel``; a file
    that never changed, and every file of a workspace without git, score 0."""
    from delphi_ls.indexing.cochange import change_history
    from delphi_ls.retrieval.features import FEATURE_NAMES

    i, j = FEATURE_NAMES.index("log_changes"), FEATURE_NAMES.index("changes_rel")
    question = "how are retries scheduled with backoff?"
    with Engine(workspace, index_dir=str(tmp_path / "nogit"), reranker="off") as eng:
        eng.index(vectors=False)
        assert all(c["features"][i] == 0 and c["features"][j] == 0 for c in eng.candidates(question, []))
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "initial")
    for k in range(3):
        (workspace / "shipyard/retry.py").write_text((workspace / "shipyard/retry.py").read_text() + f"\n# {k}\n")
        git(workspace, "commit", "-qam", f"tune retries {k}")
    h = change_history(workspace, {"shipyard/retry.py", "shipyard/scheduler.py"})
    assert h.commits == 4
    # one file per commit counts 1/log2(2) = 1; the initial commit touched more files and counts less
    assert 3.0 < h.changes["shipyard/retry.py"] < 4.0
    assert h.changes["shipyard/retry.py"] > h.changes["shipyard/scheduler.py"] > 0
    with Engine(workspace, index_dir=str(tmp_path / "git"), reranker="off") as eng:
        eng.index(vectors=False)
        weights = eng.meta.change_weights(["shipyard/retry.py", "shipyard/scheduler.py", "no/such.py"])
        assert set(weights) == {"shipyard/retry.py", "shipyard/scheduler.py"}
        cands = {c["path"]: c["features"] for c in eng.candidates(question, [])}
        assert cands["shipyard/retry.py"][j] == 1.0
        assert cands["shipyard/retry.py"][i] > cands["shipyard/scheduler.py"][i] > 0
    import shutil

    shutil.rmtree(workspace / ".git")  # the history gone: no stale counts
    with Engine(workspace, index_dir=str(tmp_path / "git"), reranker="off") as eng:
        eng.index(vectors=False)
        assert eng.meta.change_weights(["shipyard/retry.py"]) == {}


def test_a_test_support_file_is_named_after_no_source_file(tmp_path: Path):
    """koa's layout: `test-helpers/context.js` helps the tests and is kind test, but it is not the test of
    `lib/context.js`; the real test is."""
    root = tmp_path / "ws"
    for rel, text in {"lib/context.js": "module.exports = { get() { return 1 } }\n",
                      "test-helpers/context.js": "module.exports = () => ({ ctx: true })\n",
                      "__tests__/context.test.js": "const c = require('../lib/context')\ntest('x', () => {})\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    with Engine(root, index_dir=str(tmp_path / "idx")) as eng:
        eng.index(vectors=False)
        assert eng.view().files["test-helpers/context.js"] == "test"
        assert eng.view().graph.tests_of["lib/context.js"] == {"__tests__/context.test.js"}


def test_a_folder_of_a_repository_reads_the_history_of_its_files(tmp_path: Path):
    """A package folder of a monorepo opened on its own read no history ("not a git repository"; a monorepo newcomer,
    session 39): its files' commits are read, their paths from the folder, the rest of the repository's left out."""
    top = tmp_path / "mono"
    (top / "packages" / "web" / "src").mkdir(parents=True)
    (top / "other").mkdir()
    git(top, "init", "-q")
    web = top / "packages" / "web"
    for i in range(3):
        (web / "src" / "a.py").write_text("".join(f"def a{j}():\n    return {j}\n" for j in range(i + 1)))
        (web / "src" / "b.py").write_text(f"B = {i}\n")
        (top / "other" / "c.py").write_text(f"C = {i}\n")
        git(top, "add", "-A")
        git(top, "commit", "-qm", f"change {i}")
    (top / "other" / "c.py").write_text("C = 9\n")
    git(top, "commit", "-qam", "only other")
    with Engine(web, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        assert eng.cochange_status.startswith("ready: 3 commits"), eng.cochange_status
        assert [p for p, _w in eng.meta.cochanged_with("src/a.py")] == ["src/b.py"]
