"""`delphi index | context | health | symbols | related-tests | related-code | eval`: argv in, engine calls, text or JSON out.

Start-up cost is paid by every call, so this module imports only the standard library at load:
the engine (numpy, Whoosh, Chroma, tree-sitter...) is imported inside the commands that use it,
and `delphi --help` or a bad flag never loads it.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from . import __version__  # the package's __init__ is light: its heavy names load on first use
from .core import (  # standard library only, like this module's other imports
    KINDS,
    State,
    formats,
    fs,
    state_of,
)
from .shown import branch_notes, fenced, query_notes, shown, shown_text

if TYPE_CHECKING:
    from .engine import Engine

# Exit statuses: 0 answered, 1 nothing found (like grep) or health has errors, 2 a usage or input error.
NOT_FOUND = 1
USAGE = 2
MACHINE = 3  # the machine refused: no disk space, file descriptors or memory, a folder that cannot be written
# What `delphi eval --baselines` accepts (evaluation/runner.py's BASELINE_NOTES describes each);
# the default runs the first three, `lexical` only when asked.
EVAL_BASELINES = ("bm25", "grep", "heuristic", "lexical")


class ProgressBar:
    """Indexing progress on stderr.

    On a terminal: a bar with files (or chunks) per second and an ETA, redrawn in place with ``\\r``.
    Anywhere else (a file, a pipe, CI logs): no carriage returns, at most one line per phase when it
    ends. ``delay``: draw nothing until the run has taken this long, so the incremental check every
    `delphi context` does on a warm index stays silent.
    """

    def __init__(self, stream: IO[str] | None = None, tty: bool | None = None, delay: float = 0.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.delay = delay
        self.t0 = time.perf_counter()
        self.phase = ""
        self.phase_t0 = self.t0  # a phase runs from the end of the previous one (or the start: scanning)
        self.state: tuple[int, int, int] = (0, 0, 0)  # done, total, chunks of the current phase
        self.drawn = False  # a \r line is on screen and needs its newline
        self.last = 0.0

    def __call__(self, phase: str, done: int, total: int, chunks: int) -> None:
        now = time.perf_counter()
        if phase != self.phase:
            self._end_phase(now)
            self.phase = phase
        self.state = (done, total, chunks)
        if not self.tty or now - self.t0 < self.delay:
            return
        if now - self.last < 0.2 and done < total:
            return
        self.last = now
        self.stream.write("\r\x1b[K" + self._line(now, finished=False))
        self.stream.flush()
        self.drawn = True

    def _line(self, now: float, finished: bool) -> str:
        done, total, chunks = self.state
        el = now - self.phase_t0
        unit = "files" if self.phase == "lexical" else "chunks"
        # A rate over a few milliseconds is noise (the first tick once read 25,000,000 files/s).
        rate = done / el if el >= 0.05 else None
        speed = f" {rate:,.0f} {unit}/s" if rate is not None else ""
        if rate is not None and self.phase == "lexical":
            speed += f" {chunks / el:,.0f} chunks/s"
        if finished:
            return f"{self.phase:8} {done}/{total} {unit} in {el:.1f}s{speed}"
        width = 24
        fill = int(width * done / total) if total else width
        eta = f" ETA {(total - done) / rate:,.0f}s" if rate else ""
        return f"{self.phase:8} [{'#' * fill}{'-' * (width - fill)}] {done}/{total} {unit}{speed}{eta}"

    def _end_phase(self, now: float) -> None:
        if not self.phase:
            return  # the first phase runs from the start (scanning), not from its first tick
        if self.drawn:
            self.stream.write("\r\x1b[K" + self._line(now, finished=True) + "\n")
        elif not self.tty and now - self.t0 >= self.delay:
            self.stream.write(self._line(now, finished=True) + "\n")
        self.stream.flush()
        self.drawn = False
        self.phase, self.phase_t0, self.last = "", now, 0.0

    def close(self) -> None:
        """End the last phase's line, so whatever is printed next starts on a line of its own."""
        self._end_phase(time.perf_counter())


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if getattr(args, "index_dir", None) is not None:
        # `--index-dir ""` (an unset shell variable) used the default folder without a word (session 29): the
        # setting's own check refuses it, naming the flag's key.
        overrides["index_dir"] = args.index_dir
    if getattr(args, "embedder", None):
        overrides["embedder"] = args.embedder
    if getattr(args, "no_vectors", False):
        overrides["vectors"] = False
    if getattr(args, "chroma_url", None):
        overrides["chroma_url"] = args.chroma_url
    if getattr(args, "reranker", None):
        overrides["reranker"] = args.reranker
    return overrides


# The index folders this command opened, with the manifest file each opened ((device, inode)): _recovered.
_OPENED: list[tuple[Path, tuple[int, int] | None]] = []


def _recovered(e: BaseException) -> str | None:
    """A manifest found corrupt while a command read or wrote it (a damaged page the open's checks do not read):
    moved aside when SQLite's check confirms it, so that the command can run once more on a new one. What happened,
    in words, or None (the error is not the manifest's). Another process that met the same damage may have moved it
    aside first: the command then runs again on the new one (it re-raised the error, a review, session 47)."""
    from .engine import _file_identity, recover_damaged_manifest
    from .stores.meta import is_corruption

    if not is_corruption(e) or not _OPENED:
        return None
    index_dir, opened = _OPENED[-1]
    aside = recover_damaged_manifest(index_dir, e, opened)  # None too when the file is no longer the one opened
    if aside is not None:
        return f"it was moved aside to {aside} and a new one started (the embedding cache went with it)"
    if opened is not None and _file_identity(index_dir / "meta.sqlite") != opened:
        return "another process had already moved it aside and started a new one"
    return None


