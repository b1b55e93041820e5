"""What a branch may read while answering one query."""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..core import SymbolRecord
from ..core.tokens import stripped
from ..indexing.graph import FileGraph, package_roots
from ..models.embedders import Embedder
from ..settings import Settings
from ..stores.lexical import LexicalStore
from ..stores.meta import MetaStore
from ..stores.vectors import VectorStore
from ..workspace.kinds import is_record_doc, stem_of
from ..workspace.vendored import Vendored, question_words
from .path_index import StrippedPaths
from .query import QueryInfo, closest_by_tail, frame_names


class ChunkLines:
    """Each file's chunk start lines and chunk ids (start lines ascending), read from the manifest for the
    files a query asks about, then kept with the view. Held for every file up front, they were 440k rows
    read and 27 MB saved with the view on the 100k workspace, for the few dozen files a query looks at."""

    def __init__(self, meta: MetaStore | None, got: dict[str, tuple[list[int], list[str]] | None] | None = None) -> None:
        self._meta = meta
        self._got: dict[str, tuple[list[int], list[str]] | None] = got if got is not None else {}

    def get(self, path: str, default: Any = None) -> Any:
        if path not in self._got:
            self.fetch([path])
        found = self._got.get(path)
        return found if found is not None else default

    def fetch(self, paths: list[str]) -> None:
        """Read the files of ``paths`` not read yet, in one query per 500."""
        want = [p for p in dict.fromkeys(paths) if p not in self._got]
        if not want or self._meta is None:
            return
        found: dict[str, tuple[list[int], list[str]]] = {}
        for i in range(0, len(want), 500):
            for cid, path, start in self._meta.chunk_starts(want[i: i + 500]):
                entry = found.setdefault(path, ([], []))
                entry[0].append(start)
                entry[1].append(cid)
        for p in want:
            self._got[p] = found.get(p)

    def without(self, paths: set[str]) -> ChunkLines:
        """A copy that reads ``paths`` again (their chunks changed)."""
        # dict() copies in one step under the GIL: a query on this view may be adding files meanwhile
        # (iterating the live dict raised "changed size during iteration"; review).
        return ChunkLines(self._meta, {p: v for p, v in dict(self._got).items() if p not in paths})

    def __getstate__(self) -> dict[str, Any]:
        return {"_meta": None, "_got": {}}  # a loaded view is bound to its engine's manifest (bind)


# Past this many names at once, one pass over the whole symbol table costs less than a query per 500 names.
FETCH_SCAN_NAMES = 20_000
# The most names no file has that one question looks up as misspellings (SearchContext.misspelt_named).
MISSPELT_MENTIONS = 5
_LEADING_DOTS = re.compile(r"^(?:\.\.?/)+")


def plain_mention(mention: str) -> str:
    """A mentioned path without its leading ``./`` and ``../`` parts; a dotfile keeps its dot (``.eslintrc.json``:
    ``lstrip("./")`` made it ``eslintrc.json``, which no file is)."""
    return _LEADING_DOTS.sub("", mention)


