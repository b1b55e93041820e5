"""What :func:`~delphi_ls.workspace.scan.scan` says about a few named paths, without walking the tree.

An editor's save and a file watcher name the files that changed. Walking the whole workspace to
learn about them cost 1.3-1.7 s of a 2.4 s one-file update on spring-boot (11,684 files, issue 18);
this asks the same questions of each named path alone (its folders' ignore files and ``lstat`` of each
part, through :func:`~delphi_ls.workspace.scan.skip_reason`) and answers as the walk would have for
those paths: indexable files with their size and mtime, files the walk records as skipped with its
reason, and nothing for paths the walk never lists (ignored, inside ``.git``, under a linked folder,
gone from disk: the indexer deletes those when they were indexed).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ..workspace.scan import FileEntry, ScanResult, printable_path, skip_reason

# skip_reason's verdicts for paths that a walk never lists at all (it does not enter the folder, or
# the rules drop the file without recording it), as opposed to files it records as skipped.
_UNLISTED = ("ignored by .gitignore/.delphiignore rules", "inside a version-control folder",
             "outside the workspace", "not a workspace path", "not a workspace path")
_LINK = "symlink (not followed)"


class WalkNeeded(Exception):
    """A named path that only a walk can answer for: a folder on disk (which files does it hold?) or
    one that cannot be looked at (the walk records its folder as unreadable)."""


def scan_named(root: Path, paths: list[str], settings: Any) -> ScanResult:
    """The part of ``scan(root, ...)`` about ``paths`` (workspace-relative, ``/``-separated).

    ``settings`` needs ``max_file_bytes`` and ``extra_ignores``. Raises :class:`WalkNeeded` (the
    caller walks instead) for a folder or a path that cannot be looked at."""
    root = Path(root).resolve()
    out = ScanResult()
    for rel in dict.fromkeys(paths):
        try:
            st = os.lstat(root / rel)
        except FileNotFoundError:
            continue  # gone (or never there): the walk would not list it
        except OSError as e:
            raise WalkNeeded(rel) from e
        if stat.S_ISDIR(st.st_mode):
            raise WalkNeeded(rel)
        reason = skip_reason(root, rel, settings)
        if reason is not None and reason.startswith("unreadable"):
            raise WalkNeeded(rel)
        if reason is None:
            out.files.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
        elif reason in _UNLISTED or (reason == _LINK and _first_link(root, rel) != rel):
            continue  # the walk drops it unrecorded, or records the linked folder it does not enter
        else:
            out.skipped[printable_path(rel)] = reason
    return out


def _first_link(root: Path, rel: str) -> str | None:
    """The first part of ``rel`` (a prefix path) that is a symbolic link, or None."""
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if os.path.islink(root / prefix):
            return prefix
    return None