def _engine(args: argparse.Namespace, ranks: bool = True) -> Engine:
    """``ranks=False``: the command ranks nothing (symbols, related files), so the learned ranker is
    not loaded (a model the command does not need is start-up time for nothing)."""
    from .engine import Engine  # lazy: see the module docstring

    eng = Engine(args.path, **{**_overrides(args), **({} if ranks else {"reranker": "off"})})
    _OPENED.append((eng.index_dir, eng.manifest_identity))
    if "snapshot" in eng.problems:  # a `snapshot` setting refused at this open: said where the user looks, not
        # only in a health report of this very process (a newcomer, session 29)
        print(f"delphi: warning: {eng.problems['snapshot']}", file=sys.stderr)
    return eng


def _output_file(flag: str, value: str) -> tuple[str, int]:
    """A file a command writes, checked before its work: the path with `~` expanded (`--trace=~/t.jsonl`: no
    shell expands it after `=`, so the check and the write read one path), and USAGE after saying what is wrong
    (a folder, or a folder that does not exist), else 0."""
    path = Path(value).expanduser()
    why = (f"{path} is a folder; give a file to write" if path.is_dir() else
           f"the folder of {path} does not exist" if not path.parent.is_dir() else "")
    if why:
        print(f"delphi: error: {flag}: {why}", file=sys.stderr)
        return str(path), USAGE
    return str(path), 0


def workspace_path(arg: str, root: Path) -> str:
    """A file argument as the user meant it: relative to the current folder first (what tab-completion
    gives), then to the workspace root. Absolute paths and ``file:`` URIs pass through; the engine
    refuses a path outside the workspace or one that does not exist, naming it."""
    if arg.startswith("file:") or os.path.isabs(arg):
        return arg
    try:
        cwd = Path.cwd()
    except FileNotFoundError:  # the current folder was removed under the shell: the workspace root is left
        return arg
    here = Path(os.path.normpath(cwd / arg))
    if fs.exists(here):
        try:
            here.relative_to(root)
            return str(here)
        except ValueError:
            pass
    if not fs.exists(root / arg) and fs.exists(here):
        return str(here)  # it exists only here, outside the workspace: let the engine say so
    return arg


def _quiet_progress(args: argparse.Namespace) -> ProgressBar | None:
    """The bar for commands whose output is not about indexing: silent unless indexing takes a while."""
    return None if getattr(args, "json", False) else ProgressBar(delay=0.5)


def _index_quietly(eng: Engine, args: argparse.Namespace, **kw: Any) -> None:
    """Catch up with changed files first; while another process indexes this workspace, answer from
    the committed index instead (and say who is writing) rather than wait or fail."""
    from .engine import IndexBusy

    bar = _quiet_progress(args)
    try:
        eng.index(progress=bar, wait=False, **kw)
    except IndexBusy as busy:
        print(f"delphi: {busy}; answering from the committed index", file=sys.stderr)
    finally:
        if bar:
            bar.close()


def _dump(obj: Any) -> None:
    print(json.dumps(obj, indent=2))


def _embedded_words(rep: Any) -> str:
    """What the run's vectors cost. "embedded 10464 (5032 from cache, 5299 of them embedded beside the lexical
    pass)" read as a cache on a first index and as a subset larger than its set (a newcomer, session 44): the
    chunks given vectors, how many texts the model embedded (the part beside the lexical pass among them), and how
    many reused an identical text's vector."""
    if not rep.chunks_embedded:
        return ""
    model = max(0, rep.chunks_embedded - rep.vectors_from_cache) + rep.vectors_ahead
    reused = max(0, rep.chunks_embedded - model)
    ahead = f", {rep.vectors_ahead} of them beside the lexical pass" if rep.vectors_ahead else ""
    same = f"; {reused} reused the vector of an identical text" if reused else ""
    return f"; {rep.chunks_embedded} chunks given vectors ({model} texts embedded{ahead}{same})"


def cmd_index(args: argparse.Namespace) -> int:
    if args.snapshot:  # a team's snapshot as the starting point of a new index (README, "Index snapshots")
        from .engine import Engine

        if Engine.load_snapshot(args.snapshot, args.path, only_if_new=True, **_overrides(args)) is None:
            print("delphi: --snapshot ignored: this workspace has an index already "
                  "(`delphi snapshot load` replaces it)", file=sys.stderr)
    with _engine(args) as eng:
        bar = ProgressBar() if not args.quiet else None
        t0 = time.perf_counter()
        def waiting(holder: Any) -> None:
            what = holder.describe() if holder else "another Delphi process is indexing this workspace"
            print(f"delphi: {what}; waiting...", file=sys.stderr, flush=True)

        try:
            rep = eng.index(progress=bar, rebuild=args.rebuild, on_wait=waiting)
        finally:
            if bar:
                bar.close()
        el = time.perf_counter() - t0 - rep.waited_s  # the run's own, the wait for another process apart
        eng.prepare_view()  # for the next process (an editor's server), on a large workspace
        counts = eng.counts()
        summary = {"seconds": round(el, 2), **rep.__dict__, "counts": counts, "indexDir": str(eng.index_dir)}
        if args.json:
            _dump(summary)
        else:
            waited = f" after waiting {rep.waited_s:.1f}s for the other process" if rep.waited_s > 0 else ""
            print(f"indexed {rep.files_indexed} files ({rep.files_unchanged} unchanged, {rep.files_deleted} removed, "
                  f"{rep.files_skipped} skipped) in {el:.1f}s{waited}: {counts['files']} files, "
                  f"{counts['chunks']} chunks, {counts['vectors']} vectors" + _embedded_words(rep))
            print(f"index: {eng.index_dir}")
            from .engine import REBUILD_REQUESTED  # (loaded by now)

            for what in rep.repaired:  # damaged stores found and rebuilt before this run, or all on request
                print(f"{'rebuilt' if what.endswith(REBUILD_REQUESTED) else 'repaired'}: {what}")
        for err in rep.errors:
            print(f"delphi: {err}", file=sys.stderr)
        for note in rep.notes:
            print(f"delphi: note: {note}", file=sys.stderr)
        if rep.errors and not rep.files_seen:  # nothing indexed (e.g. the lexical store is unavailable,
            return 1  # review 7 M4): an error, not a traceback or a 0
    return 0


