"""Code-aware tokens, shared by the index and the queries so both split alike.

``getUserName`` gives ``getusername`` (whole) plus ``get``, ``user``, ``name``;
``grpc_proxy`` gives ``grpc_proxy``, ``grpc``, ``proxy``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
# Han (with extension A and compatibility ideographs), hiragana, katakana (with half-width forms) and Hangul.
CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{CJK}]+")
# Full-width ASCII (U+FF01-FF5E), which an input method left in full-width mode types: `ｐａｒｓｅ＿ｃｏｎｆｉｇ`.
FULL_WIDTH = str.maketrans({cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)})
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@lru_cache(maxsize=1)
def _unicode_words() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Words with letters beyond ASCII (`größe`, `Ñandú`, a Spanish comment) were cut at each such letter (`gr`), so
    a question naming one found nothing by its words (a newcomer, session 30). Any script's letters, and the
    combining marks inside a word (Devanagari's vowel signs: `हिन्दी` is one word, not four letters; a review).
    Python's ``re`` has no ``\\p{M}``: the marks' ranges are read from ``unicodedata`` once (the BMP, ~10 ms), on
    the first text beyond ASCII. This regex is 1.55x slower than the ASCII one (black's 3.2 MB: 72 against 46
    ms), so ASCII text (most code; ``str.isascii``) keeps the ASCII one.

    The second pattern, for text with Han, kana or Hangul: such a run is a word of its own, apart from Latin letters
    beside it, since Chinese and Japanese put no space around an identifier (`为什么parse_config失败` was one word that
    matched nothing; a newcomer, session 41), but an underscore joins them as an identifier does (`test_计算`,
    `get_用户名`; a review). Text without such a run keeps the first, whose single character class is faster (the
    second is ~1.3x slower on Cyrillic and German, a review)."""
    ranges: list[tuple[int, int]] = []
    for cp in range(0x300, 0x10000):
        if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    marks = "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)
    plain = re.compile(rf"[^\W\d][\w{marks}]*|[0-9]+")
    rest = rf"[^\W{CJK}]*(?:[{marks}][^\W{CJK}]*)*"  # letters, digits, `_` and marks of any other script
    cjk = re.compile(rf"(?:[{CJK}]+|[^\W\d{CJK}]{rest})(?:(?<=_)[{CJK}]+{rest}|_{rest})*|[0-9]+")
    return plain, cjk


def words_of(text: str) -> list[str]:
    """The words of a text as written: identifiers (any script's letters and marks) and numbers. Text beyond ASCII
    is composed first (NFC), so a decomposed `größe` (macOS file names, some editors) is the same word."""
    if text.isascii():
        return _WORD.findall(text)
    text = unicodedata.normalize("NFC", text)
    plain, cjk = _unicode_words()
    return (cjk if _CJK_RUN.search(text) else plain).findall(text)


def _camel_parts(piece: str) -> list[str]:
    """A piece's camelCase parts; beyond ASCII by the letters' case (``GrößeBerechnen`` -> ``Größe``, ``Berechnen``);
    a run of Han, kana or Hangul as its overlapping pairs of characters (below)."""
    if piece.isascii():
        return _CAMEL.findall(piece)
    if len(piece) > 2 and _CJK_RUN.fullmatch(piece):
        # Chinese and Japanese write no spaces between words: a sentence was one token, so `配置文件解析在哪里`
        # ("where is the config file parsed") matched no comment that says `解析配置文件` (a newcomer, session 41).
        # Overlapping bigrams, as Lucene's CJK analyzer indexes them: 配置 置文 文件 ... match whatever words the
        # two texts share.
        return [piece[i:i + 2] for i in range(len(piece) - 1)]
    parts: list[str] = []
    start = 0
    for i in range(1, len(piece)):
        a, b = piece[i - 1], piece[i]
        if (a.islower() and b.isupper()) or (a.isdigit() != b.isdigit()):
            parts.append(piece[start:i])
            start = i
    parts.append(piece[start:])
    return parts

