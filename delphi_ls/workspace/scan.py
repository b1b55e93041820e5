"""Which files of a workspace are indexed, and why the others are not.

The rule is "what git would track": nested ``.gitignore`` files, ``.git/info/exclude``
and a ``.delphiignore`` at the root, applied the way git applies them (a pattern is
relative to the folder of the file that holds it; an ignored folder is not entered).
Symlinks are never followed, so a link cannot lead out of the root or into a loop:
not by the scan, and not when a file is read (:func:`read_no_follow` opens each folder
and the file relative to its parent's descriptor with ``O_NOFOLLOW``, so a file swapped
for a link between scan and read is refused, not followed). Editor buffers pass the
same rules (:func:`skip_reason`) before any of their text is indexed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from ..core.notebooks import is_notebook
from ..core.text import byte_order_mark, decode
from .excludes import user_excludes_file
from .vendored import Vendored, parse_attributes

LOCKFILES = {
    "package-lock.json", "pnpm-lock.yaml", "yarn.lock", "poetry.lock", "Pipfile.lock",
    "Cargo.lock", "Gemfile.lock", "go.sum", "composer.lock", "uv.lock", "bun.lockb",
    "npm-shrinkwrap.json", "Package.resolved", "packages.lock.json", "gradle.lockfile", "conda-lock.yml",
}
# Compilers' outputs by name (protoc's for each language, Dart's build_runner, Visual Studio's designers).
GENERATED_SUFFIXES = (".min.js", ".min.css", ".map", ".pb.go", ".generated.go", ".g.cs", "_pb2.py", ".snap",
                      ".pb.h", ".pb.cc", "_pb2_grpc.py", "_pb2.pyi", "_pb.js", "_pb.d.ts", ".pb.swift", ".g.dart",
                      ".freezed.dart", ".designer.cs", ".generated.ts")
BINARY_EXTENSIONS = {
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".psd", ".pdf", ".zip", ".gz",
    ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar", ".jar", ".war", ".class", ".o", ".a", ".so", ".dylib",
    ".dll", ".exe", ".bin", ".wasm", ".pyc", ".pyo", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".mp3",
    ".mp4", ".mov", ".avi", ".wav", ".ogg", ".flac", ".svg", ".db", ".sqlite", ".parquet", ".npy",
    ".onnx", ".safetensors", ".pt", ".pkl", ".ai", ".eps",
}
# Files that hold credentials by convention: never indexed, even when git tracks them or no ignore
# rule names them (a newcomer's untracked `.env` with an AWS key came back from `delphi context`).
# Templates meant to be shared (`.env.example`) are ordinary text.
# Under other usual names (a newcomer's test, session 40: a kubeconfig's token and key, a Terraform state's database
# password, `production.env`, Rails' `secrets.yml` came back verbatim): Terraform's state keeps every resource's
# attributes in clear and its variable files hold what is not committed; `*.env` is a dotenv file; WordPress's,
# Azure Functions' local, rclone's and Cargo's files hold passwords and tokens.
SECRET_NAMES = {".env", ".netrc", "_netrc", ".pgpass", "pgpass.conf", ".npmrc", ".pypirc", "credentials",
                "credentials.toml", ".git-credentials", "credentials.json", "client_secret.json", ".htpasswd",
                "htpasswd", ".vault-token", ".s3cfg", ".boto", ".my.cnf", ".dockercfg", ".dockerconfigjson",
                ".terraformrc", "terraform.rc", "credentials.tfrc.json", "local.settings.json", "wp-config.php",
                "rclone.conf"}
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".gpg", ".ppk", ".p8",
                   ".tfstate", ".tfstate.backup", ".tfvars", ".tfvars.json", ".env", ".kubeconfig",
                   ".dockerconfigjson")
# `secrets.yml` (Rails), `.streamlit/secrets.toml`, `values-secrets.yaml`: data files named for secrets (`secrets.py`
# is code: Python's module of that name).
SECRET_STEMS = ("-secrets", "_secrets", ".secrets")  # not `nosecrets.json`
SECRET_DATA_EXTENSIONS = (".yml", ".yaml", ".json", ".toml", ".ini", ".conf", ".properties", ".cfg")
# A Google Cloud key file under its console's names (`service-account-prod.json`, `service_account.json`).
SERVICE_ACCOUNT_PREFIXES = ("service-account", "service_account", "serviceaccount")
# SSH private keys under a name that starts like the defaults and has no extension (`id_rsa_github`,
# `id_ed25519_work`; `id_rsa.pub` is public and `id_rsa_util.c` is code). Google's OAuth client files are
# `client_secret_<id>.json` (`client_secret.py` is code).
SSH_KEY_PREFIXES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
SECRET_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
_TEMPLATE_STEMS = ("example", "sample", "template", "default", "dist")


# Credentials kept under a generic name in a tool's own folder (`config`, `hosts.yml`): matched by the path's end.
# A shell's or REPL's history holds the keys and passwords typed at it (`export OPENAI_API_KEY=…`, `mysql -p…`).
# Both came back from a `delphi mcp` started in a home folder (a newcomer's test, session 27).
SECRET_PATH_ENDS = (".kube/config", ".docker/config.json", "gh/hosts.yml", ".config/hub", ".aws/config",
                    ".terraform.d/credentials.tfrc.json", ".config/gcloud/credentials.db")


def is_secret_file(rel: str) -> bool:
    """A file that holds credentials by its name or place (``rel``: workspace-relative, or a bare name)."""
    low = rel.rpartition("/")[2].lower()
    if low.startswith(".") and (low.endswith("_history") or low in {".histfile", ".lesshst"}):  # .bash_history
        return True
    if any(rel == e or rel.endswith("/" + e) for e in SECRET_PATH_ENDS):
        return True
    if low.startswith(".env"):  # .env, .env.local, .envrc (direnv), .env-prod, .env_prod
        return not low.endswith(SECRET_TEMPLATE_SUFFIXES)
    if low.startswith(SSH_KEY_PREFIXES) and "." not in low:
        return True
    if low.startswith(("client_secret", *SERVICE_ACCOUNT_PREFIXES)) and low.endswith(".json"):
        return True
    stem, ext = os.path.splitext(low)
    if ext == ".env" and stem.startswith(_TEMPLATE_STEMS):  # `sample.env`, `example.env`: shared templates
        return False
    if stem.startswith("kubeconfig") and ext in ("", ".yaml", ".yml", ".json", ".conf"):  # not `kubeconfig.go`
        return True
    if ext in SECRET_DATA_EXTENSIONS and (stem == "secrets" or stem.endswith(SECRET_STEMS)) \
            and "/workflows/" not in f"/{rel}":  # a CI workflow that checks for secrets is code
        return True
    return low in SECRET_NAMES or low.endswith(SECRET_SUFFIXES)


UNDECODABLE_NAME = "file name is not valid UTF-8"
ALWAYS_SKIPPED_DIRS = {".git", ".hg", ".svn"}
# Only a marker in a comment at the start of a line counts: code that *mentions* it is not generated.
GENERATED_MARK = re.compile(
    rb"^[ \t]*(?://|#|/\*|\*|<!--|--)[ \t]*(?:Code generated .* DO NOT EDIT|@generated\b|"
    rb"This file (?:is|was) (?:automatically|auto-?) ?generated|Generated by .{1,100}DO NOT EDIT|"
    rb"GENERATED CODE -- DO NOT EDIT|<auto-generated)", re.M)


@dataclass(frozen=True)
class FileEntry:
    path: str  # workspace-relative, "/"-separated
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: list[FileEntry] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> reason
    # Folders holding a `.git` of their own (submodules, nested clones) and the top `.gitattributes`' linguist
    # lines: which files are other projects' code (workspace/vendored.py). A walk's only: a named scan has neither.
    vendored: Vendored | None = None


class _Spec:
    """One ignore file's patterns, with one regular expression that any of them matching matches. Most paths a
    walk checks match none, and pathspec tries each pattern in Python: at the 100k workspace (163,100 checks
    against 41 patterns on average) that was 18 of a 29 s scan under the profiler, the staleness check every
    health report runs and every catch-up's walk (session 24). A path the quick test matches is decided by
    pathspec itself (the last matching pattern wins), so the verdicts are pathspec's."""

    __slots__ = ("spec", "files", "_any")

    def __init__(self, patterns: list[GitIgnoreSpecPattern]) -> None:
        self.spec = pathspec.PathSpec(patterns)
        # A file by git's precedence: a pattern that matched it through a folder (`!*/`) does not outrank one that
        # matched the file (`*`): the whitelist style `*`, `!*/`, `!*.ts` indexed every file in a sub-folder, a
        # `settings.local.ini` with a password among them (a newcomer, session 39). Folders as before (pathspec's
        # GitIgnoreSpec calls `packages/` ignored there, and git enters it).
        self.files = pathspec.GitIgnoreSpec(patterns)
        regexes = [p.regex.pattern for p in patterns if p.include is not None and p.regex is not None]
        # pathspec ends each regex with a named group (`ps_d`), a name the alternation cannot repeat: only that
        # suffix is rewritten (a `(?P<` inside a line's own `[...]` is text, and rewriting it changed the class).
        plain = [_without_ps_d(r) for r in regexes]
        self._any: Callable[[str], object] = _no_match  # no pattern with a verdict: pathspec gives None
        if any("(?P<" in r for r in plain):  # not pathspec's form: pathspec alone decides
            self._any = _any_match
        elif plain:
            # Most lines are a name anywhere (`*.pyc`, `node_modules/`): `^(?:.+/)?TAIL`. Their tails go in one
            # group behind one such prefix, which the engine then backtracks through once, not once per line
            # (the 100k workspace's 163,046 checks: 4.2 → 1.4 s under the profiler).
            anywhere = [r[len(_ANYWHERE):] for r in plain if r.startswith(_ANYWHERE)]
            rest = [r for r in plain if not r.startswith(_ANYWHERE)]
            alts = ([_ANYWHERE + "(?:" + "|".join(f"(?:{t})" for t in anywhere) + ")"] if anywhere else []) + rest
            try:
                quick = re.compile("|".join(f"(?:{r})" for r in alts))
            except re.error:  # not seen (an inline flag mid-expression would do it): pathspec alone decides
                self._any = _any_match
                return
            # Every gitignore regex is anchored at the start (`^`): `match` tries each alternative once.
            self._any = quick.match if all(r.startswith("^") for r in plain) else quick.search

    def include(self, probe: str) -> bool | None:
        if self._any(probe) is None:
            return None
        return (self.spec if probe.endswith("/") else self.files).check_file(probe).include


