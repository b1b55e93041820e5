"""The index folders in the user's cache (where an index goes unless ``index_dir`` says otherwise), for
`delphi indexes`: the workspace each was built for, its size, its last write, and whether that workspace is
still there; ``prune`` removes those whose workspace folder is gone.

Every workspace path gets its own folder, so copies, clones in temporary folders and deleted checkouts leave
theirs behind, and nothing listed or removed them (a newcomer's first twenty minutes, session 44: the cache grew
from 273 MB to 996 MB). A folder in use (its writer lock held, or open in any Delphi process) is never removed;
a folder with no readable manifest (one being made, or damaged) is listed and left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .engine import stored_root
from .indexing.snapshot import try_open_exclusive
from .settings import default_index_base
from .stores.writer_lock import WriterLock


@dataclass(frozen=True)
class IndexFolder:
    path: Path
    workspace: str | None  # the folder it was built for; None: no readable manifest
    present: bool  # that folder exists now
    size: int  # bytes of its files
    used: float  # its manifest's last write (unix time; 0 when unknown)

    def as_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "workspace": self.workspace, "workspacePresent": self.present,
                "bytes": self.size, "lastWrite": self.used}


def _present(root: Path) -> bool:
    """Whether the workspace may still be there: it is, or it cannot be told (its folder unreadable), or the
    folder it was in is not there either (an unmounted drive, a network share that is down, a container's path
    seen from the host: not known to be gone, so never pruned)."""
    try:
        if root.is_dir():
            return True
        return not root.parent.is_dir()
    except OSError:
        return True


def _size(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):  # links are not followed
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def _used(folder: Path) -> float:
    times = []
    for name in ("meta.sqlite", "meta.sqlite-wal"):
        with contextlib.suppress(OSError):
            times.append((folder / name).stat().st_mtime)
    return max(times, default=0.0)


def list_indexes(base: Path | None = None) -> list[IndexFolder]:
    """Every index folder under ``base`` (default: the user cache's), largest first."""
    base = base or default_index_base()
    out = []
    try:
        entries = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    for folder in entries:
        if not (folder / "meta.sqlite").exists():
            continue  # not an index (a scratch folder of a killed snapshot run is the index's own business)
        root = stored_root(folder)
        out.append(IndexFolder(folder, root, root is None or _present(Path(root)), _size(folder), _used(folder)))
    out.sort(key=lambda f: (-f.size, str(f.path)))
    return out


def prune(base: Path | None = None) -> tuple[list[IndexFolder], list[tuple[IndexFolder, str]]]:
    """Remove the index folders whose workspace folder is gone: (removed, [(kept, why)]) of those."""
    removed: list[IndexFolder] = []
    kept: list[tuple[IndexFolder, str]] = []
    for f in list_indexes(base):
        if f.present:
            continue
        writer = WriterLock(f.path)
        try:
            if not writer.try_acquire():
                kept.append((f, "another Delphi process is indexing it"))
                continue
            opened = try_open_exclusive(f.path)
            if opened is None:
                kept.append((f, "it is open in a Delphi process (a language server, `delphi serve`, an MCP server)"))
                continue
            try:
                if f.workspace is None or _present(Path(f.workspace)):  # made again since it was listed
                    kept.append((f, "its workspace folder is there again"))
                    continue
                # Moved aside first, under both locks: a process that opens it now finds no index, not half a one.
                gone = f.path.with_name(f".pruned-{f.path.name}-{os.getpid()}")
                os.rename(f.path, gone)
            finally:
                os.close(opened)
        except OSError as e:
            kept.append((f, f"it could not be moved aside: {e.strerror or e}"))
            continue
        finally:
            writer.release()
        shutil.rmtree(gone, ignore_errors=True)
        if gone.exists():
            kept.append((f, f"moved aside to {gone}, but not all of it could be removed"))
            continue
        removed.append(f)
    return removed, kept