def _question_of(args: argparse.Namespace) -> str | None:
    """The question: as given, or read from stdin for ``-`` (a pasted log passes the shell's argument limit,
    about 128 KB). None, with the message printed, when the folder and the question look swapped or the
    folder was left out: argparse alone said "required: question" for `delphi context "where is x"`."""
    if args.question is None:
        if not Path(args.path).is_dir():
            print(f"delphi context: error: give the workspace folder first, then the question: "
                  f"delphi context . {args.path!r}", file=sys.stderr)
        else:
            print("delphi context: error: the question is missing (after the folder; `-` reads it from stdin)",
                  file=sys.stderr)
        return None
    if not Path(args.path).is_dir() and Path(args.question).is_dir():
        print(f"delphi context: error: the folder comes first: delphi context {args.question} {args.path!r}",
              file=sys.stderr)
        return None
    if args.question == "-":
        text, args.stdin_chars = _stdin_question()
        return text
    return args.question


STDIN_MAX_BYTES = 64 << 20


def _stdin_question() -> tuple[str, int]:
    """stdin as a question, read in pieces that keep only what is searched (its head and its tail: see
    retrieval.query.question_read), and at most STDIN_MAX_BYTES: `delphi context . - < /dev/zero` grew to 12 GB in
    30 s and a never-ending `kubectl logs -f` pipe would not end (a newcomer, session 28). Returns the text and
    how many characters were read (the answer's note says how long the question was)."""
    import codecs

    from .retrieval.query import QUESTION_HEAD_CHARS, TRACE_SCAN_CHARS, strip_ansi
    from .retrieval.query import QUESTION_TAIL_CHARS as T

    # The head kept here holds where question_read looks for a trace past its own head (a CI log handed over whole).
    H = QUESTION_HEAD_CHARS + TRACE_SCAN_CHARS
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    head, beyond, total = "", "", 0  # the first H + T characters; the last T of the rest

    def add(text: str) -> None:
        nonlocal head, beyond, total
        text = strip_ansi(text)  # colour codes are not searched: they must not take the head's or tail's room (review)
        total += len(text)
        room = H + T - len(head)
        if room > 0:
            head, text = head + text[:room], text[room:]
        if text:
            beyond = (beyond + text)[-T:]

    stream, read = sys.stdin.buffer, 0
    while read < STDIN_MAX_BYTES:
        data = stream.read(min(1 << 16, STDIN_MAX_BYTES - read))
        if not data:
            break
        read += len(data)
        add(decoder.decode(data))
    else:
        if stream.read(1):
            print(f"delphi context: stdin is longer than {STDIN_MAX_BYTES >> 20} MB: its first "
                  f"{STDIN_MAX_BYTES >> 20} MB are read", file=sys.stderr)
    add(decoder.decode(b"", final=True))
    if total <= H + T:
        return head, total
    # What question_read reads of the whole text: its head (and a trace in it), and its tail.
    return head[:H] + "\n" + (head + beyond)[-T:], total


