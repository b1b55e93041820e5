"""One warm daemon for many agents: MCP over streamable HTTP on loopback, with a bearer token.

Served by ``delphi serve PATH`` (no editor) or by the language server itself
(``initializationOptions.mcpHttp``). It binds to 127.0.0.1 unless told otherwise; a token
is generated per daemon, written with 0600 permissions beside each workspace's index
(``daemon.token``) with the address in ``daemon.json``, and required on every call.
``delphi mcp PATH`` finds that file and forwards to the daemon instead of opening the
index a second time.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.locks import take_or_close
from ..core.processes import running

if TYPE_CHECKING:
    from ..session import Session


LOOPBACK = ("127.0.0.1", "localhost", "::1")
DAEMON_FILE = "daemon.json"
TOKEN_FILE = "daemon.token"
# Held (flock) by the daemon serving an index folder for as long as it serves it: two `delphi serve` started
# together both saw no daemon.json and both served, the later one's files over the earlier's (an audit).
LOCK_FILE = "daemon.lock"
MCP_PATH = "/mcp"

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
                   Awaitable[None]]


MAX_BODY_BYTES = 4 * 1024 * 1024  # the MCP SDK's own limit on a request's body (DEFAULT_MAX_REQUEST_BODY_SIZE)


def require_token(app: ASGIApp, token: str) -> ASGIApp:
    """Refuse every HTTP request without ``Authorization: Bearer <token>`` (401), before the MCP app."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, expected):
                body = b'{"error": "missing or wrong bearer token (see daemon.token beside the index)"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
            size = dict(scope.get("headers") or []).get(b"content-length", b"")
            if size.isdigit() and int(size) > MAX_BODY_BYTES:
                # The SDK refuses it too, with "Request body too large" and no sizes (a newcomer, session 36).
                why = (f"this request's body is {int(size):,} bytes; the Delphi daemon takes at most "
                       f"{MAX_BODY_BYTES:,} (send a shorter question: a long one is searched by its head and tail)")
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": json.dumps({"error": why}).encode()})
                return
        await app(scope, receive, send)

    return guarded


@dataclass
class Daemon:
    """A running HTTP daemon (in a thread of this process)."""

    url: str
    token: str
    files: list[Path]
    _server: Any
    _thread: threading.Thread
    locks: dict[Path, int]  # index folder -> the fd holding its daemon.lock

    def serve_folder(self, index_dir: Path, root: Path) -> None:
        """A folder added to the session: agents started for it find this daemon too (unless another
        daemon serves it already: its agents stay with that one)."""
        if index_dir not in self.locks:  # folders sharing an index folder share its lock (flock is per open file)
            try:
                fd = claim(index_dir)
            except DaemonRunning:
                fd = None
            if fd is None:
                return
            self.locks[index_dir] = fd
        self.files += write_discovery(index_dir, self.url, self.token, root)

    def drop_folder(self, index_dir: Path) -> None:
        """A folder removed from the session: its agents must no longer be sent here."""
        for f in [f for f in self.files if f.parent == index_dir]:
            if _ours(f, self.url, self.token):
                f.unlink(missing_ok=True)
            self.files.remove(f)
        if index_dir in self.locks:
            os.close(self.locks.pop(index_dir))

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        for f in self.files:
            # Only our own: another daemon may have taken the folder over since (it refuses while we
            # live, but not after a kill -9 of ours); its files must survive our exit.
            if _ours(f, self.url, self.token):
                f.unlink(missing_ok=True)
        for fd in self.locks.values():
            os.close(fd)
        self.locks.clear()


