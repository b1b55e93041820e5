"""Turn a git repository's merged changes into retrieval samples (ARB schema).

One change on the first-parent line (a squash merge, a merge commit or a direct
commit) becomes up to two samples, the way ``dev_mined`` was built:

- ``intent2code``: the change's title and body -> the source files it modified;
- ``code2test``: title and body plus the most-changed source file as anchor -> the
  test files it modified.

Only files that existed before the change count (status ``M``): a file the change
created cannot be retrieved from the tree it was written against. Bot changes, release
bumps, merges that only bring one branch into another ("Merge remote-tracking branch
'origin/stable'") and sweeping changes (more than ``max_files`` files) are skipped: their
"answer" is not a question anybody asks. Every skip is counted with its reason, so a
report can say why N changes gave fewer questions.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..workspace.kinds import file_kind

_BOT = re.compile(r"\[bot\]|dependabot|renovate|pre-commit-ci|github-actions", re.I)
_MERGE_PR = re.compile(r"^Merge pull request #\d+ from \S+")
# A merge that brings one branch into another ("Merge remote-tracking branch 'origin/stable'",
# "Merge branch 'x' into y", "Merge tag 'v1'") has no question in its message, only branch names.
_MERGE_SYNC = re.compile(r"^Merge (remote-tracking branch|branch|branches|tag|commit) ")
_RELEASE = ("bump ", "release ", "prepare release", "update changelog")

# Why a change on the first-parent line gave no question: the reasons `delphi eval` reports.
SKIP_ROOT = "the repository's first commit (nothing before it)"
# A shallow clone's oldest commit also has no parent here: said as what it is (a newcomer, session 29).
SKIP_SHALLOW = "the oldest commit of a shallow clone (`git fetch --unshallow` reads what came before)"
SKIP_BOT = "made by a bot"
SKIP_SYNC = "merged one branch into another (no question in the message)"
SKIP_RELEASE = "a release or version bump"
SKIP_NO_MODIFIED = "modified no existing file (only added, deleted or renamed files)"
SKIP_TOO_MANY = "changed more than {max_files} files"
SKIP_NO_SOURCE = "changed no source file (tests, docs or config only)"
_TRAILER = re.compile(r"^(Signed-off-by|Co-authored-by|Reviewed-by|Change-Id|Acked-by):.*$", re.I | re.M)
_MAX_BODY = 2000


class HistoryError(RuntimeError):
    """The folder is not a git repository, or git failed; the message says which."""


@dataclass
class Change:
    commit: str
    base: str
    time: int
    title: str
    body: str
    modified: list[str] = field(default_factory=list)  # existed before, most-changed first


def git_dir_of(path: str | Path) -> Path:
    p = Path(path).resolve()
    try:
        out = subprocess.run(["git", "-C", str(p), "rev-parse", "--absolute-git-dir"], capture_output=True,
                             text=True, check=True).stdout.strip()
    except FileNotFoundError as e:
        raise HistoryError("git is not installed") from e
    except subprocess.CalledProcessError as e:
        raise HistoryError(f"{p} is not a git repository: {e.stderr.strip()}") from e
    return Path(out)


def is_shallow(git_dir: Path) -> bool:
    """A `--depth` clone: its oldest commits have no parent here though they had one."""
    return (git_dir / "shallow").is_file()


def _git(git_dir: Path, *args: str) -> str:
    try:
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True,
                              errors="replace").stdout
    except subprocess.CalledProcessError as e:
        raise HistoryError(f"git {' '.join(args[:2])} failed: {e.stderr.strip()[:300]}") from e


def _split_message(subject: str, body: str) -> tuple[str, str]:
    body = _TRAILER.sub("", body).strip()
    if _MERGE_PR.match(subject):
        # A merge commit's subject names the branch; the PR title is the body's first line.
        first, _, rest = body.partition("\n")
        return first.strip(), rest.strip()[:_MAX_BODY]
    subject = re.sub(r"\s*\(#\d+\)\s*$", "", subject).strip()
    return subject, body[:_MAX_BODY]


def merged_changes(git_dir: Path, limit: int, rev: str = "HEAD", max_files: int = 30,
                   skipped: Counter[str] | None = None, need_source: bool = False) -> list[Change]:
    """The last ``limit`` usable changes on ``rev``'s first-parent line, newest first.

    Reads back at most ``max(6 * limit, 50)`` changes. ``skipped`` counts why each change read and
    not used was left out; ``need_source``: a change that modified no source file is skipped too
    (it cannot become a question), so ``limit`` counts changes that give questions."""
    skipped = Counter() if skipped is None else skipped
    shallow = is_shallow(git_dir)
    raw = _git(git_dir, "log", "--first-parent", f"-n{max(limit * 6, 50)}", "--format=%H%x00%P%x00%ct%x00%an%x00%s%x00%b%x1e", rev)
    out: list[Change] = []
    for rec in raw.split("\x1e"):
        rec = rec.strip("\n")
        if not rec:
            continue
        parts = rec.split("\x00")
        if len(parts) < 6:
            continue
        commit, parents, ctime, author, subject, body = parts[:6]
        if not parents.strip():
            skipped[SKIP_SHALLOW if shallow else SKIP_ROOT] += 1
            continue
        if _BOT.search(author) or _BOT.search(subject):
            skipped[SKIP_BOT] += 1
            continue
        if _MERGE_SYNC.match(subject):
            skipped[SKIP_SYNC] += 1
            continue
        title, text = _split_message(subject, body)
        if not title or title.lower().startswith(_RELEASE):
            skipped[SKIP_RELEASE] += 1
            continue
        base = parents.split()[0]
        numstat = _git(git_dir, "diff", "--numstat", "--no-renames", "--diff-filter=M", base, commit)
        changed: list[tuple[int, str]] = []
        for line in numstat.splitlines():
            cols = line.split("\t")
            if len(cols) != 3:
                continue
            added, deleted, path = cols
            n = (int(added) if added.isdigit() else 0) + (int(deleted) if deleted.isdigit() else 0)
            changed.append((n, path))
        if not changed:
            skipped[SKIP_NO_MODIFIED] += 1
            continue
        if len(changed) > max_files:
            skipped[SKIP_TOO_MANY.format(max_files=max_files)] += 1
            continue
        if need_source and not any(file_kind(p) == "code" for _n, p in changed):
            skipped[SKIP_NO_SOURCE] += 1
            continue
        changed.sort(key=lambda t: (-t[0], t[1]))
        out.append(Change(commit, base, int(ctime), title, text, [p for _n, p in changed]))
        if len(out) >= limit:
            break
    return out


def samples_of(change: Change, repo: str) -> list[dict[str, Any]]:
    sources = [p for p in change.modified if file_kind(p) == "code"]
    tests = [p for p in change.modified if file_kind(p) == "test"]
    out: list[dict[str, Any]] = []
    common = {"repo": repo, "base_commit": change.base, "fix_commit": change.commit, "time": change.time}
    if sources:
        out.append({**common, "task_type": "intent2code",
                    "query": {"pr_title": change.title, "pr_body": change.body},
                    "gold": {"root_cause_files": sources, "related_tests": tests}})
    if sources and tests:
        out.append({**common, "task_type": "code2test",
                    "query": {"pr_title": change.title, "pr_body": change.body, "changed_file": sources[0]},
                    "gold": {"related_tests": tests, "root_cause_files": sources}})
    for s in out:
        s["id"] = hashlib.sha1(f"{repo}:{change.commit}:{s['task_type']}".encode()).hexdigest()[:16]
    return out


def mine(path: str | Path, limit: int, repo: str | None = None, rev: str = "HEAD",
         skipped: Counter[str] | None = None, need_source: bool = False) -> list[dict[str, Any]]:
    """Samples from the last ``limit`` merged changes of the repository at ``path``, oldest first
    (``skipped``, ``need_source``: see :func:`merged_changes`)."""
    git_dir = git_dir_of(path)
    name = repo or Path(path).resolve().name
    changes = merged_changes(git_dir, limit, rev, skipped=skipped, need_source=need_source)
    samples = [s for c in changes for s in samples_of(c, name)]
    return sorted(samples, key=lambda s: (s["time"], s["id"]))


def checkout(git_dir: Path, commit: str, dest: Path) -> list[str]:
    """Write the tree of ``commit`` to ``dest`` (emptied first) without touching the repository.

    Blobs missing from the object store (partial or shallow clones, large files left out
    of a mirror) are skipped and returned, so one absent file does not lose the commit.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    listing = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit], capture_output=True,
                             check=False)
    if listing.returncode != 0:
        raise HistoryError(f"git ls-tree {commit[:12]} failed: {listing.stderr.decode(errors='replace')[:300]}")
    entries: list[tuple[str, str, str]] = []
    for rec in listing.stdout.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        if kind == "blob" and mode in ("100644", "100755"):  # symlinks and submodules are not files to index
            entries.append((mode, sha, name.decode(errors="surrogateescape")))
    missing: list[str] = []
    proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for mode, sha, name in entries:
            proc.stdin.write(sha.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) < 3 or header[1] != b"blob":
                missing.append(name)
                continue
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)
            target = dest / name
            if dest.resolve() not in target.resolve().parents:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if mode == "100755":
                target.chmod(0o755)
    finally:
        proc.stdin.close()
        proc.wait()
    return missing