def cmd_context(args: argparse.Namespace) -> int:
    question = _question_of(args)
    if question is None:
        return USAGE
    args.question = question
    draft = None
    if args.draft:  # checked before the engine opens: a typo costs no indexing, and the message names the flag
        if not Path(args.draft).exists():
            print(f"delphi: error: --draft: no such file: {args.draft}", file=sys.stderr)
            return USAGE
        if not Path(args.draft).is_file():
            print(f"delphi: error: --draft: not a file: {args.draft}", file=sys.stderr)
            return USAGE
        draft = Path(args.draft).read_text(encoding="utf-8", errors="replace")
    if args.trace:  # a folder there cost the answer, after the work, with a traceback (a newcomer, session 29)
        args.trace, wrong = _output_file("--trace", args.trace)
        if not wrong:
            from .traces import NotATraceLog, check_trace_log

            try:
                check_trace_log(Path(args.trace))
            except NotATraceLog as e:
                print(f"delphi: error: --trace: {args.trace}: {e.strerror}. --trace names the file this answer's trace "
                      "is appended to; a stack trace to ask about is the question: `delphi context PATH - < FILE`",
                      file=sys.stderr)
                wrong = USAGE
        if wrong:
            return wrong
    with _engine(args) as eng:
        anchors = [workspace_path(a, eng.root) for a in args.anchor or []]
        for a in anchors:  # a mistyped anchor fails before any indexing work
            eng.normalise_anchor(a)
        _index_quietly(eng, args, reembed=False)
        ans = eng.context(args.question, anchors=anchors or None, draft=draft, limit=args.limit,
                          budget_tokens=args.budget_tokens, kinds=args.kind or None, trace_file=args.trace)
        if getattr(args, "stdin_chars", 0) > len(args.question):  # stdin was read as its head and tail
            from .retrieval.query import QUESTION_HEAD_CHARS, QUESTION_TAIL_CHARS

            cut = ans["query"].get("cut") or {"head": QUESTION_HEAD_CHARS, "tail": QUESTION_TAIL_CHARS}
            ans["query"]["cut"] = {**cut, "chars": args.stdin_chars}
        if args.json:
            _dump(ans)
            eng.save_for_next()  # the exact matrix or view a big workspace took seconds to read, for the next
            return 0
        q = ans["query"]
        print(f"query shape: {q['shape']}" + (f" (prefers {', '.join(q['prefer'])})" if q["prefer"] else "")
              + (f"; asked around {shown(q['namedAnchor'])}, named in the question" if q.get("namedAnchor") else ""))
        for r in ans["results"]:
            branches = " ".join(f"{b}:{k}" for b, k in r["branches"].items())
            print(f"{r['rank']:>3}. {shown(r['path'])}  [{r['kind']}] ({branches})")
            print(f"      {shown_text(r['why'])}")
            if r["spans"]:
                s = r["spans"][0]
                # The preview is the span's best line, not always its first: its number is said when they differ
                # (`L1802-1888: def _add_repr` sent a reader to line 1802, `_add_eq`; a newcomer, session 37).
                at = s.get("previewLine") or s["startLine"]
                where = f"L{s['startLine']}-{s['endLine']}" + (f" (L{at})" if at != s["startLine"] else "")
                print(f"      {where}: {shown(s['preview'][:100])}")
        if not ans["results"]:
            print("no files match")
        for note in query_notes(q, named=False):  # the named anchor is in the header line above
            print(f"note: {note}")
        for note in branch_notes(ans["branchesReady"], lambda s: state_of(s) in (State.READY, State.OFF)):
            print(f"note: {note}")
        if "packed" in ans:
            print(f"\npacked context: {len(ans['packed'])} spans, {ans['packedTokens']} of {args.budget_tokens} tokens")
            for p in ans["packed"]:
                why = f" — {shown_text(p['why'])}" if p.get("why") and not p["whole"] else ""
                print(f"\n--- {shown(p['path'])} L{p['startLine']}-{p['endLine']}{' (whole file)' if p['whole'] else ''}{why}")
                print(fenced(p["path"], p["text"]))  # no line of the file can pass for a span header
        print(f"({ans['timingsMs']['total']:.0f} ms)")
        sys.stdout.flush()
        eng.save_for_next()  # after the answer is out: the next command loads what this one read slowly
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        pages = eng.check_manifest_pages()  # damaged: moved aside and this command run again (main)
        h = eng.health()
        h["manifestCheck"] = pages
        if args.json:
            _dump(h)
        else:
            print(f"workspace: {h['root']}\nindex:     {h['indexDir']}")
            print(f"manifest:  {pages}")
            c = h["counts"]
            print(f"counts:    {c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors, {c['symbols']} symbols, {c['skipped']} skipped")
            m = h["model"]
            print(f"model:     serving {m['serving']['name'] if m['serving'] else '-'}; index built with "
                  f"{m['stored']['name'] if m['stored'] else '-'}; match={m['match']}; probe={m['probe'] and m['probe']['status']}")
            print(f"search:    {h['vectorSearch']}")  # which search answers the vector branch
            print(f"lexical:   {h['lexicalStore']}")  # which store answers BM25 (lexical_store)
            if h.get("snapshot"):
                sn = h["snapshot"]
                made = sn.get("created")
                when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(made)) if isinstance(made, (int, float)) else "-"
                print(f"snapshot:  loaded from {sn.get('file')} (made {when}, commit {sn.get('head') or '-'})")
            width = max((len(b) for b in h["branches"]), default=0)
            for b, s in h["branches"].items():
                print(f"branch {b:{width}} {s}")
            for p in h["problems"]:
                print(f"{p['severity']:7} {shown_text(p['message'])}")
            if h["skipped"]:
                print("skipped files:")
                for p, r in list(h["skipped"].items())[:50]:
                    print(f"  {shown(p)}: {shown_text(r)}")
                if len(h["skipped"]) > 50:
                    print(f"  ... and {len(h['skipped']) - 50} more (--json lists all)")
            replaced = h.get("decodedWithReplacement") or []
            if replaced:  # indexed, but not as written: the text had bytes that are not UTF-8
                print("indexed with replacement characters (not valid UTF-8):")
                for p in replaced[:50]:
                    print(f"  {shown(p)}")
                if len(replaced) > 50:
                    print(f"  ... and {len(replaced) - 50} more (--json lists all)")
            redacted = h.get("redactedSecrets") or {}
            if redacted:  # indexed, with the secrets in their text replaced: never stored, never answered
                print("secrets redacted before indexing (not stored, not shown in answers):")
                for p, what in list(redacted.items())[:50]:
                    print(f"  {shown(p)}: {shown_text(what)}")
                if len(redacted) > 50:
                    print(f"  ... and {len(redacted) - 50} more (--json lists all)")
        return 0 if h["ok"] else 1


def cmd_symbols(args: argparse.Namespace) -> int:
    if not args.query.strip():
        # Like `context ''`. (The editor's workspace/symbol with an empty query lists symbols: that is
        # the LSP's convention, not a command line's.)
        print("delphi: error: query: must not be empty", file=sys.stderr)
        return USAGE
    with _engine(args, ranks=False) as eng:
        _index_quietly(eng, args, reembed=False, vectors=False)
        found = eng.symbols(args.query, args.limit)
    return _emit(args, found, lambda s: f"{shown(s['name'])}  {s['kind']}  {shown(s['path'])}:{s['line']}",
                 f"no symbol matches {args.query!r}")


def _emit(args: argparse.Namespace, found: list[dict[str, Any]], line: Any, missing: str) -> int:
    """A list answer: JSON or one line per row; nothing found is said on stderr and exits 1 (like grep)."""
    if args.json:
        _dump(found)
    else:
        for row in found:
            print(line(row))
    if not found:
        print(f"delphi: {missing}", file=sys.stderr)
        return NOT_FOUND
    return 0


