"""Co-change from git history: files that changed together in recent commits.

Bounded: the last ``max_commits`` non-merge commits; a commit touching many files is
down-weighted (1/log2(1+n)) and one touching more than ``max_files`` is skipped, since
mass renames and formatting sweeps say nothing about which files belong together.

A pair's strength is normalised by how often each file changes at all (the cosine of their
change histories): a changelog that changes with every commit co-changes with everything and
so says little about any one file.

How often each file changed (the same weighted count) is kept too: the file a change will edit
is usually one that changes often (issue 19: in 20 of the 26 dev_mined intent2code questions the
engine missed at rank 1, the gold file had changed more often in the 500 commits before the change
than the file ranked above it; in 6 less), so the learned ranker reads it as a column.

Each commit's message is kept with the files it changed (``History.messages``): the ``commits`` branch
finds the past changes described like a question and ranks the files they edited (issue 19: a change's
description rarely shares a word with the central module it edits, but earlier changes to that module
were described in the same words).
"""

from __future__ import annotations

import math
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..core.git import ask_git
from ..workspace.scan import repository_above
from ..workspace.secrets import redact

COCHANGE_VERSION = 6  # 2: strengths normalised by each file's own change count; 3: those counts kept;
# 4: commit messages kept with their files; 5: paths read NUL-separated, messages capped; 6: messages redacted,
# no pairs from a commit without a parent
MAX_MESSAGE = 4000  # characters of a message kept (subject and the start of the body say what a change is)


def git_head(root: Path) -> str | None:
    """The repository's HEAD, for the workspace or the repository it is a folder of (a package folder of a monorepo
    opened on its own read no history: "not a git repository"; session 39); None when there is none."""
    try:
        if not (root / ".git").exists() and repository_above(root) is None:
            return None
    except OSError:  # a workspace that cannot be entered (its permissions changed): no history to read now
        return None
    res = ask_git(root, "rev-parse", "HEAD")
    return res.stdout.decode("utf-8", "replace").strip() if res is not None and res.returncode == 0 else None


@dataclass(frozen=True)
class History:
    pairs: dict[tuple[str, str], float]  # (a, b) -> co-change strength, both directions
    commits: int  # commits read
    changes: dict[str, float]  # file -> its weighted change count over those commits
    # (message, the files it changed that are indexed) per commit that changed 1..max_files of them
    messages: list[tuple[str, list[str]]] = field(default_factory=list)


def cochange_pairs(root: Path, files: set[str], max_commits: int = 500,
                   max_files: int = 40) -> tuple[dict[tuple[str, str], float], int]:
    h = change_history(root, files, max_commits, max_files)
    return h.pairs, h.commits


def change_history(root: Path, files: set[str], max_commits: int = 500, max_files: int = 40) -> History:
    # Each commit opens with NUL SOH and its message ends with NUL; -z ends every path with NUL, unquoted
    # (git refuses NUL in a message, and no path holds one).
    # `--relative` and `-- .`: the commits that changed the workspace's files, their paths from its root, when it is a
    # folder of the repository (at the repository's top: every commit that changed a file, as before).
    res = subprocess.run(["git", "-C", str(root), "log", f"-n{max_commits}", "--no-merges", "--name-only", "-z",
                          "--relative", "--format=format:%x00%x01%P%x02%s%n%n%b%x00", "--", "."],
                         capture_output=True, text=True, errors="replace", timeout=120)
    if res.returncode != 0:
        raise RuntimeError(res.stderr.strip() or "git log failed")
    pairs: dict[tuple[str, str], float] = defaultdict(float)
    changes: dict[str, float] = defaultdict(float)
    messages: list[tuple[str, list[str]]] = []
    commits = 0
    for block in res.stdout.split("\x00\x01")[1:]:
        head, _, names = block.partition("\x00")
        parents, _, message = head.partition("\x02")
        changed = sorted({n for n in names.removeprefix("\n").split("\x00") if n in files})
        commits += 1
        if not changed or len(changed) > max_files:
            continue
        if message.strip():  # a cloned repository's messages are its own: at most MAX_MESSAGE characters kept
            # Redacted as a file's text is: a key pasted into a commit message was stored and shown in the
            # commits branch's why-line (a newcomer, session 36).
            messages.append((redact(message.strip())[0][:MAX_MESSAGE], changed))
        w = 1.0 / math.log2(1 + len(changed))
        for a in changed:
            changes[a] += w
        if not parents.strip():
            # A commit without a parent (the first, or a shallow clone's oldest) lists every file it holds, added
            # together, not changed together: in a one-commit repository every test "changed with" every source
            # file (a newcomer, session 36). It still counts as a change of each (the churn columns).
            continue
        for i, a in enumerate(changed):
            for b in changed[i + 1:]:
                pairs[(a, b)] += w
                pairs[(b, a)] += w
    return History({(a, b): w / math.sqrt(changes[a] * changes[b]) for (a, b), w in pairs.items()}, commits,
                   dict(changes), messages)