class SymbolTable:
    """Definitions by lower-cased name, read from the manifest for the names a query asks about, then kept
    with the view (as :class:`ChunkLines`). Held for every name up front, they were most of the view: 58% of
    black's saved view, and on the 100k workspace 665,708 definitions built, pickled and loaded with it
    for the few dozen names a question holds. Only definitions in the view's files are given (the manifest
    may be a batch ahead of the view during a run)."""

    def __init__(self, meta: MetaStore | None, files: dict[str, str],
                 got: dict[str, list[SymbolRecord]] | None = None) -> None:
        self._meta = meta
        self._files = files
        self._got: dict[str, list[SymbolRecord]] = got if got is not None else {}  # [] for a name with none
        self._folded: dict[str, list[str]] | None = None  # lower -> the names outside ASCII, read once when asked

    @classmethod
    def of(cls, records: list[SymbolRecord], files: dict[str, str]) -> SymbolTable:
        """A complete table from ``records`` (no manifest): for views made in memory."""
        got: dict[str, list[SymbolRecord]] = {}
        for r in records:
            got.setdefault(r.name.lower(), []).append(r)
        return cls(None, files, got)

    def get(self, name: str, default: Any = None) -> Any:
        if name not in self._got:
            self.fetch([name])
        return self._got.get(name) or default

    def __contains__(self, name: str) -> bool:
        return bool(self.get(name))

    def fetch(self, names: Any) -> None:
        """Read the lower-cased ``names`` not read yet: one query per 500 (SQLite folds ASCII case only, so
        a name with other letters is looked up by its spellings in the table, read once per table)."""
        want = [n for n in dict.fromkeys(names) if n not in self._got]
        if not want:
            return
        found: dict[str, list[SymbolRecord]] = {}
        if self._meta is not None:
            wanted = set(want)
            ascii_ = [n for n in want if n.isascii()]
            if len(want) > FETCH_SCAN_NAMES:  # a workspace symbol search of one letter: one pass of the table
                rows = self._meta.all_symbols()
            else:
                spelled = [spelling for n in want if not n.isascii() for spelling in self._non_ascii().get(n, ())]
                # A question with a non-ASCII identifier scanned the whole table (~1 s on the 100k workspace)
                # every time; its spellings are asked for by name now, like the rest.
                rows = self._meta.symbols_named(ascii_ + spelled) if ascii_ or spelled else []
            for r in rows:
                key = r.name.lower()
                if key in wanted and r.path in self._files:
                    found.setdefault(key, []).append(r)
        for n in want:
            self._got[n] = found.get(n, [])

    def _non_ascii(self) -> dict[str, list[str]]:
        if self._folded is None:
            folded: dict[str, list[str]] = {}
            for name in self._meta.symbol_names(non_ascii=True) if self._meta is not None else ():
                folded.setdefault(name.lower(), []).append(name)
            self._folded = folded
        return self._folded

    def names(self) -> list[str]:
        """Every lower-cased name with a definition (the manifest's; those outside the view's files too)."""
        if self._meta is None:
            return [n for n, recs in self._got.items() if recs]
        return list(dict.fromkeys(n.lower() for n in self._meta.symbol_names()))

    def items(self) -> list[tuple[str, list[SymbolRecord]]]:
        """Every name with its definitions, in the order a build from the whole table gives them."""
        if self._meta is None:
            return [(n, recs) for n, recs in self._got.items() if recs]
        out: dict[str, list[SymbolRecord]] = {}
        for r in self._meta.all_symbols():
            if r.path in self._files:
                out.setdefault(r.name.lower(), []).append(r)
        return list(out.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolTable) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def fresh(self, files: dict[str, str]) -> SymbolTable:
        """A table over ``files`` that reads every name again (some files' definitions changed)."""
        return SymbolTable(self._meta, files) if self._meta is not None else SymbolTable(None, files, self._got)

    def __getstate__(self) -> dict[str, Any]:
        return {"_meta": None, "_files": {}, "_got": {}, "_folded": None}  # a loaded view is bound to its engine's manifest (bind)