def _print_related(args: argparse.Namespace, which: str) -> int:
    from .api import RequestError

    # Related tests are ordered by the engine's ranking (Engine.related_tests): the learned ranker is loaded for
    # them, so the CLI gives the order the MCP tool and the editor give (review, session 44).
    with _engine(args, ranks=which == "tests") as eng:
        target = workspace_path(args.file, eng.root)
        rel = eng.normalise_anchor(target, field="path")  # a missing file is an error naming it, before indexing
        _index_quietly(eng, args, reembed=False, vectors=False)
        try:
            found = (eng.related_tests(target, limit=args.limit) if which == "tests"
                     else eng.related_code(target, limit=args.limit))
        except RequestError as e:  # related-code on a source file: say so with the path as the user typed it
            if e.field != "path" or not str(e).startswith(f"path: {rel} "):
                raise
            print(f"delphi: error: {args.file}{str(e)[len(f'path: {rel}'):]}", file=sys.stderr)
            return USAGE
    what = "tests" if which == "tests" else "source files"
    return _emit(args, found, lambda r: f"{shown(r['path'])}  ({shown_text(r['why'])})", f"no related {what} found for {rel}")


def cmd_related_tests(args: argparse.Namespace) -> int:
    return _print_related(args, "tests")


def cmd_related_code(args: argparse.Namespace) -> int:
    return _print_related(args, "code")


def cmd_eval(args: argparse.Namespace) -> int:
    from .api import RequestError
    from .evaluation.history import HistoryError
    from .evaluation.runner import evaluate_history, render

    baselines = tuple(b for b in args.baselines.split(",") if b)
    unknown = [b for b in baselines if b not in EVAL_BASELINES]
    if unknown:
        raise RequestError("baselines", f"unknown baseline(s) {', '.join(unknown)} (known: {', '.join(EVAL_BASELINES)})")
    if args.out:  # checked before the run: a folder there lost a whole run's results (a newcomer, session 29)
        args.out, wrong = _output_file("--out", args.out)
        if wrong:
            return wrong
    try:
        result = evaluate_history(args.history, args.changes, baselines, args.work,
                                  log=lambda m: print(m, file=sys.stderr), **_overrides(args))
    except (HistoryError, ValueError) as e:
        print(f"delphi: error: {e}", file=sys.stderr)
        return USAGE
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1) if args.json else render(result))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp.commands import run_mcp  # lazy: the MCP SDK is not on any other command's path

    return run_mcp(args.path, _overrides(args), connect=not args.no_daemon)


