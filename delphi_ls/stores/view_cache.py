"""The in-memory view of a big index, kept on disk between processes.

A server's first answer waits for the view that every query reads (file list, symbols, chunk lines, the
file graph with every import resolved). It is derived from the manifest alone, and on a large workspace
building it is most of the first answer (issue 18: 25 s on the 100,000-file workspace, the file graph
12.7 s of it). Kept here, keyed by what it was built from, a process started on an unchanged index loads
it instead of building it again.

The key is the manifest's identity and content version (a random token set anew by every write of files,
chunks, symbols or imports, see :meth:`MetaStore.content_version`) and a digest of the code that builds the
view, so a view from another manifest, another state of it, or other code is never served. The file holds
a pickle, loaded only when a MAC under this user's own key (kept outside every index folder) matches.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import pickle
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs

log = logging.getLogger(__name__)

FILE = "view.pickle"
_PACKAGE = Path(__file__).resolve().parent.parent
# The modules whose code decides what the view holds (its tables, the graph, import resolution, kinds).
_SOURCES = ("retrieval/context.py", "retrieval/path_index.py", "indexing/graph.py", "indexing/imports.py", "workspace/kinds.py",
            "core/tokens.py", "core/__init__.py", "languages", "stores/meta.py", "stores/exact.py")
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


def _secret() -> bytes | None:
    """This user's key for the saved views' MAC, in the user's own cache folder (never in an index folder,
    which may sit inside a workspace a repository controls): made once, mode 0600. None: unusable."""
    path = Path(platformdirs.user_cache_dir("delphi")) / "view-cache.key"
    try:
        return _usable(path.read_bytes())
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        # Written whole to a temporary file, then linked into place only if none is there: a kill or a full
        # disk midway cannot leave a short key behind (an empty one signed what anyone could; review 9).
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix="view-cache.key.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            os.link(tmp, path)
        finally:
            os.unlink(tmp)
    except FileExistsError:
        pass  # another process made it first
    except OSError:
        return None
    try:
        return _usable(path.read_bytes())
    except OSError:
        return None


def _usable(key: bytes) -> bytes | None:
    return key if len(key) >= 32 else None  # a damaged key file: nothing is saved or loaded


def remove_stale_saves(folder: Path, *names: str) -> None:
    """A process killed while saving leaves its temporary file (up to hundreds of MB on the 100k workspace;
    review 9): removed once it is an hour old (a younger one may be another process's save under way)."""
    try:
        for name in names:
            for tmp in folder.glob(f"{name}.*.tmp"):
                if time.time() - tmp.stat().st_mtime > 3600:
                    tmp.unlink(missing_ok=True)
    except OSError:
        pass


class ViewCache:
    """``view.pickle``: a line with the MAC (HMAC-SHA256 under this user's key, :func:`_secret`) of what
    follows, a line with the key as JSON, then the pickled view. A pickle runs code when loaded, and an
    index folder can be one a cloned repository ships (``index_dir`` inside a workspace): a file this user's
    key did not sign is never unpickled."""

    def __init__(self, folder: Path, name: str = FILE) -> None:
        self.path = folder / name
        remove_stale_saves(folder, name)

    def holds(self, key: Any) -> bool:
        """Whether the file is saved under ``key`` (its head only; the body is neither read nor trusted)."""
        try:
            with open(self.path, "rb") as f:
                f.readline()  # the MAC
                return bool(json.loads(f.readline()) == list(key))
        except (OSError, ValueError):
            return False

    def load(self, key: Any) -> Any | None:
        """The view saved under ``key``, or None (none saved, saved under another key, unsigned, unreadable)."""
        secret = _secret()
        if not key[-1] or secret is None:
            return None  # no code digest, or no key to check a signature with
        try:
            with open(self.path, "rb") as f:
                mac = f.readline().strip()
                head = f.readline()
                if json.loads(head) != list(key):  # a stale view is not read further
                    return None
                body = f.read()
            want = hmac.new(secret, head, "sha256")
            want.update(body)  # not head + body: a copy of the whole file (74 MB for the 100k view)
            if not hmac.compare_digest(mac, want.hexdigest().encode()):
                log.warning("the saved view %s is not signed by this user's key; building it", self.path)
                return None
            return pickle.loads(body)
        except FileNotFoundError:
            return None
        except Exception as e:  # a damaged or truncated file: built again, and saved over
            log.warning("the saved view %s is unreadable (%s: %s); building it", self.path, type(e).__name__, e)
            return None

    def save(self, key: Any, view: Any) -> bool:
        """Write ``view`` under ``key`` (a temporary file renamed into place: a reader sees the old file or
        the new one). A failure (disk full) costs the next process a build, nothing else. The pickle is
        streamed to the file with its MAC computed on the way (the MAC line written last, in place): made
        in memory, then joined to its head for the MAC, it cost twice its size again (600 MB for the 100k
        workspace's exact matrix when it was saved this way, session 9; now stores/exact_file.py)."""
        secret = _secret()
        if not key[-1] or secret is None:
            return False  # no code digest (other code could load it later), or no key to sign with
        tmp: Path | None = None
        try:
            head = (json.dumps(list(key)) + "\n").encode()
            mac = hmac.new(secret, head, "sha256")
            fd, name = tempfile.mkstemp(prefix=f"{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            tmp = Path(name)
            with os.fdopen(fd, "wb") as f:
                f.write(b"0" * mac.digest_size * 2 + b"\n")  # the MAC's place, filled in below
                f.write(head)
                pickle.dump(view, _Signing(f, mac), protocol=pickle.HIGHEST_PROTOCOL)
                f.seek(0)
                f.write(mac.hexdigest().encode())
            os.replace(tmp, self.path)
            return True
        except Exception as e:
            log.warning("could not save the view to %s: %s: %s", self.path, type(e).__name__, e)
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            return False


class _Signing:
    """A file for pickle.dump that feeds what it writes to a MAC."""

    def __init__(self, f: Any, mac: Any) -> None:
        self._f, self._mac = f, mac

    def write(self, b: Any) -> int:
        self._mac.update(b)
        return self._f.write(b)
