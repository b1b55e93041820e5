"""Every file's separator-stripped path and basename, with the rows holding a given string found by search.

The path branch scores each file whose stripped path holds a question term. Checking every path against
every term in Python was 176 ms of a 265 ms warm query on the 100,000-file workspace (bench/RESULTS.md,
session 11); here the paths are joined into one text and a term's rows are found by ``str.find``, jumping to
the next row after each hit, so a query costs the rows its terms occur in, not the whole list.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

# Terms whose rows are kept between queries (agents ask many questions with the same words: "test",
# "config", "defined"); a common term's rows are the expensive ones (tens of thousands at 100k files).
_KEPT_TERMS = 128


class StrippedPaths:
    """(path, stripped path, stripped basename) rows, in the view's file order, iterable as that list was."""

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        self.rows = rows
        self._text: dict[int, tuple[str, list[int]]] = {}  # column -> (joined text, each row's start)
        self._found: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        self._order: tuple[np.ndarray, np.ndarray] | None = None
        self._row: dict[str, int] | None = None
        self._len: np.ndarray | None = None
        self._dirs: _Folders | None = None
        self._lock = threading.Lock()  # the server answers queries from several threads

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[str, str, str]:
        return self.rows[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StrippedPaths):
            return self.rows == other.rows
        return isinstance(other, list) and self.rows == other

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        # The joined texts are rebuilt on first use (~30 ms at 100k files); the tables prepare() builds are
        # saved with the view when built: 0.8-1.0 s of the first question at 100k files, a few ms to load.
        return {"rows": self.rows, "order": self._order, "len": self._len, "dirs": self._dirs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["rows"])  # type: ignore[misc]
        self._order, self._len, self._dirs = state.get("order"), state.get("len"), state.get("dirs")

    def prepare(self) -> None:
        """Build what every question's path search reads (the order, lengths and folder table), ahead of the
        first question: a warm start, and before the view is saved (Engine._store_view). At 100,000 files
        the first question spent 0.8-1.0 s here (bench/RESULTS.md, session 23)."""
        self.ranks()
        self.path_len()
        self._folders()
        self._joined(2)  # not saved (12.8 MB of text at 100k files): 0.1 s, in the warm start

    def _joined(self, column: int) -> tuple[str, list[int]]:
        got = self._text.get(column)
        if got is None:
            # Rows joined by "\n", which no stripped text holds (only [a-z0-9] remain), so a hit never spans two rows.
            parts = [r[column] for r in self.rows]
            starts, at = [], 0
            for s in parts:
                starts.append(at)
                at += len(s) + 1
            got = self._text[column] = ("\n".join(parts), starts)
        return got

    def ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's basename length (at least 1, as float) and its path's place in sorted path order."""
        if self._order is None:
            base_len = np.fromiter((max(len(r[2]), 1) for r in self.rows), dtype=np.float64, count=len(self.rows))
            rank = np.empty(len(self.rows), dtype=np.int64)
            rank[sorted(range(len(self.rows)), key=lambda i: self.rows[i][0])] = np.arange(len(self.rows))
            self._order = (base_len, rank)
        return self._order

    def row_of(self, path: str) -> int | None:
        if self._row is None:
            self._row = {r[0]: i for i, r in enumerate(self.rows)}
        return self._row.get(path)

    def path_len(self) -> np.ndarray:
        """Each row's path length (the path branch's tie-break before the path itself)."""
        if self._len is None:
            self._len = np.fromiter((len(r[0]) for r in self.rows), dtype=np.int64, count=len(self.rows))
        return self._len

    def _folders(self) -> _Folders:
        if self._dirs is None:
            self._dirs = _Folders(self.rows)
        return self._dirs

    def _path_rows(self, term: str) -> np.ndarray:
        """Rows whose stripped path holds ``term``. A stripped path is its folder's part then its basename's, so
        the term is in the folder's part (searched once per distinct folder: 27,948 of them, 2.9 MB, for the
        100k workspace's 104,790 paths, 12.8 MB), in the basename, or across the two (the basename starts with
        a tail of the term and the folder's part ends with the rest)."""
        f = self._folders()
        if f.texts is None:  # a row whose stripped path does not end with its stripped basename: read them all
            return np.array(_rows_in(*self._joined(1), term), dtype=np.int32)
        hit = np.zeros(len(f.texts), dtype=bool)
        hit[_rows_in(f.text, f.starts, term)] = True
        mask = hit[f.of_row]
        mask[self.rows_with(term, basename=True)] = True
        ends = np.zeros(len(f.texts), dtype=bool)
        for k in range(1, len(term)):
            head, tail = term[:k], term[k:]
            lo = bisect.bisect_left(f.bases, tail)
            hi = bisect.bisect_left(f.bases, tail + "\x7f", lo)  # every stripped basename starting with ``tail``
            if lo == hi:
                continue
            # The folders ending with ``head``: a prefix range of the reversed folder texts. A check of each
            # basename's folder in Python was 1 M `endswith` calls for 163 terms at 100k files (2.5 s of a
            # pasted log's answer, session 23); two ranges and a mask give the same rows.
            rhead = head[::-1]
            a = bisect.bisect_left(f.reversed, rhead)
            b = bisect.bisect_left(f.reversed, rhead + "\x7f", a)
            if a == b:
                continue
            ends[f.reversed_ids[a:b]] = True
            rows = f.base_rows_np[lo:hi]
            mask[rows[ends[f.of_row[rows]]]] = True
            ends[f.reversed_ids[a:b]] = False
        return np.flatnonzero(mask).astype(np.int32)

    def rows_with(self, term: str, basename: bool = False) -> np.ndarray:
        """The rows (ascending) whose stripped path (or basename) holds ``term``, a non-empty string without
        "\\n". Kept for the next query that has the term; not to be written to."""
        column = 2 if basename else 1
        key = (column, term)
        with self._lock:
            found = self._found.get(key)
            if found is not None:
                self._found.move_to_end(key)
                return found
        if basename:
            found = np.array(_rows_in(*self._joined(2), term), dtype=np.int32)  # int32: 128 kept terms at 100k
        else:
            found = self._path_rows(term)
        found.flags.writeable = False
        with self._lock:
            self._found[key] = found
            if len(self._found) > _KEPT_TERMS:
                self._found.popitem(last=False)
        return found