def cmd_serve(args: argparse.Namespace) -> int:
    from .mcp.commands import run_serve

    return run_serve(args.path, _overrides(args), host=args.host, port=args.port)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="delphi", description="Delphi: a local context engine for code",
                                 epilog="FILE arguments (--anchor, related-tests, related-code) may be relative "
                                        "to the current folder or to the workspace root.")
    ap.add_argument("--version", action="version", version=f"delphi {__version__} ({formats.describe()})")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def engine_options(p: argparse.ArgumentParser, output: bool = True) -> None:
        p.add_argument("--embedder", help="potion-base-8M (default), minilm-l6-int8, or a model2vec folder")
        p.add_argument("--no-vectors", action="store_true", help="lexical branches only")
        p.add_argument("--reranker", help="off, ltr (default), cross-encoder, ltr+cross-encoder, or a folder")
        # `mcp` and `serve` speak a protocol and ignore --json: still accepted (an agent's config that has it
        # keeps working) but no longer listed in their help as if it did something.
        p.add_argument("--json", action="store_true", help="machine-readable output" if output else argparse.SUPPRESS)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("path", help="the workspace folder")
        p.add_argument("--index-dir", help="where the index lives (default: the user cache dir)")
        p.add_argument("--chroma-url", help="a `chroma run` server to hold the vectors")
        engine_options(p)

    p = sub.add_parser("index", help="index a folder (incremental)")
    common(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--rebuild", action="store_true",
                   help="rebuild every store from the workspace and the embedding cache (nothing is re-embedded)")
    p.add_argument("--snapshot", metavar="FILE",
                   help="a new index starts from this snapshot (`delphi snapshot create`); ignored if one exists")
    p.set_defaults(fn=cmd_index)

    p = sub.add_parser("context", help="ask a question; ranked files with reasons")
    common(p)
    p.add_argument("question", nargs="?",
                   help="in plain English, a pasted stack trace or an identifier; `-` reads it from stdin")
    p.add_argument("--anchor", action="append", metavar="FILE",
                   help="a file you already have (repeatable); relative to the current folder or the workspace")
    p.add_argument("--draft", metavar="FILE", help="a file holding code you think the answer looks like")
    p.add_argument("--limit", type=int, default=10, help="how many files (default 10)")
    p.add_argument("--budget-tokens", type=int, metavar="N",
                   help="also print the best spans that fit in N tokens (with --json: 'packed')")
    p.add_argument("--kind", action="append", choices=KINDS,
                   help="only files of this kind (repeatable)")
    p.add_argument("--trace", metavar="FILE", help="append this query's trace (JSONL) to a file")
    p.set_defaults(fn=cmd_context)

    p = sub.add_parser("health", help="index health report (exit 1 on errors)")
    common(p)
    p.set_defaults(fn=cmd_health)

    p = sub.add_parser("symbols", help="fuzzy workspace symbol search (exit 1 when nothing matches)")
    common(p)
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(fn=cmd_symbols)

    p = sub.add_parser("related-tests", help="tests that go with a source file (exit 1 when none)")
    common(p)
    p.add_argument("file")
    p.add_argument("--limit", type=int, default=10, help="how many tests (default 10)")
    p.set_defaults(fn=cmd_related_tests)

    p = sub.add_parser("related-code", help="source files a test exercises (exit 1 when none)")
    common(p)
    p.add_argument("file", metavar="test")
    p.add_argument("--limit", type=int, default=10, help="how many source files (default 10)")
    p.set_defaults(fn=cmd_related_code)

    p = sub.add_parser("mcp", help="MCP server over stdio for coding agents (forwards to a running daemon)")
    p.add_argument("path", nargs="?", default=None,
                   help="the workspace folder (default: the project around the current folder: the nearest "
                        "folder above it with .git or delphi.toml, else the current folder)")
    p.add_argument("--index-dir", help="where the index lives (default: the user cache dir)")
    p.add_argument("--no-daemon", action="store_true", help="open the index here even when a daemon serves it")
    p.add_argument("--chroma-url", help="a `chroma run` server to hold the vectors")
    engine_options(p, output=False)
    p.set_defaults(fn=cmd_mcp)

    p = sub.add_parser("serve", help="one warm daemon for many agents: MCP over HTTP on loopback, token required")
    p.add_argument("path", help="the workspace folder")
    p.add_argument("--index-dir", help="where the index lives (default: the user cache dir)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="port (default: any free port; printed, and in daemon.json)")
    p.add_argument("--chroma-url", help="a `chroma run` server to hold the vectors")
    engine_options(p, output=False)
    p.set_defaults(fn=cmd_serve)

    p = sub.add_parser("eval", help="score Delphi and baselines on a git repository's own merged changes")
    p.add_argument("--history", required=True, metavar="PATH", help="a git repository (only read)")
    p.add_argument("-n", "--changes", type=_at_least_one, default=50,
                   help="how many recent merged changes to mine (default 50)")
    p.add_argument("--baselines", default="bm25,grep,heuristic",
                   help=f"comma-separated, from {', '.join(EVAL_BASELINES)} (default: bm25,grep,heuristic); "
                        "empty for none")
    p.add_argument("--work", help="scratch folder for trees and the index (default: a temporary one, removed)")
    p.add_argument("--out", help="write every question's record and the summary as JSON here")
    engine_options(p)
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("indexes", help="the index folders in your cache: workspace, size, last write; --prune "
                                       "removes those whose workspace is gone")
    p.add_argument("--prune", action="store_true",
                   help="remove the index folders whose workspace folder no longer exists (never one in use)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(fn=cmd_indexes)

    p = sub.add_parser("snapshot", help="write an index to a file a teammate or CI can load, or load one")
    snap = p.add_subparsers(dest="action", required=True, metavar="{create,load}")
    q = snap.add_parser("create", help="bring the index up to date and write it as a snapshot file")
    q.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    q.add_argument("--out", required=True, metavar="FILE", help="the snapshot file to write")
    q.add_argument("--quiet", action="store_true", help="no progress on stderr")
    q.add_argument("--index-dir", help="where the index lives (default: the user cache dir)")
    q.add_argument("--chroma-url", help="a `chroma run` server to hold the vectors")
    engine_options(q)
    q.set_defaults(fn=cmd_snapshot)
    q = snap.add_parser("load", help="replace the workspace's index with a snapshot; `delphi index` then redoes "
                                     "only the files whose content differs")
    q.add_argument("file", help="the snapshot file")
    q.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    q.add_argument("--index-dir", help="where the index lives (default: the user cache dir)")
    q.add_argument("--chroma-url", help="a `chroma run` server to hold the vectors")
    engine_options(q)
    q.set_defaults(fn=cmd_snapshot)
    return ap


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def cmd_indexes(args: argparse.Namespace) -> int:
    """List the index folders in the user cache (the default place); ``--prune`` removes those whose workspace
    folder is gone, never one in use."""
    from .indexes import list_indexes, prune
    from .settings import default_index_base

    base = default_index_base()
    if args.prune:
        removed, kept = prune(base)
        if args.json:
            _dump({"base": str(base), "removed": [f.as_dict() for f in removed],
                   "kept": [{**f.as_dict(), "why": why} for f, why in kept]})
            return 0
        for f in removed:
            print(f"removed {f.path} ({_mb(f.size)}; its workspace {shown(f.workspace or '-')} is gone)")
        for f, why in kept:
            print(f"kept {f.path}: {why}", file=sys.stderr)
        print(f"{len(removed)} index folder{'s' if len(removed) != 1 else ''} removed, "
              f"{_mb(sum(f.size for f in removed))} freed" if removed else "no index folder of a workspace that is gone")
        return 0
    found = list_indexes(base)
    if args.json:
        _dump({"base": str(base), "indexes": [f.as_dict() for f in found]})
        return 0
    if not found:
        print(f"no index folders in {base}")
        return 0
    for f in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(f.used)) if f.used else "-"
        state = "  (no readable manifest)" if not f.workspace else "" if f.present else "  (workspace gone)"
        print(f"{_mb(f.size):>10}  {when}  {shown(f.workspace or '-')}{state}\n            {f.path}")
    gone = [f for f in found if f.workspace and not f.present]
    print(f"{len(found)} index folders, {_mb(sum(f.size for f in found))} in {base}"
          + (f"; {len(gone)} of workspaces that are gone ({_mb(sum(f.size for f in gone))}): "
             "`delphi indexes --prune` removes them" if gone else ""))
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    """`create`: bring the index up to date and write it to a file; `load`: replace the index with one
    (checked first: another model or version, a corrupt or hostile file is refused, the index kept)."""
    from .engine import Engine

    if args.action == "create":
        with _engine(args, ranks=False) as eng:
            head = eng.snapshot(args.out, progress=None if args.quiet or args.json else ProgressBar())
        info = {k: head[k] for k in ("counts", "built", "embedder", "workspace", "content", "bytes", "untracked")}
        c = info["counts"]
        _dump({"file": args.out, **info}) if args.json else \
            print(f"wrote {args.out}: {c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors, "
                  f"{head['bytes'] / 2**20:.1f} MiB")
        if head["untracked"] and not args.json:
            loose = head["untracked"]
            print(f"note: {len(loose)} of them git does not track, and their text is in the snapshot: "
                  f"{', '.join(shown(p) for p in loose[:5])}{', ...' if len(loose) > 5 else ''} (commit, ignore or "
                  "remove them first if they are not meant to be shared)", file=sys.stderr)
        return 0
    got = Engine.load_snapshot(args.file, args.path, **_overrides(args))
    c = got["header"]["counts"]
    if args.json:
        _dump({"file": args.file, "counts": c, "vectors": got["vectors"], "note": got.get("note")})
    else:
        print(f"loaded {args.file}: {c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors "
              f"({got['vectors']}); the next `delphi index` or question re-indexes only the files whose "
              "content differs")
    if got.get("note"):
        print(f"warning: {got['note']}", file=sys.stderr)
    return 0


def _at_least_one(text: str) -> int:
    """-n: a count of changes; 0 would silently mean 1 (the miner's floor), so refuse it."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _parse(ap: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, with an unknown option reported by the subcommand it was given to (its usage, not the
    top-level one) and the closest option it has suggested (`--ancor` -> `--anchor`)."""
    args, extras = ap.parse_known_args(argv)
    if getattr(args, "question", "") is None and extras:
        # argparse gives the optional `question` nothing when an option sits between it and the folder, so
        # `delphi context . --limit 5 "why"` said "unrecognized arguments: why" (found in session 27): the one
        # argument left over (or the one after `--`, or `-` for stdin) is the question.
        rest = extras[1:] if extras[0] == "--" else extras
        if len(rest) == 1 and (extras[0] == "--" or not rest[0].startswith("-") or rest[0] == "-"):
            args.question, extras = rest[0], []
    if extras:
        subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
        p = subs.choices[args.cmd]
        options = [o for a in p._actions for o in a.option_strings]
        msg = f"unrecognized arguments: {' '.join(extras)}"
        for x in extras:
            close = difflib.get_close_matches(x.split("=", 1)[0], options, n=1) if x.startswith("-") else []
            if close:
                msg += f" (did you mean {close[0]}?)"
                break
        p.error(msg)  # prints the subcommand's usage, exits 2
    return args


def _not_a_folder(path: str | None, example: str = '`delphi context . "question"`') -> str | None:
    """The workspace argument names a file (`delphi context chi/mux.go q`): say what the argument is. Or a folder
    that cannot be listed (its permissions): said at once, as a traceback from the first file looked at was."""
    if path and Path(path).is_file():
        return f"{path} is a file, not a folder: the first argument is the workspace folder (e.g. {example})"
    if path and os.path.isdir(path):
        from .workspace.roots import unreadable_reason

        why = unreadable_reason(Path(path))
        if why:
            return f"the workspace folder {path} cannot be read ({why})"
    return None


def _say_enclosing_project(path: str | None) -> None:
    """`delphi related-tests . retry.py` from `proj/shipyard/` said "no related tests" and built a second index of
    that folder alone, while the tests sit in `proj/tests/` (a newcomer, session 27). The folder given is still
    the workspace (it was asked for); the note says the project around it and how to ask it instead."""
    if not path or not Path(path).is_dir():
        return
    from .workspace.roots import enclosing_project, refusal

    if refusal(Path(path).resolve()) is not None:
        return  # refused (a `.git` folder inside its project): the error says why, a note would contradict it
    project = enclosing_project(Path(path))
    if project is not None:
        print(f"delphi: note: {Path(path).resolve()} is inside the project {project} (it holds .git or "
              f"delphi.toml); only this folder is searched: give {project} to search the whole project",
              file=sys.stderr)


def _user_error(e: BaseException) -> bool:
    """A mistake in the input (a bad setting, request or path), as opposed to a bug.

    The error classes live in modules this file does not import at load; if a module was never
    imported, its error cannot have been raised."""
    if isinstance(e, FileNotFoundError | NotADirectoryError | PermissionError):
        return True  # a file the user named (`--draft`, an anchor) that is not there or cannot be read
    for module, name in (("delphi_ls.api", "RequestError"), ("delphi_ls.settings", "SettingsError"),
                         ("delphi_ls.indexing.snapshot", "SnapshotError"),
                         ("delphi_ls.workspace.roots", "WorkspaceRefused"),
                         ("delphi_ls.engine", "IndexFolderUnusable")):
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(e, cls):
            return True
    return False


# A request's wire names as the command line spells them: `--budget-tokens: must be ...`, not `budgetTokens:`.
_FLAGS = {"budgetTokens": "--budget-tokens", "limit": "--limit", "kinds": "--kind", "anchors": "--anchor",
          "draft": "--draft"}


def _as_flags(e: BaseException) -> str:
    """A request error as the command line's user reads it: named by the flag they typed."""
    field = getattr(e, "field", None)
    text = str(e)
    if field in _FLAGS and text.startswith(f"{field}:"):
        return _FLAGS[field] + text[len(field):]
    return text


def _settings_warnings_on_stderr() -> None:
    """A repository's refused or unknown setting reaches the user as `delphi: warning: ...`, not as a
    bare line from logging's last-resort handler."""
    lg = logging.getLogger("delphi_ls.settings")
    if not lg.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("delphi: warning: %(message)s"))
        lg.addHandler(handler)
        lg.propagate = False