_ANYWHERE = "^(?:.+/)?"
_PS_D_SUFFIXES = (("(?:(?P<ps_d>/)|$)", "(?:/|$)"), ("(?P<ps_d>/)", "/"))


def _without_ps_d(regex: str) -> str:
    for suffix, plain in _PS_D_SUFFIXES:
        if regex.endswith(suffix):
            return regex[: -len(suffix)] + plain
    return regex


def _no_match(_probe: str) -> None:
    return None


def _any_match(_probe: str) -> bool:
    return True


class _Ignores:
    """Gitignore specs, each anchored at the folder that holds it; a child folder's view shares its
    parent's specs (immutable), so the walk needs no recursion and no push/pop. A spec of a folder above the
    workspace (the repository's, when the workspace is one of its folders) is anchored there: ``lead`` is the
    workspace root's path from that folder."""

    def __init__(self, specs: tuple[tuple[str, _Spec, str], ...] = ()) -> None:
        self._specs = specs

    def specs(self) -> list[_Spec]:
        return [spec for _b, spec, _l in self._specs]

    def child(self, base: str, lines: list[str]) -> _Ignores:
        lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines:
            return self
        patterns = []
        for ln in lines:
            try:
                patterns.append(GitIgnoreSpecPattern(ln))
            except ValueError:
                continue  # git ignores a line it cannot read; so do we
        if not patterns:
            return self
        return _Ignores(self._specs + ((base, _Spec(patterns), ""),))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        # Later (deeper) files win; within a file, pathspec applies negations in order.
        verdict: bool | None = None
        for base, spec, lead in self._specs:
            sub = rel[len(base) + 1:] if base else rel
            if base and not rel.startswith(base + "/"):
                continue
            if lead:
                sub = f"{lead}/{sub}"
            include = spec.include(sub + "/" if is_dir else sub)
            if include is not None:
                verdict = include
        return bool(verdict)