@dataclass
class IndexView:
    """In-memory tables derived from the manifest, rebuilt when the index changes."""

    files: dict[str, str]  # path -> kind
    symbols: SymbolTable  # lower name -> definitions, read as asked
    stripped_paths: StrippedPaths  # (path, stripped path, stripped basename) rows
    chunk_lines: ChunkLines  # path -> (start lines, chunk ids), read as asked
    by_basename: dict[str, list[str]] = field(default_factory=dict)
    graph: FileGraph | None = None
    vendored: Vendored = field(default_factory=Vendored)  # which files are other projects' code
    # The test files, in file order: asked by the anchor branches on every query (a pass over every file was
    # 18 ms of each at 100k files). Not an init field: a replaced view (a save) finds them again once.
    _tests: list[str] | None = field(default=None, init=False, repr=False, compare=False)
    _test_stems: dict[str, list[str]] | None = field(default=None, init=False, repr=False, compare=False)
    # (extension, length) -> basenames, for names a question misspells; built on the first such question.
    _by_shape: dict[tuple[str, int], list[str]] | None = field(default=None, init=False, repr=False, compare=False)
    # name -> its answer: the path branch and the ranker's columns ask the same names in one query (a name
    # costs about 6 ms at 100,000 files, the table 58 ms once; measured on synthetic names).
    _misspelt: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.stripped_paths, StrippedPaths):  # rows given as a list (tests, older callers)
            self.stripped_paths = StrippedPaths(list(self.stripped_paths))

    def __getstate__(self) -> dict[str, Any]:
        # What questions filled in (the test list, the misspelling tables) is rebuilt by the process that
        # loads a saved view (stores/view_cache.py): it costs milliseconds and keeps the saved file small.
        return {**self.__dict__, "_tests": None, "_test_stems": None, "_by_shape": None, "_misspelt": {}}

    def patched(self, **changes: Any) -> IndexView:
        """A copy with ``changes`` (a save's definitions, chunk lines and import edges) for the same files of
        the same kinds, so the tables that hang on the file list alone carry over (the misspelling table
        took 58-142 ms to build again at 100,000 files, review of session 22)."""
        out = dataclasses.replace(self, **changes)
        out._tests, out._by_shape, out._misspelt = self._tests, self._by_shape, self._misspelt
        out._test_stems = self._test_stems
        return out

    def package_roots(self) -> frozenset[str]:
        """The folders holding a package manifest: the file graph's (it found them while it was built)."""
        return self.graph.roots if self.graph is not None else package_roots(self.files)

    def tests(self) -> list[str]:
        if self._tests is None:
            self._tests = [p for p, k in self.files.items() if k == "test"]
        return self._tests

    def tests_by_stem(self) -> dict[str, list[str]]:
        """The test files by their separator-stripped stem (`tests/test_confirm.py` under `confirm`)."""
        if self._test_stems is None:
            out: dict[str, list[str]] = {}
            for t in self.tests():
                out.setdefault(stripped(stem_of(t)), []).append(t)
            self._test_stems = out
        return self._test_stems

    def misspelt(self, name: str) -> list[str]:
        """Files whose basename is one edit (a letter dropped, added, changed or two swapped) from ``name``,
        a file name no indexed file has: a change titled "Fixed regisry-inl.h" edits ``registry-inl.h``; a
        name that differs in case alone ("Readme.md") is the file too. Only a name of 5+ letters before a
        short extension, the extension itself spelt right, and at most three files: more is a guess."""
        stem, dot, ext = name.rpartition(".")
        if not dot or len(stem) < 5 or not ext.isalnum() or len(ext) > 5 or name in self.by_basename:
            return []
        hit = self._misspelt.get(name)  # .get: another thread may clear the memo between a test and a read
        if hit is not None:
            return hit
        shapes = self._by_shape
        if shapes is None:
            shapes = {}
            for b in self.by_basename:
                shapes.setdefault((b.rpartition(".")[2].lower(), len(b)), []).append(b)
            self._by_shape = shapes
        low = name.lower()
        near = [b for n in (len(name) - 1, len(name), len(name) + 1)
                for b in shapes.get((ext.lower(), n), []) if (bl := b.lower()) == low or _one_edit(bl, low)]
        out = sorted(p for b in near for p in self.by_basename[b])
        out = out if len(out) <= 3 else []
        if len(self._misspelt) >= 1024:
            self._misspelt.clear()
        self._misspelt[name] = out
        return out

    def bind(self, meta: MetaStore) -> IndexView:
        """A loaded view reads its chunk lines and definitions from ``meta`` (the manifest it was saved for)."""
        self.chunk_lines = ChunkLines(meta)
        self.symbols = SymbolTable(meta, self.files)
        return self

    @classmethod
    def build(cls, meta: MetaStore) -> IndexView:
        files = {p: k for p, k, _n in meta.files()}
        sp = StrippedPaths([(p, stripped(p), stripped(os.path.basename(p))) for p in files])
        by_base: dict[str, list[str]] = {}
        for p in files:
            by_base.setdefault(os.path.basename(p), []).append(p)
        graph = FileGraph.build(files, meta.all_imports())
        return cls(files, SymbolTable(meta, files), sp, ChunkLines(meta), by_base, graph,
                   Vendored.from_state(meta.get_state("vendored")))


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by exactly one insertion, deletion, substitution or adjacent swap."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return a[i + 1:] == b[i + 1:] or (a[i + 2:] == b[i + 2:] and a[i:i + 2] == b[i:i + 2][::-1])
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer[i + 1:] == shorter[i:]


_ABSOLUTE = re.compile(r"^(?:/|~|[A-Za-z]:[/\\])")  # a path from the root of some machine