class _McpUsage(Exception):
    """A `delphi mcp` command line argparse would exit on: the agent's client saw only "connection closed"."""


def _mcp_args(argv: list[str]) -> argparse.Namespace | int:
    """`delphi mcp ...` whose command line is wrong still serves MCP, every call saying what is wrong: an exit
    before `initialize` shows in an agent's client as "Connection closed" and nothing more (an agent
    newcomer, session 26: `delphi mcp FILE`, `delphi mcp --foo DIR`, `delphi mcp DIR extra`)."""
    from .mcp.commands import run_mcp

    ap = build_parser()
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))

    def refuse(message: str) -> NoReturn:
        raise _McpUsage(message)

    subs.choices["mcp"].error = refuse  # type: ignore[method-assign]
    try:
        args = _parse(ap, argv)
    except _McpUsage as e:
        print(f"delphi mcp: error: {e}", file=sys.stderr, flush=True)
        return run_mcp(None, {}, connect=False, refusal=f"delphi mcp's command line is wrong: {e} (usage: "
                                                        "delphi mcp [FOLDER] [--index-dir DIR] [--no-daemon] ...)")
    wrong = _not_a_folder(getattr(args, "path", None), "`delphi mcp FOLDER`, or no folder: the project around the "
                                                          "current one")
    if wrong:
        print(f"delphi mcp: error: {wrong}", file=sys.stderr, flush=True)
        return run_mcp(None, {}, connect=False, refusal=wrong)
    return args