def _read_lines(p: str | Path, follow: bool = False) -> list[str]:
    """An ignore file's lines; a link in its place is not followed (its target could be anywhere), unless
    ``follow``: the user's own excludes file is often a link into a dotfiles repository."""
    try:
        fd = os.open(p, os.O_RDONLY | (0 if follow else os.O_NOFOLLOW) | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(1_000_000)
    except OSError:
        return []
    finally:
        os.close(fd)
    # Decoded as file text is (core/text.py): a byte-order mark, which Windows editors write, made the first
    # pattern `\ufeff*.log` and hid nothing (git skips the mark; a review, session 30).
    return decode(data)[0].splitlines()


def printable_path(rel: str) -> str:
    """A path that can be stored and shown: bytes that are not UTF-8 (kept by the OS as surrogate
    escapes) become ``\\xff`` text, so a reason about such a file can itself be written anywhere."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def utf8_name(name: str) -> bool:
    """Whether a name (from the file system, a URI or an argument: undecodable bytes as lone surrogates) is text."""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _info_exclude(root: Path) -> Path:
    """The repository's ``info/exclude``: in ``.git/`` for a plain clone; for a worktree or a submodule, whose
    ``.git`` is a file naming its git folder (``gitdir: ...``), in that folder's common dir (a worktree's files
    that git hides were indexed; a newcomer, session 29). Read only as ignore patterns: it can only keep files
    out of the index, whatever folder a hostile ``.git`` file names."""
    dot = root / ".git"
    try:
        if stat.S_ISREG(os.lstat(dot).st_mode):
            m = re.match(r"gitdir:\s*(.+)", "\n".join(_read_lines(dot)[:1]))
            if m:
                gitdir = Path(m.group(1).strip())
                gitdir = gitdir if gitdir.is_absolute() else root / gitdir
                common = (_read_lines(gitdir / "commondir") or [""])[0].strip()
                base = (Path(common) if Path(common).is_absolute() else gitdir / common) if common else gitdir
                return base / "info" / "exclude"
    except OSError:
        pass
    return dot / "info" / "exclude"


def repository_above(root: Path) -> tuple[Path, str] | None:
    """The repository a workspace folder without a ``.git`` of its own lies in, and the folder's path from its top:
    an editor or `delphi` opened on a package of a monorepo indexed what the repository's `.gitignore` hides
    (build output, a `secret_notes.txt`, logs; session 39). Not a repository at the home folder or the file
    system's root: a dotfiles repository there ignores everything (`*`) and tracks nothing of the projects below.
    Not one another user owns."""
    try:
        if os.path.lexists(root / ".git"):
            return None
        home = Path.home().resolve()
    except (OSError, RuntimeError):
        home = None
    for top in root.parents:
        try:
            if os.path.lexists(top / ".git"):
                if top == home or top == top.parent or os.lstat(top / ".git").st_uid != os.getuid():
                    # Nor another user's (a `/tmp/.git` anyone can make): its rules would hide this folder's files
                    # and its history be read as this folder's. git refuses such a repository too (safe.directory).
                    return None
                return top, root.relative_to(top).as_posix()
        except OSError:
            return None
    return None


def _top_ignores(root: Path, extra_ignores: list[str] | None, fresh: bool = False) -> _Ignores:
    # In git's order of precedence, lowest first: the user's own excludes file, the repository's
    # info/exclude, the `.gitignore` files of the repository's folders above the workspace (when it is one of
    # its folders), then Delphi's own rules. ``fresh``: a walk asks git where the user's file is again.
    user = user_excludes_file(root, fresh=fresh)
    user_lines = _read_lines(user, follow=True) if user is not None else []
    above = repository_above(root)
    if above is None:
        return _Ignores().child("", user_lines + _read_lines(_info_exclude(root)) + _read_lines(root / ".delphiignore")
                                + list(extra_ignores or []))
    top, lead = above
    parts = lead.split("/")
    # (how many of the lead's folders below the top the file sits in, its lines): the user's file and info/exclude
    # at the top, then the top's .gitignore and each folder's down to the workspace's parent.
    # Each file's patterns compiled once (an editor buffer's check builds these too).
    levels = [(i, spec) for i, lines in [(0, user_lines + _read_lines(_info_exclude(top)))]
              + [(i, _read_lines(top.joinpath(*parts[:i]) / ".gitignore")) for i in range(len(parts))]
              for spec in _Ignores().child("", lines).specs()]
    for k in range(1, len(parts) + 1):
        # A workspace folder these rules ignore (a vendored package, a dependency opened to read it) was opened on
        # purpose: git's rules from above do not apply to it then, only its own. (The rules of a folder above the
        # k-th, read from there.)
        folder = _Ignores(tuple(("", spec, "/".join(parts[i:k - 1])) for i, spec in levels if i < k))
        if folder.ignored(parts[k - 1], True):  # (the user's own file applies anywhere, as outside a repository)
            return _Ignores().child("", user_lines + _read_lines(root / ".delphiignore") + list(extra_ignores or []))
    ign = _Ignores(tuple(("", spec, "/".join(parts[i:])) for i, spec in levels))
    return ign.child("", _read_lines(root / ".delphiignore") + list(extra_ignores or []))


_ATTRIBUTES: dict[str, tuple[tuple[int, int, int], list[tuple[str, str, bool | None]]]] = {}


def attributes_of(root: Path) -> Vendored:
    """The workspace's top `.gitattributes`, as far as Delphi reads it (its linguist lines). Parsed once per
    version of the file: :func:`skip_reason` asks for each buffer and each path an editor's save names."""
    path = os.path.join(root, ".gitattributes")
    try:
        st = os.lstat(path)
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return Vendored()
    kept = _ATTRIBUTES.get(path)
    if kept is None or kept[0] != key:
        kept = _ATTRIBUTES[path] = (key, parse_attributes("\n".join(_read_lines(path))))
    return Vendored(list(kept[1]))


