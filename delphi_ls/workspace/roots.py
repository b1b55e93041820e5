"""Which folders Delphi refuses to take as a workspace: a home folder, the file system's root, a git folder.

`delphi mcp` with no folder takes the project around the current folder, else the current folder; an agent's
client started from `~` (or `/`) then indexed everything there and answered with `.kube/config`,
`.config/gh/hosts.yml` and `.bash_history` packed in (a newcomer's test, session 27). From `/` the first run
listed 247,122 files and set 35,654 inotify watches. A home folder is not a project: it holds every
credential its owner has, in more places than any list of secret names can know. So a workspace that is the
user's home folder, or a folder above it (`/home`, `/`), is refused with what to do instead; a `delphi.toml`
in it says the user means it.
"""

from __future__ import annotations

import os
from pathlib import Path


def unreadable_reason(folder: Path) -> str | None:
    """Why ``folder`` cannot be listed (the system's words, lower case), or None when it can: what a walk needs."""
    try:
        with os.scandir(folder):
            return None
    except OSError as e:
        return (e.strerror or str(e)).lower()


def _marked(folder: Path) -> bool:
    return (folder / ".git").exists() or (folder / "delphi.toml").is_file()


def project_root(start: Path) -> Path:
    """`delphi mcp` with no folder: the project the agent was started in — the nearest folder at or
    above ``start`` holding `.git` or `delphi.toml` (as the Neovim recipe finds it), else ``start``.
    Started from a sub-folder it must not build a second, partial index of just that folder."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if _marked(folder):
            return folder
    return start


def enclosing_project(folder: Path) -> Path | None:
    """The project ``folder`` lies inside when it is not a project's root itself, else None."""
    folder = folder.resolve()
    if _marked(folder):
        return None
    found = project_root(folder)
    return None if found == folder else found


class WorkspaceRefused(ValueError):
    """The folder may not be a workspace; the message says why and what to do."""


def _home() -> Path | None:
    home = os.environ.get("HOME") or ""
    try:
        return Path(home).resolve() if home else Path.home().resolve()
    except (RuntimeError, OSError):  # no HOME and no passwd entry
        return None


def refusal(root: Path) -> str | None:
    """Why ``root`` (resolved) may not be a workspace, or None."""
    if (root / "delphi.toml").is_file():
        return None
    home = _home()
    if root.name == ".git" or _bare_repository(root):
        # Git's own files (hook samples, config, packed objects) indexed as a tree (a newcomer, session 29).
        return (f"Delphi will not index {root}: it is a git folder (a bare repository or a `.git` folder), "
                "which holds git's own files, not a working tree. Open a checkout instead (`git clone "
                f"{root} somewhere` or `git worktree add`), or put a delphi.toml in this folder to index it anyway")
    if root.parent == root:
        what = "the root of the file system"
    elif home is not None and home.parent != home and (root == home or root in home.parents):
        what = "your home folder" if root == home else f"a folder that holds your home folder ({home})"
    else:
        return None
    return (f"Delphi will not index {root}: it is {what}, which holds credentials and far more than one project. "
            "Open a project's folder instead (for `delphi mcp`: `delphi mcp /path/to/project`, or start it "
            "inside the project), or put a delphi.toml in this folder to index it anyway")


def _bare_repository(root: Path) -> bool:
    """Git's layout at the top of a folder that has no `.git` of its own (what `git init --bare` makes)."""
    return (not (root / ".git").exists() and (root / "HEAD").is_file() and (root / "objects").is_dir()
            and (root / "refs").is_dir() and (root / "config").is_file())


def check(root: Path) -> None:
    why = refusal(root)
    if why:
        raise WorkspaceRefused(why)
