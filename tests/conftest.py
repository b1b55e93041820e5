"""Small real workspaces, copied from tests/fixtures/ by the tests: several languages, tests, docs and bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from delphi_ls import Engine

FIXTURES = Path(__file__).parent / "fixtures"
# Sample workspaces live as files under tests/fixtures/<name>/; pytest must not collect their own
# tests (tests/fixtures/shipyard/tests/test_retry.py imports a package that is not installed).
collect_ignore = ["fixtures", "golden"]


def fixture_files(name: str = "shipyard") -> dict[str, str]:
    """The text files of one fixture workspace, by workspace-relative path."""
    base = FIXTURES / name
    return {p.relative_to(base).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(base.rglob("*")) if p.is_file()}


FILES: dict[str, str] = fixture_files("shipyard")

# Junk that the workspace's own ignore files must keep out. It is written at build time rather than
# kept as files: the repository's .gitignore drops build/ and dist/ too, and these are not worth reviewing.
IGNORED_JUNK: dict[str, str] = {
    "build/output.py": "print('ignored by .gitignore')\n",
    "web/dist/bundle.js": "console.log('ignored by nested gitignore')\n",
    "app.log": "ignored log\n",
}


def copy_fixture(name: str, root: Path) -> Path:
    """A fresh copy of tests/fixtures/<name> at ``root`` (tests index and edit the copy, never the files)."""
    shutil.copytree(FIXTURES / name, root, symlinks=False, dirs_exist_ok=True)
    return root


def git(root: Path, *args: str) -> None:
    """Run git in ``root`` as a fixed author, with no user or system config (HOME is the repository)."""
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "d@x", "GIT_COMMITTER_NAME": "Dev",
                        "GIT_COMMITTER_EMAIL": "d@x", "PATH": os.environ["PATH"], "HOME": str(root)})


def build_workspace(root: Path, huge_bytes: int = 1_200_000) -> Path:
    """The shipyard fixture plus the hostile input no repository should hold as files: ignored junk,
    binary, a huge file, Latin-1, a minified bundle, a symlink loop and a link out of the root."""
    copy_fixture("shipyard", root)
    for rel, text in IGNORED_JUNK.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (root / "assets").mkdir(exist_ok=True)
    (root / "assets" / "logo.dat").write_bytes(b"\x89PNG\x00\x01\x02binary\x00" * 20)
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "huge.txt").write_text("x" * huge_bytes)
    (root / "legacy").mkdir(exist_ok=True)
    (root / "legacy" / "latin1.py").write_bytes("# caf\xe9 cr\xe8me: legacy encoding\ndef brulee():\n    return 1\n".encode("latin-1"))
    (root / "web" / "src" / "vendor.min.js").write_text("var a=1;" * 1000)
    # A symlink loop and a link out of the root: neither may be followed.
    os.symlink(root, root / "loop")
    os.symlink("/etc", root / "outside")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws")


@pytest.fixture
def engine(workspace: Path, tmp_path: Path):
    eng = Engine(workspace, index_dir=str(tmp_path / "index"))
    eng.index()
    yield eng
    eng.close()


@pytest.fixture
def chroma_engine(workspace: Path, tmp_path: Path):
    """An engine whose vector branch Chroma's HNSW answers, so that Chroma holds every vector: below the
    exact bound (every fixture here) its writes are otherwise owed and never made (issue 18)."""
    eng = Engine(workspace, index_dir=str(tmp_path / "index"), vector_search="hnsw")
    eng.index()
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def module_engine(tmp_path_factory: pytest.TempPathFactory):
    """The shipyard fixture indexed once per test module (vectors on): for modules that only ask questions."""
    base = tmp_path_factory.mktemp("module-engine")
    ws = build_workspace(base / "ws", huge_bytes=2_000)
    with Engine(ws, index_dir=base / "index", embedder="potion-base-8M") as eng:
        eng.index()
        yield eng


def pytest_addoption(parser: pytest.Parser) -> None:
    # zoekt's -update: rewrite tests/golden/** from what the engine answers now, then review `git diff`.
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the golden ranking files under tests/golden/ instead of comparing")
