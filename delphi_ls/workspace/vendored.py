"""Other projects' code kept in this one: vendored copies, submodules, nested clones, and what `.gitattributes` says.

A newcomer's monorepo (session 41) held a vendored copy of ky (`frontend/vendor/ky`, marked `linguist-vendored` in its
`.gitattributes`) and go-chi as an initialized submodule: their files were in the top 6 of 22 and 20 of 31 questions
and first in 6 and 9, `client_ip.go` first for "where is the liveness probe configured", and chi's tests were listed
as related tests of the project's own Go handler. Such files stay indexed (a trace through them, a question about the
library, must still find them), but they rank below the project's own files unless the question names them (the
retriever's demotion), and their tests are not the project's files' tests (retrieval/related.py).

A file is vendored, in this order:
1. by the top-level `.gitattributes`: `linguist-vendored` (or `=true`) makes it vendored, except a test or a
   document (projects mark their own tests and docs so, to keep them out of GitHub's language bar), and
   `-linguist-vendored` (or `=false`) makes it the project's own whatever its folder is named (GitHub's rules, which
   its search and language statistics follow; git's pattern rules: `vendor/**` matches below `vendor/`, `vendor`
   alone only a file of that name);
2. inside another repository: a folder holding a `.git` of its own (an initialized submodule, a nested clone);
3. under a folder named as dependency folders are (``vendor/``, ``third_party/``, ``node_modules/``...), or a
   top-level ``deps/`` (redis's and node's C dependencies; a ``deps/`` deeper down is too often a project's own
   module about dependencies).

`linguist-generated` files are skipped like any other generated file (workspace/scan.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .kinds import file_kind

# Folder names that hold dependencies' code (GitHub linguist's vendor list, the parts that name folders of code).
VENDOR_FOLDERS = frozenset({"vendor", "vendors", "vendored", "_vendor", "third_party", "third-party", "thirdparty",
                            "3rdparty", "3rd_party", "3rd-party", "bower_components", "node_modules"})
TOP_VENDOR_FOLDERS = frozenset({"deps"})
# The names no project gives its own code's folders, whatever lies above them.
UNMISTAKABLE = VENDOR_FOLDERS - {"vendor", "vendors", "vendored"}
# Folders that begin a project's source tree: below them `vendor/` may be a package of its own.
_SOURCE_TREES = frozenset({"src", "app", "lib", "pkg", "internal", "java", "kotlin", "scala", "com", "org", "net",
                           "main", "source", "sources"})

# Folder names that say nothing of which library a vendored file belongs to (for the words a question names it by).
_GENERIC = frozenset({"src", "source", "sources", "lib", "libs", "include", "includes", "internal", "pkg", "core",
                      "common", "util", "utils", "dist", "build", "main", "test", "tests", "api", "app", "cmd",
                      "packages", "modules", "contrib", "java", "python", "js", "ts", "c", "cpp", "go"})
# The last part of a host's name in a module path (`github.com`, `golang.org`, `gopkg.in`, `dario.cat`, `mvdan.cc`).
_HOSTS = frozenset({"com", "org", "net", "io", "in", "cc", "cat", "dev", "co", "uk", "de", "fr", "me", "sh", "xyz",
                    "app", "page", "site", "tech", "info", "eu", "us", "ca", "jp", "cn", "ru", "ch", "nl", "se"})
_FORGES = frozenset({"github.com", "gitlab.com", "bitbucket.org", "codeberg.org", "gitee.com", "sr.ht"})
_VERSION = re.compile(r"^v?\d+(?:[._]\d+)*$")
_WORD = re.compile(r"[a-z0-9][a-z0-9_.+-]*")

_ATTRS = ("linguist-vendored", "linguist-generated")


# A cloned repository's `.gitattributes` is read on every walk: a pattern of many wildcards (`*a*a*a*a…`) backtracks
# for seconds per path (as in git; a review, session 42), so such a pattern, and lines past the first MAX_LINES, are
# left out. Real patterns have a few.
MAX_WILDCARDS = 8
MAX_LINES = 2_000


def _glob_regex(pattern: str) -> re.Pattern[str] | None:
    """git's wildmatch of one `.gitattributes` pattern against a workspace-relative file path, or None for a
    pattern that can match no file (a folder pattern: `dir/` does not apply to the files inside) or has more than
    MAX_WILDCARDS wildcards."""
    if not pattern or pattern.endswith("/") or pattern.count("*") + pattern.count("?") > MAX_WILDCARDS:
        return None
    anchored = "/" in pattern
    body = pattern.lstrip("/")
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("/**", i) and i + 3 == len(body):
            out.append("/.*")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        elif body[i] == "[" and (end := body.find("]", i + 2)) > 0:
            inner = body[i + 1:end]
            if inner[:1] in "!^":
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        elif body[i] == "\\" and i + 1 < len(body):
            out.append(re.escape(body[i + 1]))
            i += 2
        else:
            out.append(re.escape(body[i]))
            i += 1
    rx = "".join(out)
    try:
        return re.compile(rf"^{rx}$" if anchored else rf"^(?:.*/)?{rx}$")
    except re.error:  # a pattern git takes and Python does not (`[z-a]`): that line is left out, never a failed run
        return None


def _literal_prefix(pattern: str) -> str:
    """The folders a pattern names before its first wildcard (``frontend/vendor/**`` -> ``frontend/vendor``)."""
    body = pattern.lstrip("/")
    cut = min((i for i, ch in enumerate(body) if ch in "*?[\\"), default=len(body))
    head = body[:cut]
    return head.rpartition("/")[0] if cut < len(body) or "/" in head else ""


def parse_attributes(text: str) -> list[tuple[str, str, bool | None]]:
    """The linguist lines of a `.gitattributes`: (pattern, attribute, value) in file order; value True (set,
    ``=true``), False (unset ``-attr``, ``=false``) or None (``!attr``: back to unspecified)."""
    out: list[tuple[str, str, bool | None]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):  # a quoted pattern (spaces in it): git's C-style quoting, kept simple
            end = line.find('"', 1)
            if end < 0:
                continue
            pattern, rest = line[1:end], line[end + 1:]
        else:
            pattern, _, rest = line.partition(" ")
            if "\t" in pattern:
                pattern, _, more = pattern.partition("\t")
                rest = more + " " + rest
        if pattern.startswith("!"):  # negative patterns are forbidden in .gitattributes: git ignores the line
            continue
        for attr in rest.split():
            name, value = attr, True
            if attr.startswith(("-", "!")):
                name, value = attr[1:], (False if attr[0] == "-" else None)
            elif "=" in attr:
                name, _, raw = attr.partition("=")
                value = raw.lower() not in ("false", "0", "no", "off")
            if name in _ATTRS:
                out.append((pattern, name, value))
        if len(out) >= MAX_LINES:
            break
    return out


@dataclass
class Vendored:
    """Which indexed files are other projects' code (the module's docstring says how it is decided).

    ``attributes``: the top `.gitattributes`' linguist lines (:func:`parse_attributes`); ``repos``: folders holding a
    `.git` of their own (workspace-relative). Answers are kept per path: a query asks about a few hundred."""

    attributes: list[tuple[str, str, bool | None]] = field(default_factory=list)
    repos: tuple[str, ...] = ()
    _rules: list[tuple[re.Pattern[str], str, bool | None, str]] | None = field(default=None, init=False, repr=False)
    _memo: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def from_state(cls, state: Any) -> Vendored:
        """From what an index run stored (:meth:`state`); empty for an index written before it."""
        if not isinstance(state, dict):
            return cls()
        attrs = [(str(p), str(a), v if isinstance(v, bool) else None) for p, a, v in state.get("attributes", [])
                 if isinstance(p, str) and a in _ATTRS]
        repos = tuple(sorted(str(r) for r in state.get("repos", []) if isinstance(r, str) and r))
        return cls(attrs, repos)

    def state(self) -> dict[str, Any]:
        return {"attributes": [list(a) for a in self.attributes], "repos": list(self.repos)}

    def __getstate__(self) -> dict[str, Any]:
        return {"attributes": self.attributes, "repos": self.repos, "_rules": None, "_memo": {}}

    def _compiled(self) -> list[tuple[re.Pattern[str], str, bool | None, str]]:
        if self._rules is None:
            self._rules = [(rx, attr, value, _literal_prefix(pattern)) for pattern, attr, value in self.attributes
                           if (rx := _glob_regex(pattern)) is not None]
        return self._rules

    def attribute(self, path: str, attr: str) -> tuple[bool | None, str]:
        """The last matching line's value of ``attr`` for ``path`` (None: no line says), and that line's folder."""
        for rx, name, value, prefix in reversed(self._compiled()):
            if name == attr and rx.match(path):
                return value, prefix
        return None, ""

    def generated(self, path: str) -> bool | None:
        """What `.gitattributes` says of ``path`` being generated (None: nothing)."""
        return self.attribute(path, "linguist-generated")[0] if self.attributes else None

    def root_of(self, path: str) -> str | None:
        """The folder of the other project ``path`` belongs to ('' for a `.gitattributes` pattern with no folder),
        or None for the project's own files."""
        if path in self._memo:
            return self._memo[path]
        root = self._root_of(path)
        if len(self._memo) < 100_000:
            self._memo[path] = root
        return root

    def _root_of(self, path: str) -> str | None:
        if self.attributes:
            value, prefix = self.attribute(path, "linguist-vendored")
            if value is False:
                return None
            # Not for a test or a document: projects mark their own tests and docs `linguist-vendored` to keep them
            # out of GitHub's language bar (truffleruby's `/spec/*`, `/test/*`); such a file is vendored only by the
            # rules below (a vendored copy's `vendor/ky/test/` still is, by its folder's name).
            if value and file_kind(path) not in ("test", "doc"):
                return prefix
        if self.repos:
            d = path
            while "/" in d:
                d = d.rpartition("/")[0]
                if d in self.repos:  # a handful: a tuple's scan costs less than a set kept beside it
                    return d
        parts = path.split("/")[:-1]
        for i, part in enumerate(parts):
            if part in _SOURCE_TREES and part not in VENDOR_FOLDERS:
                # Inside a source tree a folder named `vendor` is the project's own (a Java package `com/shop/vendor/`,
                # Rails' `app/models/vendor/`; a review, session 42): only the unmistakable names count below it.
                return next(("/".join(parts[: j + 1]) for j in range(i + 1, len(parts))
                             if parts[j] in UNMISTAKABLE), None)
            if part in VENDOR_FOLDERS or (i == 0 and part in TOP_VENDOR_FOLDERS):
                return "/".join(parts[: i + 1])
        return None

    def is_vendored(self, path: str) -> bool:
        return self.root_of(path) is not None

    def names(self, path: str) -> frozenset[str]:
        """The words a question names a vendored file's library by: its vendored folder's name and the folders
        below it, less generic ones (`src`, `lib`, `v3`) and host names (`github.com`)."""
        root = self.root_of(path)
        if root is None:
            return frozenset()
        words: set[str] = set()
        base = root.rpartition("/")[2].lower()
        below = path[len(root):].strip("/").split("/")[:-1]
        if not root:  # a `.gitattributes` pattern of names (`*.min.js`, `jquery.js`): the file is named by its name
            parts, most = [path.rpartition("/")[2].split(".")[0]], 1
        elif base not in VENDOR_FOLDERS | TOP_VENDOR_FOLDERS:
            # The folder is the library (a submodule, `vendor/ky/**`): its own folders are its internals
            # (chi's `middleware/` must not take a question about the project's middleware).
            parts, most = [base], 1
        else:
            # A folder of libraries (`vendor/`, `deps/`, a `.gitattributes` pattern's folder): the library is
            # named below it, as an owner and a name at most (`vendor/github.com/gdamore/tcell/v3`). Not by the
            # folder's own name: "vendor" in a question took every library of every `vendor/` (a review, session 42).
            parts, most = below, 2
        named = 0
        for part in parts:
            low = part.lower().lstrip("@")
            if "." in low:  # a host (`github.com`, `gopkg.in`), else a name with its version (`yaml.v3`)
                if low.rpartition(".")[2] in _HOSTS:
                    if not named:  # a module path: owner and name on a forge, the name alone elsewhere (`k8s.io`)
                        most = 2 if low in _FORGES else 1
                    continue
                low = low.split(".")[0]
            if len(low) < 2 or low in _GENERIC or _VERSION.match(low):  # (`golang.org/x/net`'s `x`)
                continue
            words.add(low)  # whole: `client-go` is not named by "client" (a review, session 42)
            named += 1
            if named == most:
                break
        return frozenset(words)


def question_words(text: str) -> frozenset[str]:
    """A question's words as :meth:`Vendored.names` compares them (lower case; `go-chi` and its parts)."""
    words = set()
    for w in _WORD.findall(text.lower()):
        w = w.rstrip(".")
        words.add(w)
        words.update(re.split(r"[-_.+/]", w))
    return frozenset(words)