def claim(index_dir: Path) -> int | None:
    """The fd holding ``index_dir``'s daemon lock, or None while another daemon (started or starting) holds it.
    A lock file that is a link or another user's is refused (DaemonRunning), as find_daemon distrusts their files."""
    index_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(index_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise DaemonRunning(f"{index_dir / LOCK_FILE} cannot be taken ({e.strerror}); no daemon started for it") from None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise DaemonRunning(f"{index_dir / LOCK_FILE} belongs to another user; no daemon started for it")
    return fd if take_or_close(fd) else None


def daemon_starting(index_dir: Path) -> bool:
    """Whether a daemon holds ``index_dir``'s lock (serving, or starting before its daemon.json is written)."""
    try:
        fd = os.open(index_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _ours(f: Path, url: str, token: str) -> bool:
    try:
        text = f.read_text()
    except OSError:
        return False
    if f.name == TOKEN_FILE:
        return text.strip() == token
    try:
        info = json.loads(text)
    except ValueError:
        return False
    return info.get("url") == url and info.get("pid") == os.getpid()


_build: str | None = None


def build_id() -> str:
    """This Delphi's version and a digest of its sources: a daemon started before an upgrade (or from another
    checkout) runs other code, and `delphi mcp` of this one must not send its agent there without a word (an older
    daemon answered over the output limit this version keeps; a newcomer, session 31)."""
    global _build
    if _build is None:
        import hashlib

        from .. import __version__

        pkg = Path(__file__).resolve().parent.parent
        h = hashlib.sha1()
        for f in sorted(pkg.rglob("*.py")):
            try:
                h.update(f.relative_to(pkg).as_posix().encode())
                h.update(f.read_bytes())
            except OSError:
                pass
        _build = f"{__version__}+{h.hexdigest()[:12]}"
    return _build


def daemon_build(index_dir: Path) -> str | None:
    """The build a trusted daemon.json names (None: a daemon from before builds were written)."""
    try:
        build = json.loads((index_dir / DAEMON_FILE).read_text()).get("build")
    except (OSError, ValueError, AttributeError):
        return None
    return build if isinstance(build, str) else None


def untrusted_live(index_dir: Path) -> str | None:
    """In words, a daemon.json of this user that is not trusted (readable or writable by others: what Delphi
    wrote before session 30 under a umask of 022) and names a running process of this user; None otherwise. It
    was ignored without a word: `delphi mcp` opened the index beside that daemon, and `delphi serve` started
    a second one over its files (a newcomer, session 31)."""
    f = index_dir / DAEMON_FILE
    try:
        st = f.lstat()
        if st.st_uid != os.getuid() or not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o077:
            return None  # another user's file names no daemon of ours; a private one is find_daemon's
        pid = int(json.loads(f.read_text())["pid"])
        if running(pid) is not True:  # gone, ended, or another user's: no daemon of ours
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # A daemon holds daemon.lock while it serves: not a file left by one long gone whose pid was reused. Its
    # address is not connected to: others can write this file.
    if not daemon_starting(index_dir):
        return None
    return (f"{f} names process {pid}, which is running, but the file is readable or writable by others "
            f"(mode {st.st_mode & 0o777:o}: written by an older Delphi?), so it is not trusted")


class DaemonRunning(RuntimeError):
    """Another live daemon already serves this index."""


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def write_discovery(index_dir: Path, url: str, token: str, root: Path) -> list[Path]:
    """``daemon.token`` and ``daemon.json`` (address, pid) beside the index, both 0600 and created with those
    permissions. ``daemon.json`` followed the umask: under ``umask 000`` in an index folder that existed, another
    local user edited its address in place (the owner unchanged) and ``delphi mcp`` sent them the token with
    every call (a newcomer, session 30)."""
    index_dir.mkdir(parents=True, exist_ok=True)
    info = index_dir / DAEMON_FILE
    for path, text in ((index_dir / TOKEN_FILE, token),
                       (info, json.dumps({"url": url, "pid": os.getpid(), "workspace": str(root),
                                          "started": time.time(), "build": build_id()}))):
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return [info, index_dir / TOKEN_FILE]


def start_in_thread(session: Session, host: str = "127.0.0.1", port: int = 0) -> Daemon:
    """Serve the session's tools over streamable HTTP from a background thread."""
    if not isinstance(host, str) or not host:
        raise ValueError("mcpHost must be a host name or address")
    locks: dict[Path, int] = {}
    try:
        for eng in list(session.engines.values()):
            if eng.index_dir in locks:
                continue  # two folders, one index folder: one lock (flock is per open file, even in one process)
            running = find_daemon(eng.index_dir)
            fd = claim(eng.index_dir) if running is None else None
            if fd is None:
                where = f" at {running[0]}" if running else " (it is starting)"
                raise DaemonRunning(f"a Delphi daemon already serves {eng.root}{where}; agents can use it "
                                    f"(`delphi mcp {eng.root}` forwards to it)")
            locks[eng.index_dir] = fd
        return _start(session, host, port, locks)
    except BaseException:
        for fd in locks.values():
            os.close(fd)
        raise


def _start(session: Session, host: str, port: int, locks: dict[Path, int]) -> Daemon:
    import uvicorn

    from .server import build_server, local_call

    server = build_server(local_call(session))
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    token = secrets.token_urlsafe(32)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}{MCP_PATH}"
    config = uvicorn.Config(require_token(app, token), log_level="warning", lifespan="on", access_log=False)
    userver = uvicorn.Server(config)
    userver.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # the owner handles signals

    thread = threading.Thread(target=lambda: userver.run(sockets=[sock]), name="delphi-mcp-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not userver.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not userver.started:
        raise RuntimeError(f"the MCP HTTP server did not start on {host}:{bound}")
    files: list[Path] = []
    for eng in list(session.engines.values()):
        files += write_discovery(eng.index_dir, url, token, eng.root)
    return Daemon(url, token, files, userver, thread, locks)


def find_daemon(index_dir: Path) -> tuple[str, str] | None:
    """(url, token) of a live daemon serving this index, or None (no file, stale pid, nothing listening)."""
    try:
        # Only files this user wrote, that nobody else can read or write: in a shared or world-writable
        # index folder another local user could otherwise plant (or edit) a daemon.json that sends our
        # agents' questions, paths and token to their own server.
        for f in (index_dir / DAEMON_FILE, index_dir / TOKEN_FILE):
            st = f.lstat()
            if st.st_uid != os.getuid() or not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077:
                return None
        info = json.loads((index_dir / DAEMON_FILE).read_text())
        token = (index_dir / TOKEN_FILE).read_text().strip()
        pid, url = int(info["pid"]), str(info["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if running(pid) is not True:  # gone, ended, or another user's process: not our daemon
        return None
    from urllib.parse import urlparse

    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout=1):
            pass
    except OSError:
        return None
    return url, token