def _rows_in(text: str, starts: list[int], term: str) -> list[int]:
    """The rows (ascending) of a "\\n"-joined text that hold ``term``: one ``find`` per hit row, each search
    resumed at the next row's start."""
    out: list[int] = []
    end, last = len(text), len(starts) - 1
    i = text.find(term)
    while i != -1:
        r = bisect.bisect_right(starts, i) - 1
        out.append(r)
        i = text.find(term, starts[r + 1] if r < last else end)
    return out


class _Folders:
    """The distinct folder parts of the stripped paths (each path's minus its basename's), joined for search,
    each row's folder, and the rows in stripped-basename order (for the matches across the two)."""

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        index: dict[str, int] = {}
        of_row: list[int] = []
        self.texts: list[str] | None = None
        for _p, spath, sbase in rows:
            if not spath.endswith(sbase):
                return  # texts None: the caller searches the whole paths
            of_row.append(index.setdefault(spath[: len(spath) - len(sbase)], len(index)))
        self.texts = list(index)
        self.starts: list[int] = []
        at = 0
        for t in self.texts:
            self.starts.append(at)
            at += len(t) + 1
        self.text = "\n".join(self.texts)
        self.of_row = np.array(of_row, dtype=np.int64)
        order = sorted(range(len(rows)), key=lambda i: rows[i][2])
        self.bases = [rows[i][2] for i in order]
        self.base_rows_np = np.array(order, dtype=np.int64)
        by_end = sorted(range(len(self.texts)), key=lambda i: self.texts[i][::-1])
        self.reversed = [self.texts[i][::-1] for i in by_end]  # each folder's text reversed, sorted
        self.reversed_ids = np.array(by_end, dtype=np.int64)
