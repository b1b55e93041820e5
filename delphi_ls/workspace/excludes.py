"""The user's own git ignore file (``core.excludesFile``), which git applies in every repository.

A developer who lists ``.env.local`` or ``*.pem`` there once sees git ignore those files everywhere; Delphi
read only the repository's rules and indexed them (noticed in session 28, left; fixed session 30). The file
is where the user's own git config says (``git config --global``, else ``--system``, includes and conditional
includes followed), else git's default ``$XDG_CONFIG_HOME/git/ignore`` (``~/.config/git/ignore``). Never where
a repository's own config says: a file that reaches outside the workspace comes from the user's configuration
only (a repository shipped with its ``.git``, or a ``.git`` file naming a git folder elsewhere, would choose it).

Asking git costs a process start (3-5 ms). A walk of the folder (each full pass) asks it again; an editor
buffer's check, which runs on every edit, keeps the last answer until one of the user's or the system's config
files changes (a ``stat`` each; a file they include is seen at the next walk). An answer git did not give (slow, broken config) is kept a
minute only, so a passing failure does not put git's default file in place of the user's for long.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path

from ..core.git import ask_git

UNANSWERED_KEPT_S = 60.0
_cache: dict[str, tuple[tuple[object, ...], Path | None, float]] = {}  # root -> (signature, file, kept until)


def _default(env: Mapping[str, str]) -> Path | None:
    xdg = env.get("XDG_CONFIG_HOME") or ""
    if xdg:
        return Path(xdg) / "git" / "ignore"
    home = env.get("HOME") or ""
    return Path(home) / ".config" / "git" / "ignore" if home else None


def _config_files(env: Mapping[str, str]) -> list[str]:
    home = env.get("HOME") or ""
    xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = [env.get("GIT_CONFIG_GLOBAL") or "", os.path.join(home, ".gitconfig") if home else "",
             os.path.join(xdg, "git", "config") if xdg else "", env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"]
    return [f for f in files if f]


def _signature(env: Mapping[str, str]) -> tuple[object, ...]:
    sig: list[object] = [env.get(k) for k in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                                              "GIT_CONFIG_NOSYSTEM", "PATH")]
    for f in _config_files(env):
        try:
            st = os.stat(f)
            sig.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            sig.append(None)
    return tuple(sig)


def _ask_git(root: Path) -> tuple[bool, Path | None]:
    """(git answered, the file it names). Not answered: git missing, slow, or its config unreadable."""
    # Run in the workspace so that the user's conditional includes (`includeIf "gitdir:..."`) apply to it; the
    # scopes keep the repository's own config out (module note).
    for scope in ("--global", "--system"):
        res = ask_git(root, "config", scope, "--includes", "--path", "--get", "core.excludesFile")
        if res is None:
            return False, None
        if res.returncode != 1:  # 1: not set in this scope
            break
    else:
        return True, None  # set nowhere: git's default file applies
    if res.returncode != 0:
        return False, None
    value = os.fsdecode(res.stdout.strip())
    if not value:
        return True, None
    path = Path(value).expanduser()
    return True, path if path.is_absolute() else root / path


def user_excludes_file(root: Path, fresh: bool = False) -> Path | None:
    """The ignore file git applies beside the repository's own rules, whether or not it exists; None when
    there is none (no home folder). ``fresh``: ask git whatever was kept (a walk does; module note)."""
    env = os.environ
    key = str(root)
    sig = _signature(env)
    hit = _cache.get(key)
    if not fresh and hit is not None and hit[0] == sig and time.monotonic() < hit[2]:
        return hit[1]
    answered, named = _ask_git(root)
    path = named if answered and named is not None else _default(env)
    if len(_cache) > 64:
        _cache.clear()
    _cache[key] = (sig, path, math.inf if answered else time.monotonic() + UNANSWERED_KEPT_S)
    return path
