"""The in-memory view of a big index, kept on disk between processes.

A server's first answer waits for the view that every query reads (file list, symbols, chunk lines, the
file graph with every import resolved). It is derived from the manifest alone, and on a large workspace
building it is most of the first answer (issue 18: 25 s on the 100,000-file workspace, the file graph
12.7 s of it). Kept here, keyed by what it was built from, a process started on an unchanged index loads
it instead of building it again.

The key is the manifest's identity and content version (a random token set anew by every write of files,
chunks, symbols or imports, see :meth:`MetaStore.content_version`) and a digest of the code that builds the
view, so a
view from another manifest, another state of it, or other code is never served. The file is a pickle:
it lives in the index folder, which is the user's own (mode 0700) and holds the workspace's text anyway.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FILE = "view.pickle"
_PACKAGE = Path(__file__).resolve().parent.parent
# The modules whose code decides what the view holds (its tables, the graph, import resolution, kinds).
_SOURCES = ("retrieval/context.py", "indexing/graph.py", "indexing/imports.py", "workspace/kinds.py",
            "core/tokens.py", "core/__init__.py", "languages", "stores/meta.py")
_code_digest: str | None = None


def code_digest() -> str:
    """A digest of the sources that build the view: a view built by other code is not loaded."""
    global _code_digest
    if _code_digest is None:
        h = hashlib.sha1()
        try:
            for rel in _SOURCES:
                p = _PACKAGE / rel
                for f in sorted(p.glob("*.py")) if p.is_dir() else [p]:
                    h.update(f.name.encode())
                    h.update(f.read_bytes())
            _code_digest = h.hexdigest()
        except OSError as e:  # an install without sources: no digest, so nothing is loaded or saved
            log.warning("the view cannot be saved: its code's sources are unreadable (%s)", e)
            _code_digest = ""
    return _code_digest


class ViewCache:
    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE

    def load(self, key: Any) -> Any | None:
        """The view saved under ``key``, or None (none saved, saved under another key, unreadable)."""
        if not key[-1]:
            return None  # no code digest
        try:
            with open(self.path, "rb") as f:
                if pickle.load(f) != key:  # the key first: a stale view is not unpickled at all
                    return None
                return pickle.load(f)
        except FileNotFoundError:
            return None
        except Exception as e:  # a damaged or truncated file: built again, and saved over
            log.warning("the saved view %s is unreadable (%s: %s); building it", self.path, type(e).__name__, e)
            return None

    def save(self, key: Any, view: Any) -> bool:
        """Write ``view`` under ``key`` (a temporary file renamed into place: a reader sees the old file or
        the new one). A failure (disk full) costs the next process a build, nothing else."""
        if not key[-1]:
            return False  # no code digest: a view saved now could be loaded by other code later
        tmp: Path | None = None
        try:
            fd, name = tempfile.mkstemp(prefix=f"{FILE}.", suffix=".tmp", dir=self.path.parent)
            tmp = Path(name)
            with os.fdopen(fd, "wb") as f:
                pickle.dump(key, f, protocol=pickle.HIGHEST_PROTOCOL)
                pickle.dump(view, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
            return True
        except Exception as e:
            log.warning("could not save the view to %s: %s: %s", self.path, type(e).__name__, e)
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            return False
