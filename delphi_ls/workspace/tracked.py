"""Files git tracks that the ignore rules exclude: not indexed, and listed so that it is not silent.

Git keeps tracking a committed file after a later ``.gitignore`` matches it (``build/keep.py`` committed,
then ``build/`` ignored; a file added with ``git add -f``). Delphi's walk follows the ignore rules as
ripgrep does, and as the privacy promise needs (a file the user ignores never reaches a store), so such
a file is not indexed; ``delphi health`` lists them (a hostile newcomer, session 28: "0 skipped").
Asked of git only by a full health report: a subprocess is not added to every catch-up walk.
"""

from __future__ import annotations

from pathlib import Path

from ..core.git import ask_git


def _paths(out: bytes) -> list[str]:
    got = []
    for raw in out.split(b"\0"):
        if raw:
            try:
                got.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                continue  # a name that is not UTF-8 is never indexed; the walk lists it
    return got


def untracked(root: Path) -> list[str] | None:
    """Workspace-relative paths of the files git does not track and its rules do not ignore (a scratch file, a new
    module not added yet), sorted; None outside a git work tree, or when git is unavailable or slow."""
    if not (root / ".git").exists():
        return None
    res = ask_git(root, "ls-files", "-z", "--others", "--exclude-standard", mark_slow=False)
    if res is None or res.returncode != 0:
        return None
    return sorted(_paths(res.stdout))


def tracked_but_ignored(root: Path) -> list[str] | None:
    """Workspace-relative paths that git tracks and its ignore rules match, sorted; None when the
    folder is not in a git work tree or git is unavailable or slow."""
    if not (root / ".git").exists():
        return None  # a folder inside a repository is asked of its own root's rules only when it is the root
    res = ask_git(root, "ls-files", "-z", "--cached", "--ignored", "--exclude-standard", mark_slow=False)
    if res is None or res.returncode != 0:
        return None
    return sorted(_paths(res.stdout))