@dataclass
class SearchContext:
    settings: Settings
    meta: MetaStore
    lexical: LexicalStore
    vectors: VectorStore | None
    embedder: Embedder | None
    view: IndexView
    anchors: list[str]
    draft: str | None = None
    depth: int = 100
    seeds: dict[str, float] = field(default_factory=dict)  # for stage-2 branches: anchors + first-pass top files
    named_anchor: bool = False  # the anchor is the file a test question names (retriever.named_anchor), not the caller's
    # The question's words, when it was read (retriever): what names a vendored library (:meth:`demoted`).
    question_words: frozenset[str] | None = None
    framed: frozenset[str] = frozenset()  # a pasted trace's frames' files: what ran, vendored or not
    how_to: bool = False  # a request for instructions: changelogs and other records are demoted

    @property
    def files(self) -> dict[str, str]:
        return self.view.files

    def demoted(self, path: str) -> bool:
        """Whether ``path`` is other projects' code (workspace/vendored.py) that this question does not reach: it
        names none of the library's folders, and no anchor lies in the same vendored folder. Or, for a request for
        instructions, a record such as a changelog."""
        if self.how_to and is_record_doc(path, self.files.get(path)) and not (
                self.question_words and os.path.basename(path).lower().split(".", 1)[0] in self.question_words):
            return True  # (a changelog the question names is its subject)
        v = self.view.vendored
        root = v.root_of(path)
        if root is None or path in self.framed:
            return False
        if any(v.root_of(a) == root for a in self.anchors):
            return False
        return not (self.question_words and v.names(path) & self.question_words)

    def read_question(self, text: str) -> None:
        self.question_words = question_words(text)

    @property
    def symbols(self) -> SymbolTable:
        return self.view.symbols

    @property
    def stripped_paths(self) -> StrippedPaths:
        return self.view.stripped_paths

    def chunks_at_line(self, path: str, line: int) -> list[str]:
        entry = self.view.chunk_lines.get(path)
        if not entry:
            return []
        i = bisect.bisect_right(entry[0], line) - 1
        return [entry[1][max(i, 0)]]

    def misspelt_named(self, q: QueryInfo) -> list[tuple[int, str, str]]:
        """(mention's position, mention, file) for the names a question misspells (:meth:`IndexView.misspelt`).
        Never in a question with stack frames: a frame names the files the program ran, library files
        outside the workspace among them, and a Java or Kotlin frame carries a bare name
        (``Thread.java`` is no typo of ``Threads.java``, nor ``socket.py`` of ``sockets.py``). Only the
        first few names no file has: each costs a pass over the names of its length (about 30 ms at
        100,000 files, review of session 22)."""
        if q.frames:
            return []
        out: list[tuple[int, str, str]] = []
        tried = 0
        for i, mention in enumerate(q.paths):
            if mention.startswith(("/", "~")) or ":" in mention:
                continue
            m = plain_mention(mention)
            if self.resolve_mention(m):
                continue
            tried += 1
            if tried > MISSPELT_MENTIONS:
                break
            # A mention with folders must agree on the nearest one ("details/regisry-inl.h").
            folder = os.path.basename(os.path.dirname(m))
            out += [(i, mention, p) for p in self.view.misspelt(os.path.basename(m))
                    if not folder or os.path.basename(os.path.dirname(p)) == folder]
        return out

    def frame_files(self, q: QueryInfo) -> list[str]:
        """The workspace files a trace's frames name, innermost first, each once. A frame names a file when one
        file of its name shares most of its path; of several, those shorter than the frame's line are not it (a
        Kotlin inline function's frame, `RealBufferedSource.kt:213`, named jvmMain's 206-line file of that name
        as well as commonMain's; a newcomer, session 39)."""
        out: list[str] = []
        ends: dict[str, int] = {}
        for f, line in q.frames:
            m = plain_mention(f)
            if m in self.view.files:
                found = [m]
            else:
                # As spans.frames_first reads a frame: a library's frame (site-packages) is no workspace file that
                # only shares its name.
                names = [p for p in self.view.by_basename.get(os.path.basename(m), []) if frame_names(m, p)]
                ends.update(self.meta.last_lines([p for p in names if p not in ends]))
                found = closest_by_tail(m, [p for p in names if ends.get(p, 0) >= line])
            if len(found) == 1 and found[0] not in out:
                out.append(found[0])
        return out

    def resolve_mention(self, mention: str) -> list[str]:
        """Workspace files a mentioned path refers to: exact, or by suffix (frames carry absolute paths)."""
        if mention in self.view.files:
            return [mention]
        found = closest_by_tail(mention, self.view.by_basename.get(os.path.basename(mention), []))
        tail = "/".join(mention.rsplit("/", 2)[-2:])  # its file and folder
        if len(found) > 1 and _ABSOLUTE.match(mention) and not (found[0] == tail or found[0].endswith("/" + tail)):
            top = [p for p in found if "/" not in p]
            if len(top) == 1:  # the workspace's own, deployed elsewhere (`/usr/src/app/index.js`; review)
                return top
            # Another machine's path that shares only its file's name with several of the workspace's: a user's
            # `/home/ci/src/myapp/cmd/server/main.go` was "named in the question" as chi's `_examples/fileserver/
            # main.go` (a newcomer pasting traces, session 44). One file of that name is still it (a checkout
            # elsewhere: `/home/ci/build/chi/tree.go`).
            return []
        return found[:3]