def scan(root: Path, max_file_bytes: int, extra_ignores: list[str] | None = None) -> ScanResult:
    root = root.resolve()
    vendored = attributes_of(root)
    out = ScanResult(vendored=vendored)
    repos: list[str] = []
    # An explicit stack of (entries still to visit, folder, ignore rules) instead of recursion: a folder
    # chain thousands deep must not hit Python's recursion limit. Order is the same as a recursive walk.
    stack: list[tuple[Iterator[os.DirEntry[str]], str, _Ignores]] = []

    def enter(dir_abs: str, dir_rel: str, ign: _Ignores) -> None:
        # A string join: a Path per folder was 2 of the 100k workspace's 13 s scan under the profiler.
        ign = ign.child(dir_rel, _read_lines(os.path.join(dir_abs, ".gitignore")))
        try:
            with os.scandir(dir_abs) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            out.skipped[printable_path(dir_rel) or "."] = f"unreadable folder: {e.strerror}"
            entries = []
        stack.append((iter(entries), dir_rel, ign))

    enter(str(root), "", _top_ignores(root, extra_ignores, fresh=True))
    while stack:
        it, dir_rel, ign = stack[-1]
        e = next(it, None)
        if e is None:
            stack.pop()
            continue
        rel = f"{dir_rel}/{e.name}" if dir_rel else e.name
        try:
            if not utf8_name(e.name):
                # The index stores text; such a name cannot be stored, searched or sent over LSP.
                out.skipped[printable_path(rel)] = UNDECODABLE_NAME
                continue
            if e.is_symlink():
                out.skipped[rel] = "symlink (not followed)"
                continue
            if e.name in ALWAYS_SKIPPED_DIRS:
                if e.name == ".git" and dir_rel:
                    repos.append(dir_rel)  # another repository's top: a submodule, a nested clone
                continue  # a worktree's or submodule's `.git` file too: git never tracks it (it names a local path)
            if e.is_dir(follow_symlinks=False):
                if ign.ignored(rel, True):
                    continue
                enter(e.path, rel, ign)
                continue
            if not e.is_file(follow_symlinks=False):
                out.skipped[rel] = "not a regular file"
                continue
            if ign.ignored(rel, False):
                continue
            st = e.stat(follow_symlinks=False)
        except OSError as err:
            out.skipped[rel] = f"unreadable: {err.strerror}"
            continue
        reason = _static_skip_reason(e.name, rel, st.st_size, max_file_bytes, vendored.generated(rel))
        if reason:
            out.skipped[rel] = reason
            continue
        out.files.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
    vendored.repos = tuple(sorted(repos))
    return out