# Words a question is made of that say nothing about which file answers it.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does did for from had has have how i if in into
    is it its itself me my no not of on or our should so than that the their them then there these
    they this those to too was we were what when where which while who whom why will with would you
    your yours also any all each other some such only own same just about above after again against
    before below between both during further here more most off once out over under until up very
    via per use used uses using make makes made get gets let lets like want need needs one two new
    self none null true false return def func fn var const pub else elif end
    file files code source sources change changes changed fix fixes fixed add adds added remove
    removed update updated implement implements implementation please find show tell
    """.split()
)


def code_words(text: str) -> list[str]:
    """The words of a text as written (`parse_args`, `AssertJ`, `42`), before any splitting."""
    return words_of(text)


def split_identifier(word: str) -> list[str]:
    """The lower-cased parts of one identifier (snake, camel, digits)."""
    parts: list[str] = []
    for piece in word.split("_"):
        if piece:
            parts.extend(p.lower() for p in _camel_parts(piece))
    return parts


MAX_WHOLE = 64  # longer words are not tokens whole: base64, hex blobs, generated names


def _long_parts(word: str) -> list[str]:
    """The parts of a word longer than MAX_WHOLE when it is made of words (``test_a_broken_history_ranker_is_…``, a
    pytest name an agent pastes, lost every word-match: a newcomer, session 36); none for a blob (base64 split at
    its case changes gives parts of one or two characters; base32 has no small letter and no underscore). A long
    run of Chinese or Japanese (a sentence without spaces) gives its character pairs (a review, session 41)."""
    if _CJK_RUN.search(word):
        return split_identifier(word)
    if "_" not in word and not any(c.islower() for c in word):
        return []  # base32 (TOTP seeds, ids): capitals and digits in runs long enough to pass the test below
    parts = split_identifier(word)
    if len(parts) < 2 or max(map(len, parts)) > MAX_WHOLE or len(word) / len(parts) < 3:
        return []
    return parts


def code_tokens(text: str) -> Iterator[tuple[str, int]]:
    """(token, position) pairs; an identifier yields itself whole, then its parts."""
    pos = 0
    for word in words_of(text):
        low = word.lower()
        if len(low) > MAX_WHOLE:
            parts = _long_parts(word)
            if not parts:
                continue
            for p in parts:
                yield p, pos
            pos += 1
            continue
        parts = split_identifier(word)
        yield low.strip("_") or low, pos
        if len(parts) > 1:
            for p in parts:
                yield p, pos
        pos += 1


@lru_cache(maxsize=1 << 16)
def _word_tokens(word: str) -> str:
    """One word's tokens as :func:`code_tokens` gives them, joined by spaces ("" for a word it skips)."""
    low = word.lower()
    if len(low) > MAX_WHOLE:
        return " ".join(_long_parts(word))
    parts = split_identifier(word)
    whole = low.strip("_") or low
    return " ".join([whole, *parts]) if len(parts) > 1 else whole


def token_string(text: str) -> str:
    """``" ".join`` of :func:`code_tokens`'s tokens, the same string, for a lexical store's fields. Code
    repeats its words, so each word's tokens are made once (a cache of 65,536 words): 2.8-3.4x faster than
    the generator on black's 2,738 chunks, the same strings (session 10), and it ran for every chunk of a cold index and of a save."""
    return " ".join(filter(None, map(_word_tokens, words_of(text))))


def useful_tokens(text: str) -> Iterator[str]:
    """The tokens of ``text`` worth searching for, repeats kept: stop words, single characters and short
    numbers dropped."""
    for tok, _ in code_tokens(text):
        if len(tok) < 2 or tok in STOPWORDS or tok.isdigit() and len(tok) < 3:
            continue
        yield tok


def query_terms(text: str) -> list[str]:
    """Distinct useful terms of a question, in order, stop words dropped."""
    return list(dict.fromkeys(useful_tokens(text)))


_VOWELS = frozenset("aeiou")


def inflections(word: str) -> list[str]:
    """Other forms of a lower-case English word that code may spell it as: ``pushing`` -> ``push``,
    ``parsing`` -> ``parse``, ``retries`` -> ``retry``, ``stopped`` -> ``stop``, ``overload`` ->
    ``overloads``. Candidates only, some not words at all (``pars``): a caller keeps those its index holds.
    Words under four letters, and any with a digit or an underscore, have none."""
    w = word
    if len(w) < 4 or not w.isalpha() or not w.isascii():
        return []
    out: list[str] = []
    if w.endswith("ies") and len(w) > 4:
        out.append(w[:-3] + "y")
    elif w.endswith("es") and len(w) > 4:
        out += [w[:-2], w[:-1]]  # matches -> match; caches -> cache
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        out.append(w[:-1])
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            base = w[: -len(suffix)]
            if suffix == "ed" and base.endswith("i"):
                out.append(base[:-1] + "y")  # copied -> copy
                continue
            out += [base, base + "e"]  # pushing -> push; parsing -> parse
            if len(base) >= 3 and base[-1] == base[-2] and base[-1] not in _VOWELS:
                out.append(base[:-1])  # stopped -> stop
    if not w.endswith(("s", "ing", "ed")):
        out.append(w + ("es" if w.endswith(("sh", "ch", "x", "z")) else "s"))  # option -> options
    return [x for x in dict.fromkeys(out) if x != w and len(x) >= 3]


def is_identifier_like(word: str) -> bool:
    """Code-shaped words: camelCase, snake_case, dotted, with digits or parens."""
    if "_" in word.strip("_") or "." in word.strip("."):
        return True
    if re.search(r"[a-z][A-Z]", word) or re.match(r"^[A-Z][a-z]+[A-Z]", word):
        return True
    if word.endswith("()"):
        return True
    return False


_NOT_ASCII_ALNUM = re.compile(r"[^a-z0-9]")
_NOT_ALNUM = re.compile(r"[\W_]")


def stripped(text: str) -> str:
    """Separator-stripped, lower-cased: ``grpc_proxy`` and ``grpcProxy`` both become ``grpcproxy``. Letters of every
    script are kept (composed): stripping all but ``a-z0-9`` made every Chinese or Cyrillic file name ``""`` and
    ``größe`` and ``grüße`` both ``gre``, so `related-tests 设置.py` listed `test_计算.py` "named after" it (a
    newcomer, session 41)."""
    low = text.lower()
    if low.isascii():
        return _NOT_ASCII_ALNUM.sub("", low)
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFC", low))
