"""The exact vector search's matrix kept on disk between processes, mapped instead of read.

Kept as a pickle (session 9), the first answer of a server on the 100,000-file workspace waited 2.1 s for it:
295 MB read into memory, a MAC over all of it, then unpickled into a second copy, and page-faulting fresh
memory costs about 0.8 s per 300 MB on this machine (bench/RESULTS.md, session 11). Here the file holds raw
sections after a JSON head: the chunk ids, the paths, two index arrays, and the float32 matrix, which is
memory-mapped read-only (its pages come from the page cache as the first query touches them, and are
shared with it rather than copied).

Trust: the head and the small sections (ids, paths, indexes) are signed with the view cache's key (this
user's, kept outside every index folder) and checked before use; the matrix is not signed (a MAC over it
was most of the load) and nothing in it can run code or name a file: a damaged one can only move scores.
Every index is checked against the sizes before the matrix is used, and 64 rows spread over the matrix
against a CRC in the signed head (a matrix left zero-filled by a power loss is not used).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import stat
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .exact import ExactVectors
from .view_cache import _secret, remove_stale_saves

log = logging.getLogger(__name__)

FILE = "exact.vectors"
LEGACY_FILE = "exact.pickle"  # the session-9 format: removed when found (up to 300 MB nothing reads now)
_ALIGN = 64
_VERSION = 1


class ExactFile:
    """``exact.vectors``: a line with the MAC (HMAC-SHA256 under this user's key) of the head line and the
    signed sections, the head line (JSON: the key, the sections' sizes), then the sections."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE
        try:
            (folder / LEGACY_FILE).unlink(missing_ok=True)
        except OSError:
            pass
        remove_stale_saves(folder, FILE, LEGACY_FILE)

    def save(self, key: Any, exact: ExactVectors) -> bool:
        """Write ``exact`` under ``key`` to a temporary file renamed into place (a reader, or a process with
        the old file mapped, keeps what it opened). The live chunks are written; the matrix block by block,
        so a save copies nothing in memory."""
        secret = _secret()
        if not key[-1] or secret is None:
            return False  # no code digest, or no key to sign with
        tmp: Path | None = None
        try:
            ids, paths, rowix, blocks = exact.parts()
            table = list(dict.fromkeys(paths))
            at = {p: i for i, p in enumerate(table)}
            sections = [
                "\0".join(ids).encode("utf-8", "surrogateescape"),
                "\0".join(table).encode("utf-8", "surrogateescape"),
                np.fromiter((at[p] for p in paths), dtype=np.int32, count=len(paths)).tobytes(),
                rowix.astype(np.int32).tobytes(),
            ]
            rows = sum(len(b) for b in blocks)
            dim = int(blocks[0].shape[1]) if blocks else 0
            head = json.dumps({"version": _VERSION, "key": list(key), "chunks": len(ids), "paths": len(table),
                               "rows": rows, "dim": dim, "sizes": [len(s) for s in sections],
                               "sample": _sample_crc(blocks, rows)
                               if rows else 0}).encode() + b"\n"
            mac = hmac.new(secret, head, "sha256")
            for s in sections:
                mac.update(s)
            fd, name = tempfile.mkstemp(prefix=f"{FILE}.", suffix=".tmp", dir=self.path.parent)
            tmp = Path(name)
            with os.fdopen(fd, "wb") as f:
                f.write(mac.hexdigest().encode() + b"\n")
                f.write(head)
                for s in sections:
                    f.write(s)
                f.write(b"\0" * (-f.tell() % _ALIGN))
                for b in blocks:
                    if b.size:
                        f.write(memoryview(np.ascontiguousarray(b, dtype=np.float32)).cast("B"))
                f.flush()
                os.fsync(f.fileno())  # the matrix is not signed: a power loss must not leave a renamed, unwritten one
            os.replace(tmp, self.path)
            return True
        except Exception as e:  # a full disk: the next process reads the manifest, nothing else is lost
            log.warning("could not save the exact matrix to %s: %s: %s", self.path, type(e).__name__, e)
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            return False

    def load(self, key: Any) -> ExactVectors | None:
        """The matrix saved under ``key``, or None (none saved, another key, unsigned, damaged)."""
        secret = _secret()
        if not key[-1] or secret is None:
            return None
        try:
            # Not followed if a link, never a FIFO or device (an index folder can come with a repository):
            # a regular file, read and mapped through this one descriptor, so a save renaming another file
            # into place meanwhile cannot pair this file's signed sections with that file's matrix.
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("the saved matrix %s cannot be opened (%s); reading the manifest", self.path, e)
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                size = st.st_size
                if not stat.S_ISREG(st.st_mode):
                    raise ValueError("not a regular file")
                mac = f.readline(256).strip()
                head_line = f.readline(1 << 16)
                head = json.loads(head_line)
                if head.get("key") != list(key):
                    return None  # stale: not read further
                if head.get("version") != _VERSION:
                    return None
                sizes = [int(n) for n in head["sizes"]]
                if any(n < 0 for n in sizes) or sum(sizes) > size:
                    raise ValueError("sections larger than the file")
                sections = [f.read(n) for n in sizes]
                offset = f.tell() + (-f.tell() % _ALIGN)
                want = hmac.new(secret, head_line, "sha256")
                for sec in sections:
                    want.update(sec)
                if not hmac.compare_digest(mac, want.hexdigest().encode()):
                    log.warning("the saved matrix %s is not signed by this user's key; reading the manifest", self.path)
                    return None
                n, n_paths, rows, dim = (int(head[k]) for k in ("chunks", "paths", "rows", "dim"))
                ids = sections[0].decode("utf-8", "surrogateescape").split("\0") if n else []
                table = sections[1].decode("utf-8", "surrogateescape").split("\0") if n_paths else []
                path_ix = np.frombuffer(sections[2], dtype=np.int32)
                rowix = np.frombuffer(sections[3], dtype=np.int32).astype(np.int64)
                if len(ids) != n or len(table) != n_paths or len(path_ix) != n or len(rowix) != n:
                    raise ValueError("section sizes do not match the head")
                if n and (path_ix.min() < 0 or path_ix.max() >= n_paths or rowix.min() < 0 or rowix.max() >= rows):
                    raise ValueError("an index points outside its table")
                if rows < 0 or dim <= 0 or size < offset + rows * dim * 4:
                    raise ValueError("the matrix is cut short")
                matrix = (np.memmap(f, dtype=np.float32, mode="r", offset=offset, shape=(rows, dim))
                          if rows else np.zeros((0, dim), dtype=np.float32))
            if rows and _sample_crc([matrix], rows) != head.get("sample"):
                raise ValueError("the matrix's sampled rows do not match the signed head")
            paths = [table[i] for i in path_ix.tolist()]
            return ExactVectors(ids, paths, rowix, [matrix])
        except Exception as e:  # damaged or truncated: read from the manifest, and saved over
            log.warning("the saved matrix %s is unreadable (%s: %s); reading the manifest", self.path,
                        type(e).__name__, e)
            return None


def _sample_crc(blocks: list[np.ndarray], rows: int) -> int:
    """CRC-32 of 64 rows spread over the blocks stacked (signed in the head): a matrix left zero-filled or
    overwritten is caught at the cost of 64 rows read, where a MAC over all of it was most of the old load.
    Read block by block: a patched matrix is not joined into one copy to sample it."""
    picks = np.unique(np.linspace(0, rows - 1, num=min(rows, 64)).astype(np.int64))
    bounds = np.cumsum([len(b) for b in blocks])
    which = np.searchsorted(bounds, picks, side="right")
    starts = bounds - np.array([len(b) for b in blocks])
    sample = np.stack([blocks[w][p - starts[w]] for p, w in zip(picks.tolist(), which.tolist(), strict=True)])
    return zlib.crc32(np.ascontiguousarray(sample, dtype=np.float32).tobytes())
