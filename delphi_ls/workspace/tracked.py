"""Files git tracks that the ignore rules exclude: not indexed, and listed so that it is not silent.

Git keeps tracking a committed file after a later ``.gitignore`` matches it (``build/keep.py`` committed,
then ``build/`` ignored; a file added with ``git add -f``). Delphi's walk follows the ignore rules as
ripgrep does, and as the privacy promise needs (a file the user ignores never reaches a store), so such
a file is not indexed; ``delphi health`` lists them (a hostile newcomer, session 28: "0 skipped").
Asked of git only by a full health report: a subprocess is not added to every catch-up walk.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 10.0


def tracked_but_ignored(root: Path) -> list[str] | None:
    """Workspace-relative paths that git tracks and its ignore rules match, sorted; None when the
    folder is not in a git work tree or git is unavailable or slow."""
    if not (root / ".git").exists():
        return None  # a folder inside a repository is asked of its own root's rules only when it is the root
    try:
        # core.fsmonitor off: a cloned repository's config must not name a program this runs.
        res = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", str(root), "ls-files", "-z",
                              "--cached", "--ignored", "--exclude-standard"],
                             capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    out = []
    for raw in res.stdout.split(b"\0"):
        if not raw:
            continue
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue  # a name that is not UTF-8 is never indexed; the walk lists it
    return sorted(out)
