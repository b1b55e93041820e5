"""File text as Delphi reads it and counts its lines: one rule for the index, the packer and editors' buffers.

A line ends at ``\\n`` (a ``\\r`` before it stays part of the line). ``str.splitlines()`` also breaks at a form
feed, ``\\x1c``-``\\x1e``, ``\\x85`` and U+2028/U+2029, which tree-sitter and editors do not: a page break
(``^L``, ordinary in PEP 8 Python and GNU sources) put every later line of a file read as line windows one
line off (a newcomer, session 30). LSP also ends a line at a lone ``\\r`` (an old Mac file), which tree-sitter
does not count: decoding turns a lone ``\\r`` into ``\\n`` (same length), so every reader counts alike.
"""

from __future__ import annotations

import codecs
import re

# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_LONE_CR = re.compile(r"\r(?!\n)")


def byte_order_mark(data: bytes) -> tuple[str, int] | None:
    """(encoding, length of the mark) when ``data`` starts with a Unicode byte-order mark."""
    for mark, encoding in _BOMS:
        if data.startswith(mark):
            return encoding, len(mark)
    return None


def decode(data: bytes) -> tuple[str, bool]:
    """A file's text and whether replacement characters were needed (reported in health). UTF-8 unless a
    byte-order mark says UTF-16 or UTF-32 (Windows tools write those); the mark itself is not text (it showed
    in previews); a lone ``\\r`` ends a line (module note)."""
    encoding, skip = byte_order_mark(data) or ("utf-8", 0)
    body = memoryview(data)[skip:]
    try:
        text, replaced = str(body, encoding), False
    except UnicodeDecodeError:
        text, replaced = str(body, encoding, "replace"), True
    if "\r" in text:
        text = _LONE_CR.sub("\n", text)
    return text, replaced


def lines_of(text: str) -> list[str]:
    """``text``'s lines with their endings, split at ``\\n`` only (module note)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out
