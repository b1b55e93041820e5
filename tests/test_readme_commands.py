"""The README's own commands, read out of the README and run (or checked against what runs them), so the
user's guide cannot drift from the code: the set-up commands, the command-line synopsis, the Python API
snippet and the VS Code packaging command. (Agent and editor recipes: test_readme_recipes.py and
test_neovim.py.)"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_workspace

REPO = Path(__file__).parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def block_after(heading: str, lang: str) -> str:
    """The first ```lang block under a heading."""
    section = README.split(heading, 1)[1]
    m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert m, f"README lost the {lang} block under {heading!r}"
    return m.group(1)


def commands(block: str) -> list[str]:
    return [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_the_two_setup_commands_are_the_ones_ci_and_the_tests_run():
    assert commands(block_after("## Set-up: two commands", "sh")) == [
        'bash scripts/try.sh [FOLDER] ["your question"]', "bash scripts/test.sh"]
    # `.ci/run` runs exactly the second; test_cli_newcomer runs the first (scripts/try.sh) on a folder.
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if ln and not ln.startswith(("#", "set ", "cd "))]
    assert ci == ["bash scripts/test.sh"]


def test_every_command_and_flag_in_the_cli_synopsis_exists():
    block = block_after("## Command line", "sh")
    seen = 0
    for line in commands(block):
        for cmd in line.split("|"):
            words = shlex.split(cmd.replace("[", " ").replace("]", " ").replace("...", " "))
            if not words or words[0] != "delphi":
                continue
            seen += 1
            sub = words[1]
            if sub.startswith("--"):  # `delphi --version`
                out = subprocess.run([str(BIN / "delphi"), sub], capture_output=True, text=True, timeout=60)
                assert out.returncode == 0 and out.stdout.startswith("delphi "), out
                continue
            help_text = subprocess.run([str(BIN / "delphi"), sub, "--help"], capture_output=True, text=True,
                                       timeout=60)
            assert help_text.returncode == 0, f"`delphi {sub}` is in the README but not a command"
            for flag in (w for w in words[2:] if w.startswith("-")):
                assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", help_text.stdout), f"delphi {sub} has no {flag}"
    assert seen >= 10


def test_the_python_api_snippet_runs_as_written(tmp_path: Path):
    ws = build_workspace(tmp_path / "ws")
    snippet = block_after("## Python API", "python").replace('"path/to/repo"', repr(str(ws)))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    first = out.stdout.splitlines()[0].split(" ", 2)
    assert first[:2] == ["1", "proxy/grpc_proxy.go"], out.stdout[:500]


def test_the_vscode_packaging_command_runs_as_written(tmp_path: Path):
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not installed: the suite's VS Code part needs Node")
        pytest.skip("npm not installed")
    build, install = commands(block_after("### VS Code", "sh"))
    # The build line as written, in a copy of the extension (the checkout's node_modules stay untouched).
    copy = tmp_path / "vscode-client"
    shutil.copytree(REPO / "vscode-client", copy, ignore=shutil.ignore_patterns("node_modules", "dist", "*.vsix"))
    out = subprocess.run(["bash", "-c", build], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout[-1500:], out.stderr[-1500:])
    vsix = install.split()[-1]
    assert install.startswith("code --install-extension ") and (copy / vsix).is_file()


def test_the_question_after_dashes_runs_as_the_readme_writes_it(tmp_path: Path):
    """The README's form for a question that starts with `-`, read out of the README and run as written in a
    workspace (the index goes to the user cache dir, here a temporary one)."""
    m = re.search(r'`(delphi context \. --limit 5 -- "--[^"`]+")`', README)
    assert m, "README lost the `--` example of delphi context"
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "ranges.py").write_text("def adjusted_line_ranges(last_line):\n    return last_line - 1\n")
    argv = shlex.split(m.group(1))
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=ws, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "src/ranges.py" in out.stdout, (out.stdout, out.stderr)