def _stdin_open() -> bool:
    """``delphi mcp <&-`` was a traceback from the first read (a newcomer, session 30)."""
    try:
        os.fstat(0)
        return True
    except OSError:
        return False


def _usable_streams() -> None:
    """Output that can always be written: a closed stdout or stderr (``2>&-``) was None, and the progress bar's
    first call ended the run with exit 1 and no word; a file name beyond ASCII under ``PYTHONIOENCODING=ascii``
    was a traceback (a newcomer, session 30). Such text is written escaped (``\\xf1``)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (for the process's life)
        elif hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


# Errors of the machine, not of Delphi or its input: the index keeps its last completed run.
_MACHINE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EROFS, errno.EIO,
                   errno.EAGAIN}
_MACHINE_WORDS = ("too many open files", "no space left", "disk is full", "disk i/o error", "out of memory",
                  "cannot allocate memory", "read-only file system")


def _machine_error(e: BaseException) -> str | None:
    """One line for an error the machine raised (no disk space, no file descriptors, no memory, a folder that
    cannot be written), else None. They were tracebacks from `delphi index` (a newcomer, session 30)."""
    if isinstance(e, MemoryError):
        return "out of memory"
    if isinstance(e, OSError) and e.errno in _MACHINE_ERRNOS:
        return f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")
    text = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    if isinstance(e, OSError | ValueError | RuntimeError) or type(e).__module__ == "sqlite3":
        if any(w in text.lower() for w in _MACHINE_WORDS):
            return text
    return None


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the `delphi` program itself, not a call from Python (tests call main(argv))
    argv = sys.argv[1:] if argv is None else argv
    _OPENED.clear()  # this command's own (tests and API users call main several times in one process)
    _usable_streams()
    if argv[:1] == ["mcp"] and not _stdin_open():
        # Checked before any file is opened: one opened later would take fd 0 and be read as the protocol.
        print("delphi mcp: error: stdin is closed; an MCP client talks to `delphi mcp` over its stdin and stdout",
              file=sys.stderr)
        return USAGE
    if argv[:1] == ["mcp"]:
        got = _mcp_args(argv)
        if isinstance(got, int):
            return got
        args = got
    else:
        args = _parse(build_parser(), argv)
    _settings_warnings_on_stderr()
    wrong = _not_a_folder(getattr(args, "path", None))
    if wrong:  # before the engine opens (and before its imports)
        print(f"delphi: error: {wrong}", file=sys.stderr)
        return USAGE
    _say_enclosing_project(getattr(args, "path", None))
    if argv[:1] != ["mcp"] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        # SIGTERM (`timeout`, a CI step cancelled, a task runner) ended `delphi index` mid-write with no word and
        # the workers' leaked-semaphore warning: it now takes Ctrl-C's path (`delphi mcp` has its own handlers).
        signal.signal(signal.SIGTERM, _terminated)
    try:
        try:
            code = int(args.fn(args) or 0)
        except Exception as e:
            done = _recovered(e)
            if done is None:
                raise
            # Said, moved aside, and the command run again on a new manifest (which indexes the folder again when
            # the command indexes; health says it was recovered).
            print(f"delphi: warning: the index's manifest was damaged ({type(e).__name__}: {e}); {done}; running "
                  "the command again", file=sys.stderr)
            code = int(args.fn(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe shows up here, not as a traceback at exit
        if program and argv[:1] != ["mcp"]:
            # The work is done and said. Python puts the default handlers back when it exits, and a SIGTERM or
            # Ctrl-C in those last moments (workers joined, atexit) killed the process with no word and no exit
            # code of ours (fresh-clone CI, session 32: -15 for a SIGTERM just after `delphi index` printed).
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
        return code
    except BrokenPipeError:
        # `delphi health | head -1`: the reader has what it wanted. Send the rest nowhere, quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # what a shell reports for a process ended by SIGPIPE
    except KeyboardInterrupt as e:
        what, code = ("terminated", 143) if isinstance(e, Terminated) else ("interrupted", 130)
        print(f"\ndelphi: {what}; the index stays consistent and the next run resumes", file=sys.stderr)
        return code
    except Exception as e:
        machine = None if _user_error(e) else _machine_error(e)
        if machine is not None:
            print(f"delphi: error: {machine} ({type(e).__name__}); the index keeps its last completed run: "
                  "run again once the machine allows it", file=sys.stderr)
            return MACHINE
        if not _user_error(e):
            raise
        print(f"delphi: error: {_as_flags(e)}", file=sys.stderr)
        return USAGE


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so that it takes the same clean-up."""


def _terminated(_signum: int, _frame: object) -> None:
    raise Terminated()


if __name__ == "__main__":
    sys.exit(main())