def skip_reason(root: Path, rel: Any, settings: Any, size: int | None = None) -> str | None:
    """Why the file at workspace-relative ``rel`` would not be indexed by :func:`scan`, or None.

    For editor buffers (the LSP session may call it too): a buffer is indexed only when the file it
    stands for would be. ``settings`` needs ``max_file_bytes`` and ``extra_ignores``; ``size`` is the
    buffer's size in bytes (default: the file's on disk). The file need not exist yet.
    """
    if not isinstance(rel, str) or not rel:
        return "not a workspace path"
    if not utf8_name(rel):
        return UNDECODABLE_NAME
    if rel.startswith("/") or "\0" in rel:
        return "outside the workspace"
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "outside the workspace"
    if any(p in ALWAYS_SKIPPED_DIRS for p in parts):
        return "inside a version-control folder"
    root = Path(root).resolve()
    ign = _top_ignores(root, getattr(settings, "extra_ignores", None))
    here = root
    exists = True  # a new file (or folder) not on disk yet is judged by its name alone
    for i, part in enumerate(parts):
        dir_rel = "/".join(parts[:i])
        if i:
            if ign.ignored(dir_rel, True):
                return "ignored by .gitignore/.delphiignore rules"
        if exists:
            ign = ign.child(dir_rel, _read_lines(here / ".gitignore"))
            here = here / part
            try:
                st = os.lstat(here)
            except FileNotFoundError:
                exists = False
                st = None
            except OSError as e:
                return f"unreadable: {e.strerror}"
            if st is not None:
                if stat.S_ISLNK(st.st_mode):
                    return "symlink (not followed)"
                last = i == len(parts) - 1
                if last and not stat.S_ISREG(st.st_mode):
                    return "not a regular file"
                if not last and not stat.S_ISDIR(st.st_mode):
                    return "not a workspace path"
                if last and size is None:
                    size = st.st_size
    if ign.ignored(rel, False):
        return "ignored by .gitignore/.delphiignore rules"
    return _static_skip_reason(parts[-1], rel, size if size is not None else 1, settings.max_file_bytes,
                               attributes_of(root).generated(rel))


