"""An exclusive advisory lock (flock) taken without waiting, shared by the writer lock and the daemon's lock."""

from __future__ import annotations

import fcntl
import os


def take_or_close(fd: int) -> bool:
    """Take ``fd``'s exclusive lock without waiting: True when taken; False, ``fd`` closed, when another open file
    holds it. Any other failure closes ``fd`` and is raised."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except BaseException:
        os.close(fd)
        raise
    return True
