"""What a question is made of: terms, identifiers, literals, paths and frames, and its shape."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..core import Kind, Shape
from ..core.tokens import CJK, FULL_WIDTH, STOPWORDS, is_identifier_like, query_terms
from ..languages import FRAME_PATTERNS, SPECS, TRACE_MARKERS
from ..workspace.secrets import redact
from .description import clean_request

# Curly, low and angle quotes and corner brackets too, as chat tools, word processors and other languages write
# them (`“…”`, `„…“`, `«…»`, `「…」`): a string quoted so was never searched as written (a newcomer, session 41).
_QUOTED = re.compile(r"`([^`\n]{3,200})`|\"([^\"\n]{4,200})\"|'([^'\n]{4,200})'|[“„]([^“”„\n]{4,200})[”“]"
                     r"|‘([^‘’\n]{4,200})’|«\s?([^«»\n]{4,200}?)\s?»|「([^「」\n]{2,200})」|『([^『』\n]{2,200})』")
# A bare file name counts as a path when its extension is a parsed language's or a common doc/config one.
_NAMED_EXTENSIONS = frozenset({e for spec in SPECS for e in spec.extensions} |
                              {".md", ".toml", ".yaml", ".yml", ".json"})
_PATHLIKE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z][A-Za-z0-9]{0,9})(?::(\d+))?")
# Stack frames (group 1 the file, group 2 the line) and trace markers: each language's, from its module.
_FRAME_PATTERNS = list(FRAME_PATTERNS)
_TRACE_WORDS = re.compile("|".join((*TRACE_MARKERS, r"^\w*(Error|Exception): ")), re.M)
# `^[ \t]*`, never `^\s*`, at the start of a line pattern (here and in the languages' frame patterns): with re.M,
# `\s*` ran from each of 16,000 blank lines over all the rest, 27 s for one pasted question (review, session 37).
_ERROR_LINE = re.compile(r"^[ \t]*(?:[\w.]*(?:Error|Exception|panic|FAIL|fatal)\b[:!]?\s*)(.{6,200})$", re.M)

_CODE_Q = re.compile(r"\b(source files?|implement\w*|defin\w+|where is|which function|which class|code that|root cause|cause|"
                     r"how does)\b", re.I)  # "how does X handle Y": how something behaves is in its code
# Test-seeking is an intent ("which tests cover X", "where is X tested", "a test for X", "how do I test X"),
# not the word: in "the test client" or "testing utilities" it names code. A singular test word is the
# thing asked for when a function word, a test noun or the end of the clause follows it; any other word
# after it is what it modifies.
_TEST_WORD = re.compile(r"(?<![\w./])(tests|tested|specs|test|testing|spec|covers?|covered|covering|coverage)"
                        r"(?![\w/]|\.\w)(?:[\s-]+([A-Za-z_]\w*))?", re.I)  # not a path: test.css, tests/x
_AFTER_TEST_INTENT = frozenset("""
    a an the this that these those it its my our your their any all each some no whether if how when where why
    what which who for of on in at by to from with without about against around under over into across
    is are was were be been being do does did has have had can could should would will must may might
    and or but not so then than also only still ever now already again here there
    file files case cases suite suites function functions method methods code coverage
    fail fails failed failing pass passes passed passing break breaks broke broken cover covers covered
    covering check checks checked checking exercise exercises exercised assert asserts run runs ran hang hangs
    time times timing flake flakes flaky catch catches caught verify verifies verified exist exists
    """.split())
# The reverse question names a test and asks for code: "which code is covered by test_retry.py".
_CODE_FROM_TEST = re.compile(
    r"\b(code|source|implementation|functions?|modules?|classes|methods?)\b[^.?]{0,40}?\b(tested|covered|exercised|"
    r"checked)\s+by\b|\bwhat\b[^.?]{0,20}\b(code|source)\b[^.?]{0,30}\b(does|do)\b[^.?]*\b(tests?|specs?)\b"
    r"[^.?]{0,20}\b(exercise|cover|test|check)\b", re.I)


# The plural asks for tests only in a seeking phrase: "which tests", "tests for X", "the unit tests of Y", "tests that
# cover Z", "run the tests". As a subject of the product it names what code handles: "prints the slowest N tests at the
# end of the run", "skip tests marked xfail" were tests-only answers in pytest's own repository (a newcomer, session 38).
_PLURAL_BEFORE = frozenset("""which what find list show run any relevant related existing missing failing corresponding
    affected unit integration regression e2e end-to-end snapshot acceptance functional""".split())
_PLURAL_AFTER = frozenset("""for of cover covers covering covered exercise exercises exercising touching around about
    affected related hitting calling""".split())
_PLURAL_AFTER_THAT = frozenset("""cover covers exercise exercises check checks test tests touch touches call calls use
    uses hit hits verify verifies assert asserts""".split())
# What tests do when they are the thing asked about: "the retry tests fail", "parser tests are flaky".
_PLURAL_STATE = frozenset("""fail fails failed failing pass passes passed passing break breaks broke broken flake flakes
    flaky hang hangs crash crashes""".split())
_PLURAL_STATE_AFTER_BE = frozenset("flaky failing broken red slow hanging crashing".split())
_DETERMINERS = frozenset("the these those its their our my your all".split())
_ARTICLES = _DETERMINERS | frozenset("a an this that any each some no".split())
_PERSONS = frozenset("i we you one".split())
_CLAUSE_END = re.compile(r"[^\S\n]*(?:[?.!,;:]|$)", re.M)
_WHERE_FIRST = re.compile(r"\s*(where|which|what)\b", re.I)  # "where do the tests live?"
_WORDS_BEFORE = re.compile(r"[A-Za-z_]\w*(?:-\w+)*")  # "unit-tests": `unit`, not `unit-`


def asks_for_tests(text: str) -> bool:
    """True when the text asks for tests, not when it merely uses the word (see ``_TEST_WORD``)."""
    for m in _TEST_WORD.finditer(text):
        word, after = m.group(1).lower(), (m.group(2) or "").lower()
        if word in ("tested", "cover", "covers", "covered", "covering"):
            return True
        before = [w.lower() for w in _WORDS_BEFORE.findall(text[max(0, m.start() - 60):m.start()])[-2:]]
        if word in ("tests", "specs"):
            rest = [w.lower() for w in _WORDS_BEFORE.findall(text[m.end():m.end() + 40])]
            ends = not after or bool(_CLAUSE_END.match(text, m.end(1)))
            last = before[-1] if before else ""
            if (after in _PLURAL_AFTER or after in _PLURAL_STATE or last in _PLURAL_BEFORE
                    or (last in _DETERMINERS and (ends or _WHERE_FIRST.match(text)))
                    or (after in ("that", "which") and rest and rest[0] in _PLURAL_AFTER_THAT)
                    or (after in ("are", "is", "were", "was") and rest and rest[0] in _PLURAL_STATE_AFTER_BE)):
                return True
            continue
        if len(before) == 2 and before[0] in ("does", "do", "did") and before[1] not in _PERSONS | _ARTICLES:
            continue  # "how does clap test that names are unique": the code's own checking, a verb
        if word == "testing":
            # "where do we do testing of the cli?" asks for tests; "… can break testing with unittest.mock.patch()"
            # names what code supports (an agents' newcomer, session 38).
            if (after in ("of", "for", "around", "covering") or (before and before[-1] in _PLURAL_BEFORE)
                    or (not after and _WHERE_FIRST.match(text))):  # "where do we do testing?"
                return True
            continue
        if not after or after in _AFTER_TEST_INTENT:  # "a test for X", "test the parser", "the test fails"
            return True
    return False
# A request to make a failing test pass, not to find tests: "Fix this failing test:", "why does test_x fail?".
_FIX_A_TEST = re.compile(r"^\W*(?:please\s+)?(?:fix|debug|repair|investigate|diagnose|resolve|solve)\b|"
                         r"\bwhy\b[^.?\n]{0,80}\b(?:fail|fails|failed|failing|break|breaks|broke|broken)\b", re.I)
# What a test runner prints for a failure (beside stack frames): the output an agent pastes after "fix this test".
_RUNNER_OUTPUT = re.compile(r"\b(?:FAILED|FAIL)\b|\b\w*(?:Error|Exception|Failure)\b|✗|✕|\bpanicked at\b|"
                            r"^E {2,}\S|^>\s+\S|^_{3,} \S|^\s+at \S|\bexpected\b", re.M)
# The test the request is about ("this failing test", "the test fails"): not a request for other tests. A question
# that still asks for tests without it ("… which tests cover it?") is one (review of session 38).
_FAILING_TEST = re.compile(r"\b(?:(?:this|the|a|these|those|my|our)\s+)?(?:failing|broken|flaky|red)\s+tests?\b|"
                           r"\btests?\s+(?:fails?|failed|failing|breaks?|broke)\b", re.I)
_DOC_Q = re.compile(r"\b(docs?|documentation|readme|changelog|guide|tutorial)\b", re.I)
# A request for instructions ("how do I add an integration test", "how to run the linter"): a project's guides answer
# those beside its code. Read as a request for tests alone, lazygit's `pkg/integration/README.md` ("Writing tests"),
# first for `--kind doc`, was not in the top 30 (a newcomer, session 44).
# A clause that begins so: "the code that explains how to retry" asks for code, and a pasted issue's "How to reproduce"
# or "Steps to reproduce" asks for no guide (a review, session 45).
HOW_TO_CHARS = 300
_HOW_TO = re.compile(r"(?:^|[.?!:;]\s+|\n\s*)(?:(?:so|and|but|then|also|now)\s+)?(?:how (?:do|can|should|would|could|"
                     r"shall) (?:i|we|you|one)\b|how to\b(?!\s+reproduce)|what(?:'s| is) the (?:best|right|"
                     r"recommended|proper) way to\b)", re.I)
# What builds, ships and runs the code rather than the code: CI, containers, infrastructure, build files. A question
# naming one asks for config files ("where is CI configured", "which Dockerfile builds the api image", "where is
# the liveness probe set"), and "which workflow runs the tests" for a workflow, not tests: read as asking for code,
# none of 16 such questions on a newcomer's repository (workflows, Terraform, Helm, nginx, k8s) had its file in the
# top 10, which `--kind config` put first in 12 (session 41).
_CONFIG_NOUNS = (r"ci|ci/cd|github actions?|workflows?|(?:ci|build|deploy|deployment|release) pipelines?|gitlab-ci|"
                 r"circleci|travis|appveyor|jenkins(?:file)?|dockerfiles?|docker-compose|docker compose|"
                 r"(?:docker|container) images?|compose files?|terraform|helm(?: charts?)?|k8s|kubernetes|"
                 r"manifests?|ingress|(?:liveness|readiness|startup) probes?|cron ?jobs?|nginx|systemd|ansible|"
                 r"playbooks?|cloudformation|makefiles?|make targets?|cmake|build (?:config(?:uration)?|scripts?|"
                 r"files?|system)|config(?:uration)? files?|settings files?|pre-commit|dependabot|codecov|"
                 r"linters? config(?:uration)?|tsconfig|webpack config|vite config|pyproject(?:\.toml)?|setup\.cfg|"
                 r"tox\.ini|package\.json|go\.mod|cargo\.toml|pom\.xml|build\.gradle")
# Not bare `docker`, `containers`, `charts`, `pipelines`, `probes`, env variables, `yaml`: in a Docker SDK, a
# charting or data-pipeline library, or "the code that parses yaml", they name code.
_CONFIG_Q = re.compile(rf"(?<![\w/.-])(?:{_CONFIG_NOUNS})(?![\w/-])", re.I)
# Not when the question asks for code by name ("the code that builds the docker image") or for what code does to
# them ("where is the workflow state persisted" in a workflow engine, "how is go.mod parsed", "where does the
# terraform provider create the bucket"; a review, session 41); and only a question that asks where, which, what or
# how (_LOCATOR): a bare title ("Support ingress v1") is a change to code.
_NAMES_CODE = re.compile(r"\b(code|source|functions?|methods?|class(?:es)?|modules?|implementation|implemented|"
                         r"implements?|parser|handler|controller|provider|(?:parse|persist|handle|reconcile|create|"
                         r"load|call|process|validate|compute|store|serialize|decode|encode)(?:s|d|ed|es|ing)?)\b",
                         re.I)
_LOCATOR = re.compile(r"^\W*(?:where|which|what|how)\b", re.I)
# The tests a workflow or a make target runs: "which workflow runs the tests". Any other test intent wins ("where is
# the helm chart tested", "which CI tests are flaky").
_RUNS_TESTS = re.compile(r"\bruns?\b[^.?]{0,20}\b(?:tests?|specs?|test suite)\b", re.I)
# The config noun is the thing asked for: "which workflow runs the tests", "what make target builds the docs".
_CONFIG_ASKED = re.compile(rf"\b(?:which|what|where)\b(?:\s+(?:is|are|does|do|the|a|an|our|my))*\s+"
                           rf"(?:[\w-]+\s+)?(?:{_CONFIG_NOUNS})(?![\w/-])", re.I)


@dataclass
class QueryInfo:
    text: str
    terms: list[str]
    identifiers: list[str]
    literals: list[str]
    paths: list[str]  # path-like strings mentioned, frames first
    frames: list[tuple[str, int]]
    shape: Shape
    prefer: set[Kind] = field(default_factory=set)  # file kinds the question asks for
    avoid: set[Kind] = field(default_factory=set)
    how_to: bool = False  # a request for instructions: a guide is kept within the first answers (retriever.py)


# The most of a question that is read: a pasted log of a megabyte took minutes, and a question's cost grows with
# its distinct words (the path branch looks each up: about 3 ms a word at 100,000 files; 16,000 characters of
# code words took 4.3 s there, 1.1 s on black; session 23). Longer questions are read as their head (the
# request, an exception and its first frames) and their tail (Python prints the innermost frame last). The
# dev sets' longest question is 2,071 characters.
QUESTION_HEAD_CHARS = 12_000
QUESTION_TAIL_CHARS = 4_000
# A trace that starts past the head (a CI log handed over whole, the failure in its middle) was cut out with the
# middle, and a 36 KB log with a Python traceback after 300 log lines was searched as English (a newcomer pasting
# traces, session 44). Then the head's first QUESTION_REQUEST_CHARS (the request) are kept, and the rest of the
# head's share goes to the trace, from a little above its first mark; looked for in at most TRACE_SCAN_CHARS.
QUESTION_REQUEST_CHARS = 2_000
TRACE_SCAN_CHARS = 4_000_000


_SURROGATE = re.compile("[\ud800-\udfff]")
# CSI (colours) and OSC (links), within a line: an escape left open must not take the lines after it (review).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")


_MARK = re.compile(r"\[redacted [^\]\n]{1,40}\]")


def question_read(text: str) -> str:
    """The part of a question that is searched: all of it up to QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS
    characters, else its head and its tail joined by a line break (:func:`question_cut`). Lone surrogates (a
    command-line argument's undecodable bytes, a JSON ``\\udcff``) become U+FFFD: the model's tokenizer raised on
    them and the vector branch failed the question (a security audit, session 26)."""
    return question_read_noted(text)[0]


def question_read_noted(text: str) -> tuple[str, dict[str, int] | None]:
    """:func:`question_read`, and what the answer says of a long question (``query.cut``, None when read whole),
    from the one reading (the answer read a paste of up to 64 MB a second time for its note)."""
    text = _SURROGATE.sub("\ufffd", text)
    text = strip_ansi(text)
    text, note = question_cut(text)
    # A key pasted in a question (a log line with a token) came back in the answer's `query.terms`, which an agent
    # passes on (a newcomer, session 36); no store holds it, so it can match nothing. Left out, mark and all: the
    # mark's words would find the files whose secrets were redacted.
    redacted, found = redact(text)
    return (_MARK.sub(" ", redacted) if found else text), note


def strip_ansi(text: str) -> str:
    """Without a terminal's colours, kept in output pasted from a CI log or `pytest --color=yes`: the bold around a
    frame's path hid the frame, and the failing line was not packed (a newcomer, session 39)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def question_cut(text: str) -> tuple[str, dict[str, int] | None]:
    """The part of a long question that is searched, and what the answer says of it (``query.cut``; None when the
    question is read whole): its head and its tail, or its request, a trace found past the head, and its tail."""
    if len(text) <= QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS:
        return text, None
    end = len(text) - QUESTION_TAIL_CHARS
    m = None if _TRACE_WORDS.search(text, 0, QUESTION_HEAD_CHARS) else \
        _TRACE_WORDS.search(text, QUESTION_HEAD_CHARS, min(end, QUESTION_HEAD_CHARS + TRACE_SCAN_CHARS))
    if m is None:
        return (text[:QUESTION_HEAD_CHARS] + "\n" + text[-QUESTION_TAIL_CHARS:],
                {"chars": len(text), "head": QUESTION_HEAD_CHARS, "tail": QUESTION_TAIL_CHARS})
    start = text.rfind("\n", QUESTION_REQUEST_CHARS, max(m.start() - 400, QUESTION_REQUEST_CHARS)) + 1
    start = max(start, QUESTION_REQUEST_CHARS)
    size = min(QUESTION_HEAD_CHARS - QUESTION_REQUEST_CHARS, end - start)
    kept = text[:QUESTION_REQUEST_CHARS] + "\n" + text[start:start + size] + "\n" + text[-QUESTION_TAIL_CHARS:]
    return kept, {"chars": len(text), "head": QUESTION_REQUEST_CHARS, "traceFrom": start, "trace": size,
                  "tail": QUESTION_TAIL_CHARS}


def _question_part(text: str) -> str:
    first = re.split(r"(?<=[?.!])\s|\n", text.strip(), maxsplit=1)[0]
    return first


# A runtime's framing of a trace, not what failed: its words matched files by `Traceback`, `goroutine`, `backtrace`
# (a newcomer, session 38: `_code/code.py` ranked 5th for defining `Traceback`).
_TRACE_FRAMING = re.compile(r"Traceback \(most recent call last\)|goroutine \d+ \[[^\]\n]*\]|(?:\bthread '[^'\n]*' )?\bpanicked at\b|"
                            r"\bstack backtrace\b|^INTERNALERROR>|\bnote: [^\n]{0,200}?\bRUST_BACKTRACE\b[^\n]*|"
                            r"--- End of stack trace from previous location(?: where exception was thrown)? ---", re.M)


def _frame_tail(path: str) -> str:
    """The part of a frame's path that can name a workspace file: after an installed package's folder (a module
    of one file too: `site-packages/six.py`), else its last three parts (`/home/dev/.cargo/registry/src/
    index.crates.io-…/` gave the words `home`, `cargo`, `index`, and `index` matched a function of that name: a
    newcomer, session 38)."""
    tails = _installed_rest(path)
    return tails[0] if tails else "/".join(path.replace("\\", "/").split("/")[-3:])


def _trace_words(text: str, spans: list[tuple[int, int]]) -> str:
    """A trace's text as its words are searched: each frame's path as its tail, the runtime's framing out. Paths
    and frames are read from the text as pasted; only the words change."""
    out, at = [], 0
    for start, end in sorted(spans):  # one frame a place (_frames), innermost first: back to the order written
        out += [text[at:start], _frame_tail(text[start:end])]
        at = end
    out.append(text[at:])
    return _TRACE_FRAMING.sub(" ", "".join(out))


def _prose_ends(text: str) -> list[str]:
    """A pasted question's first and last lines, where its words to the reader are (a runner's output between them
    says `test` in its own senses: Gradle's "task ':core:test'")."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[:1] + lines[-1:] if len(lines) > 1 else lines


# Output that prints the innermost frame last: Python's traceback, and pytest's, outermost first without the
# traceback's header: `--tb=short`'s `src/app.py:1307: in make_response`, the long style's `tests/test_x.py:6: ` and
# `src/app.py:3: TypeError` (a frame's location line; the last names the exception; review, session 39). Every
# other runtime's trace starts at the innermost frame.
_INNERMOST_LAST = re.compile(r"most recent call last|^(?:[A-Za-z]:)?[^\s:]+:\d+: ?(?:in \S+|[\w.]*(?:Error|Exception|"
                             r"Failed|Failure|Exit|Interrupt|Warning)\w*)?[ \t]*$", re.M | re.I)


def _frames(raw: str) -> tuple[list[tuple[str, int]], list[tuple[int, int]]]:
    """A trace's frames, (file as written, line), innermost first, and where each file is written. Read in the
    order written (frames read by several patterns were in the patterns' order), one frame a place: of two
    patterns reading one place, the longer file. Innermost first for every reader (the path branch ranked
    Python's outermost frame's file first, spans packed a caller before the raise; a newcomer, session 39)."""
    found: list[tuple[int, int, str, int]] = []
    for pat in _FRAME_PATTERNS:
        named = "file" in pat.groupindex  # a pattern may name its groups: file, line, and pkg (folders, dotted)
        for m in pat.finditer(raw):
            if named:
                pkg = m.group("pkg") if "pkg" in pat.groupindex else None
                found.append((*m.span("file"), (pkg or "").replace(".", "/") + m.group("file"), int(m.group("line"))))
            else:
                found.append((*m.span(1), m.group(1).replace("\\", "/"), int(m.group(2))))
    found.sort(key=lambda f: (f[0], -f[1]))
    kept: list[tuple[int, int, str, int]] = []
    for f in found:
        if kept and f[0] < kept[-1][1]:
            continue  # inside the one read before it
        kept.append(f)
    if _INNERMOST_LAST.search(raw):
        kept.reverse()
    return [(f, ln) for _s, _e, f, ln in kept], [(s, e) for s, e, _f, _ln in kept]


# An identifier runs on over letters of any script (`berechne_größe`) but not into Han, kana or Hangul, which
# Chinese and Japanese write beside it without a space (`为什么parse_config在Windows上失败`; session 41).
_IDENTIFIER = re.compile(rf"[A-Za-z_](?:[^\W{CJK}]|\.|(?<=_)[{CJK}]+)*(?:\(\))?")  # `test_计算` whole


def analyse(text: str, cleaning: str = "squash") -> QueryInfo:
    """``cleaning``: how a change description is cleaned before search (setting ``clean_description``,
    ``description.CLEANINGS``); a trace is never cleaned."""
    raw = text
    frames, spans = _frames(raw)
    is_trace = bool(_TRACE_WORDS.search(raw)) or len(frames) >= 2
    if not is_trace:
        # A change description is searched without its links, trailers, checklists and bot lines
        # (retrieval/description.py); a trace keeps every line, its log is the question.
        text = clean_request(raw, cleaning)
    searched = _trace_words(text, spans) if is_trace else text
    if not searched.isascii():
        searched = searched.translate(FULL_WIDTH)  # `ｐａｒｓｅ＿ｃｏｎｆｉｇ` typed in full-width mode is parse_config
    terms = query_terms(searched)
    words = _IDENTIFIER.findall(searched)
    identifiers = list(dict.fromkeys(w.rstrip(".") for w in words if is_identifier_like(w.rstrip("."))))
    # A trace's quoted words without its framing: Rust's `thread 'main' panicked` gave the literal `main`.
    literals = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(
        _TRACE_FRAMING.sub(" ", text) if is_trace else text)]
    paths = [f for f, _ in frames]
    # A frame's bare file name (`(OrderService.java:25)`) is that frame's, already read with its package: as a
    # mention of its own it named every `OrderService.java` alike (review, session 37).
    framed = {f.rpartition("/")[2] for f in paths}
    for m in _PATHLIKE.finditer(text):
        p = m.group(1)
        if "/" not in p and p in framed:
            continue
        if "/" in p or p[p.rfind("."):].lower() in _NAMED_EXTENSIONS:
            paths.append(p)
    paths = list(dict.fromkeys(paths))
    if is_trace:
        literals += [m.group(1).strip() for m in _ERROR_LINE.finditer(text)][:5]
    literals = list(dict.fromkeys(lit for lit in literals if len(lit.strip()) >= 4))

    question = _question_part(text)
    prefer: set[Kind] = set()
    avoid: set[Kind] = set()
    # Not with a trace or a runner's output: "How do I fix this?" over a traceback asks for the code that failed.
    # Any of its first sentences ("Retries give up. How do I make them wait longer?"), not a pasted document's.
    how_to = bool(_HOW_TO.search(text[:HOW_TO_CHARS])) and not is_trace and not _RUNNER_OUTPUT.search(raw)
    wants_docs = bool(_DOC_Q.search(question)) or how_to
    tests_asked = asks_for_tests(question)
    wants_config = (bool(_CONFIG_Q.search(question)) and not is_trace and bool(_LOCATOR.match(question))
                    and not _NAMES_CODE.search(question))
    if _CODE_FROM_TEST.search(question):
        shape_hint = "code"
    elif wants_config and _CONFIG_ASKED.search(question) and _RUNS_TESTS.search(question):
        shape_hint = "config"  # before tests: "which workflow runs the tests" asks for the workflow
    elif (_FIX_A_TEST.search(question) and (is_trace or _RUNNER_OUTPUT.search(raw))
          and not any(asks_for_tests(_FAILING_TEST.sub(" ", ln)) for ln in _prose_ends(text))):
        # "Fix this failing test:" and the runner's output: the fix is in the code the test runs, which the output
        # names. Read as a request for tests, all ten answers were tests in 9 of 9 such questions on express,
        # fastapi, mockito and tokio, the raising file named by the trace among them (an agents' newcomer, session
        # 38); the failing test itself is named by its frames and its path.
        shape_hint = "code"
    elif tests_asked and not how_to and not (wants_docs and not _TEST_WORD.search(
            re.sub(r"\bcover\w*", "", question))):
        shape_hint = "test"  # an intent for tests wins over "where is" ("where is this tested?")
    elif wants_config:
        shape_hint = "config"  # "where is CI configured", "how does nginx proxy /api": before "where is", "how does"
    elif _CODE_Q.search(question):
        shape_hint = "code"
    elif re.search(r"\b(which|what|find|list|show)\b[^.?]*\b(tests|specs)\b", text, re.I):
        shape_hint = "test"  # the question comes after a first sentence: "Retries give up. Which tests cover it?"
    else:
        shape_hint = ""

    content_words = [w for w in words if w.lower() not in STOPWORDS]
    if shape_hint == "test":
        shape = Shape.TEST
        prefer = {Kind.TEST}
        if not wants_docs:
            avoid = {Kind.DOC}
    elif is_trace:
        shape = Shape.TRACE
        prefer = {Kind.CODE}
    elif identifiers and (len(identifiers) >= 3 or len(identifiers) / max(1, len(content_words)) >= 0.3):
        shape = Shape.IDENTIFIER
    else:
        shape = Shape.ENGLISH
    if shape_hint == "code" and shape != Shape.TEST:
        prefer = {Kind.CODE}
        if not wants_docs:
            avoid = {Kind.DOC}
    elif shape_hint == "config" and shape != Shape.TRACE:
        prefer = {Kind.CONFIG}
    if wants_docs and shape != Shape.TEST:
        prefer = prefer | {Kind.DOC}
        avoid.discard(Kind.DOC)
    if how_to and tests_asked:
        # "How do I run the tests", "how do I test my click command": the guide, the tests to copy, and what runs
        # them, not the project's tests by their words (read as a request for tests, the guide came 21st to 44th in
        # four repositories of five, click's testing guide 40th; a newcomer, session 45).
        prefer = prefer | {Kind.TEST}
    return QueryInfo(text, terms, identifiers, literals, paths, frames, shape, prefer, avoid, how_to)


_INSTALLED_DIRS = frozenset({"site-packages", "dist-packages", "node_modules"})
_VERSION = re.compile(r"v?\d+\.\d+")
MAX_PART = 128  # a folder name longer than this is no versioned module's (and is not searched for one)


def _versioned_name(part: str) -> str | None:
    """The module's name of a folder named with its version: Go's module cache (`gin@v1.11.0`), pnpm's store
    (`express@4.18.2`), cargo's registry (`clap_builder-4.5.60`, `tree-sitter-0.20.1`); None for any other. No
    backtracking regex: a pattern with a lazy name before the version was quadratic in the folder's length, and ran
    per frame and top file (a 15 KB trace took 8.9 s; review, session 38)."""
    if len(part) > MAX_PART:
        return None
    at = part.rfind("@")
    if at > 0:
        return part[:at] if _VERSION.match(part, at + 1) else None
    i = part.find("-")
    while i > 0:
        if _VERSION.match(part, i + 1):
            return part[:i]
        i = part.find("-", i + 1)
    return None


@lru_cache(maxsize=4096)
def installed_tails(frame: str) -> tuple[str, ...]:
    """The paths a frame in an installed copy of a package may have in the workspace that is that package's
    source: after a versioned module folder, with the module's name before it (a workspace of several crates) and
    without; after ``site-packages/`` or ``node_modules/``, and for npm without the package's name. A site-packages
    frame never met ``src/_pytest/x.py``, nor a cargo-registry frame the checkout's file, so a pasted trace from a
    user of the library never showed the failing line (a newcomer, session 38). Two parts at least: a library's
    `models.py` alone is not the workspace's (review, session 26); a module-root file (`gin@v1.11.0/tree.go`) is
    the workspace's `tree.go` by the frame's own suffix (query.frame_names; not under `node_modules/` or a cargo
    registry, where a one-part path is refused). Kept per frame: asked for each of a question's frames and each top
    file."""
    return tuple(t for t in dict.fromkeys(_installed_rest(frame)) if "/" in t)


def _installed_rest(frame: str) -> list[str]:
    """A frame's paths after its last installed package's folder (see :func:`installed_tails`), or none."""
    parts = frame.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        rest = parts[i + 1:]
        if parts[i] in _INSTALLED_DIRS:
            skip = (2 if rest[0].startswith("@") else 1) if parts[i] == "node_modules" else 0
            return ["/".join(rest)] + (["/".join(rest[skip:])] if 0 < skip < len(rest) else [])
        name = _versioned_name(parts[i])
        if name:
            return ["/".join([name, *rest]), "/".join(rest)]
    return []


_LIBRARY_DIRS = ("/site-packages/", "/dist-packages/", "/node_modules/", "/vendor/", "/.cargo/registry/")


_JVM_SOURCES = (".java", ".kt", ".scala")


def frame_names(frame: str, path: str) -> bool:
    """Whether a frame's file (as the trace wrote it: absolute, site-packages, relative) is ``path``. A library's
    frame (`.../site-packages/x/models.py`) is not the workspace's root-level `models.py`: a path of one part
    matches such a frame only whole (review, session 26)."""
    if frame == path:
        return True
    if frame.endswith(_JVM_SOURCES) and not frame.startswith("/"):
        # A JVM frame's folders are its class's package (`com/acme/Main.java`), which a source tree need not
        # mirror (Kotlin's seldom does): any file of its name, and closest_by_tail prefers the package's.
        base = frame.rpartition("/")[2]
        return path == base or path.endswith("/" + base)
    if frame.endswith("/" + path):
        return "/" in path or not any(d in frame for d in _LIBRARY_DIRS)
    if "/" not in frame:
        return path.endswith("/" + frame)
    return any(path == t or path.endswith("/" + t) for t in installed_tails(frame))


def closest_by_tail(mention: str, cands: list[str]) -> list[str]:
    """Of ``cands``, those sharing the most trailing path parts with ``mention`` (a frame's absolute path, a
    mentioned file), in their order; none that share no part."""
    parts = mention.split("/")
    best: list[str] = []
    best_len = 0
    for c in cands:
        cp = c.split("/")
        n = 0
        while n < min(len(cp), len(parts)) and cp[-1 - n] == parts[-1 - n]:
            n += 1
        if n > best_len:
            best, best_len = [c], n
        elif n == best_len and n:
            best.append(c)
    return best