def is_indexable(root: Path, rel: str, settings: Any, size: int | None = None) -> bool:
    """True when :func:`skip_reason` has nothing against ``rel`` (see there)."""
    return skip_reason(root, rel, settings, size) is None


class SkipFile(Exception):
    """A file that must not be read, with the reason to record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_no_follow(root: Path, rel: str, max_bytes: int) -> bytes:
    """The bytes of ``root/rel``, never through a symlink, not even one swapped in after the scan.

    Each folder is opened relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` and the
    file with ``O_NOFOLLOW``, so no component can be a link when it is opened (checking first and then
    opening by path would leave a window for a race). Raises :class:`SkipFile` (link, not a regular
    file, too large now) or ``OSError`` (``FileNotFoundError`` when it vanished).
    """
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise SkipFile("outside the workspace")
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for p in parts[:-1]:
            try:
                nxt = os.open(p, dir_flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SkipFile("symlink (not followed)") from None
                raise
            os.close(fd)
            fd = nxt
        try:
            # O_NONBLOCK: a FIFO swapped in must not hang the open; it is refused below.
            ffd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise SkipFile("symlink (not followed)") from None
            raise
    finally:
        os.close(fd)
    try:
        st = os.fstat(ffd)
        if not stat.S_ISREG(st.st_mode):
            raise SkipFile("not a regular file")
        if st.st_size > max_bytes:
            raise SkipFile(f"too large ({st.st_size} bytes > max_file_bytes {max_bytes})")
        with os.fdopen(ffd, "rb", closefd=False) as f:
            # Asked for its size (+1), not the limit: ``read(n)`` allocates n bytes first, and the packer's
            # 4 MB limit cost ~0.1 ms a file. A file grown since fstat is read on as far as the limit (+1),
            # so it is cut off there, not read without end, as one read of the limit would have it.
            want = min(st.st_size, max_bytes) + 1
            data = f.read(want)
            if len(data) == want and want <= max_bytes:
                data += f.read(max_bytes + 1 - want)
    finally:
        os.close(ffd)
    if len(data) > max_bytes:
        raise SkipFile(f"too large (over max_file_bytes {max_bytes})")
    return data


# A notebook's outputs (plots as base64, tables, tracebacks) are not indexed (core/notebooks.py): one with a few plots
# is megabytes of JSON around kilobytes of code, and its cells' text is held to max_file_bytes when it is read. At
# most NOTEBOOK_MAX_BYTES: a cloned repository's own settings may raise max_file_bytes to 10 MB, and a notebook is
# parsed whole in memory.
NOTEBOOK_BYTES_FACTOR = 8
NOTEBOOK_MAX_BYTES = 16_000_000


def byte_limit(name: str, max_bytes: int) -> int:
    """The most bytes a file of this name may have on disk to be read."""
    if is_notebook(name):
        return max(max_bytes, min(max_bytes * NOTEBOOK_BYTES_FACTOR, NOTEBOOK_MAX_BYTES))
    return max_bytes


def too_large(name: str, size: int, max_bytes: int, cells: bool = False) -> str:
    """Why a file of ``size`` bytes is skipped; ``cells``: the size is a notebook's cells' text (the plain limit)."""
    if cells:
        return f"too large ({size} bytes of cells' text > max_file_bytes {max_bytes})"
    limit = byte_limit(name, max_bytes)
    if limit != max_bytes:
        return (f"too large ({size} bytes > {limit}, {NOTEBOOK_BYTES_FACTOR} x max_file_bytes for a notebook, at most "
                f"{NOTEBOOK_MAX_BYTES})")
    return f"too large ({size} bytes > max_file_bytes {max_bytes})"


def _static_skip_reason(name: str, rel: str, size: int, max_bytes: int, generated: bool | None = None) -> str | None:
    """``generated``: what the top `.gitattributes` says (`linguist-generated`), None when it says nothing."""
    if name in LOCKFILES or name.endswith(".lock"):
        return "lockfile"
    if is_secret_file(rel):
        return "secret file (keys and credentials are never indexed, ignored or not)"
    if generated:
        # The repository's own word (GitHub hides such files in diffs): a newcomer's `src/generated/openapi.ts`, 200
        # copies of `Model{i}`, was in the top 6 of 6 questions and first of 2 (session 41).
        return "generated file (.gitattributes: linguist-generated)"
    low = name.lower()
    if low.endswith(GENERATED_SUFFIXES) and generated is None:  # `linguist-generated=false`: the repository's word
        return "generated or minified file"
    ext = os.path.splitext(low)[1]
    if ext == ".svg":  # text, but drawing data (path coordinates), not something a question is about
        return "image (SVG drawing data)"
    if ext in BINARY_EXTENSIONS:
        return "binary file type"
    if size > byte_limit(name, max_bytes):
        return too_large(name, size, max_bytes)
    if size == 0:
        return "empty file"
    return None


# Bytes that do not occur in text (C0 controls other than tab, newlines, form feed, escape, backspace).
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b\x08") + b"\x7f"
BINARY_SHARE = 0.30  # random bytes score ~0.5; latin-1 prose with accents stays far below


# Bumped when content_skip_reason decides otherwise (its marks, thresholds, reasons): an index keeps the size and
# mtime of each file it skipped for its bytes and does not read it again while they stay (indexing/pipeline.py).
# (Not bumped for the PDF mark: it only skips more, and PARSER_VERSION 5 read every indexed file again.)
SKIP_RULES = 2  # 2: protoc's, grpc's and C#'s generated-file headers (session 40)
# (Not bumped for Git LFS pointers either, session 41: that mark only skips more, and PARSER_VERSION 10 reads every
# indexed file again.)


def content_skip_reason(rel: str, data: bytes) -> str | None:
    """Reasons only the bytes can tell: binary, minified, generated."""
    bom = byte_order_mark(data)
    if bom is not None and bom[0] != "utf-8":
        # UTF-16 text (PowerShell's and Visual Studio's files) is all NUL bytes to the checks below: it was
        # skipped as binary (a newcomer, session 30). Judged as the text it decodes to.
        try:
            data = data[bom[1]:].decode(bom[0]).encode("utf-8")
        except UnicodeDecodeError:
            return f"binary content (not {bom[0].upper()} text after its byte-order mark)"
    sample = data[:8192]
    if b"\x00" in sample:
        return "binary content (NUL byte)"
    if sample:
        # No NUL is not enough: compressed or random data has none by chance. Count what text
        # would not contain: control bytes and, when it is not UTF-8, undecodable sequences.
        bad = len(sample) - len(sample.translate(None, _CONTROL))
        try:
            sample.decode("utf-8")
            chars = len(sample)
        except UnicodeDecodeError:
            text = sample.decode("utf-8", errors="replace")
            bad += text.count("\ufffd")
            chars = len(text)
        if bad / max(chars, 1) > BINARY_SHARE:
            return f"binary content ({100 * bad // max(chars, 1)}% of the first {len(sample)} bytes are not text)"
    if data.startswith((b"%PDF-", b"%!PS-Adobe")):
        # A PDF (an Illustrator `.ai` is one) begins as text, and its compressed streams can stay under the
        # binary share in the first 8 KB: ky's 155 KB `media/logo.ai` was indexed as 95 chunks of drawing data.
        return "document or drawing data (PDF or PostScript)"
    if data.startswith(b"version https://git-lfs.github.com/spec/"):
        # A Git LFS pointer: three lines naming an object the checkout does not hold. Indexed, `churn_gbm.joblib`'s
        # pointer ranked above the code that loads the model (a newcomer, session 41).
        return "Git LFS pointer (the file's content is not in the checkout)"
    head = data[:2048]
    if GENERATED_MARK.search(head):
        return "generated file (header says so)"
    if rel.endswith((".js", ".css", ".mjs", ".cjs")) and len(data) > 2000:
        lines = data.count(b"\n") + 1
        if len(data) / lines > 400:
            return "minified file (average line over 400 chars)"
    return None


