"""Whether a process runs, for the files that name one (the writer lock, a daemon's, a snapshot's, the editor's)."""

from __future__ import annotations

import os


def running(pid: int) -> bool | None:
    """True while ``pid`` runs; False when it is gone or has ended and waits to be reaped (a zombie); None when it
    is another user's (it exists, and nothing more is known).

    A zombie is not running: `delphi index` killed by `timeout -s KILL` (which takes itself down with it) is left
    to a container's first process, which may reap it late or never, and health said "another process is
    indexing" of a process that had ended (a newcomer's first use, session 44: 3 kills in 4). Where there is no
    ``/proc`` (macOS, the BSDs) a zombie still answers the signal and counts as running."""
    if pid <= 0:  # kill(0) and kill(-1) "succeed": no process named
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]  # after the command's name, which may hold anything
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")  # reaped since the signal; or no /proc (macOS): the signal says
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")
