"""The MCP tools: their names, descriptions and input schemas, and what each returns.

Schemas are derived from the request types of :mod:`delphi_ls.api` (the parameter list is
written once); every tool runs a :class:`~delphi_ls.session.Session` call and renders the
answer as text the model reads first, with the structured answer beside it. No SDK import:
the server module turns a :class:`ToolOutput` into the SDK's result type.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api import (
    KINDS,
    MAX_LIMIT,
    ContextRequest,
    RelatedRequest,
    RequestError,
    SymbolsRequest,
    plain_relative,
)
from ..core import State, state_of
from ..settings import snake_case
from ..shown import branch_notes, fenced, query_notes, shown, shown_question
from ..workspace.roots import enclosing_project, refusal

if TYPE_CHECKING:
    from ..session import Session

DEFAULT_BUDGET_TOKENS = 6_000
# Agents truncate tool output at about 25k tokens; no answer, text and structure together, goes past this.
MAX_TOOL_TOKENS = 24_000
MAX_TEXT_TOKENS = 20_000  # the text part; the structured copy gets the rest
MAX_BUDGET_TOKENS = 14_000  # packed spans (chars/4, the packer's estimate), inside the text part with the list
# The output cap counts 3 characters a token: code tokenizes at about 3-3.5 characters a token, and at 4 a
# full answer (80k characters of text, 12k of structured copy) came to about 26-30k real tokens, over Claude
# Code's default limit of 25,000 for a tool's output (an agent newcomer, session 26).
CHARS_PER_TOKEN = 3
DEFAULT_LIMIT = 10

FIELD_DOCS = {
    "query": "The question in plain English, a pasted stack trace or error message, or an identifier.",
    "anchors": "Files you already have open or are editing (workspace-relative paths, absolute paths inside the "
               "workspace, or file:// URIs); answers are ranked around them.",
    "draft": "Code you think the answer looks like (e.g. a draft of the change); used as a similarity hint.",
    "limit": "How many files to return (default 10).",
    "budget_tokens": f"Token budget for the packed code spans (default {DEFAULT_BUDGET_TOKENS}, "
                     f"at most {MAX_BUDGET_TOKENS}).",
    "kinds": "Only files of these kinds: code, test, doc, config, other.",
    "workspace": "Which open workspace folder to ask, when the server serves several (its path, file:// URI, or "
                 "its folder name when unique).",
    "path": "A file in the workspace (workspace-relative, absolute, or a file:// URI).",
    "symbol": "A function, class or method defined in that file: only tests that exercise it.",
}


@dataclass(frozen=True)
class ToolOutput:
    text: str
    structured: dict[str, Any]
    is_error: bool = False


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool = True


def _json_type(annotation: str) -> dict[str, Any]:
    base = annotation.replace(" | None", "").strip()
    if base.startswith("list["):
        return {"type": "array", "items": {"type": "string"}}
    return {"type": {"int": "integer", "str": "string", "bool": "boolean"}[base]}


def schema_of(cls: type, drop: tuple[str, ...] = (), defaults: dict[str, Any] | None = None,
              docs: dict[str, str] | None = None) -> dict[str, Any]:
    """A JSON schema for one of the api request types, from its dataclass fields (``docs``: this tool's own
    words for a field, where FIELD_DOCS' are the context tool's)."""
    props: dict[str, Any] = {}
    required: list[str] = []
    hints = {f.name: str(f.type) for f in fields(cls)}
    for f in fields(cls):
        if f.name in drop:
            continue
        prop = _json_type(hints[f.name])
        prop["description"] = (docs or {}).get(f.name, FIELD_DOCS.get(f.name, ""))
        default = (defaults or {}).get(f.name, f.default)
        if default is not MISSING and default is not None:
            prop["default"] = default
        if f.name == "kinds":
            prop["items"] = {"type": "string", "enum": list(KINDS)}
        if f.name == "limit":
            prop["minimum"], prop["maximum"] = 1, MAX_LIMIT
        if f.name == "budget_tokens":
            prop["minimum"] = 1  # no maximum: a larger budget is lowered to MAX_BUDGET_TOKENS, with a note
        props[f.name] = prop
        if f.default is MISSING and f.default_factory is MISSING:  # type: ignore[misc]
            required.append(f.name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


GREP_HINT = ("Use plain grep/ripgrep instead when you know the exact string or identifier to find "
             "(an error message verbatim, a function name): that is exact and faster.")

TOOLS: list[ToolSpec] = [
    ToolSpec(
        "context", "Find the code that answers a question",
        "Ranked files and the lines inside them that answer a question about this codebase: a description of "
        "behaviour or of a change to make ('where is the retry on timeout decided?'), a pasted stack trace, or a "
        "file name ('which tests cover grpc_proxy.go?'). Each file comes with why it was found; the text starts "
        "with the ranked list, then the packed code spans within budget_tokens. Call this first when you do not "
        "yet know which files matter. " + GREP_HINT,
        schema_of(ContextRequest, defaults={"limit": DEFAULT_LIMIT, "budget_tokens": DEFAULT_BUDGET_TOKENS},
                  docs={"limit": f"How many files to return (default {DEFAULT_LIMIT})."})),
    ToolSpec(
        "related_tests", "Tests of a source file",
        "The test files that exercise a source file (or one function or class in it), best first, each with why "
        "(named after it, imports it, mirrors its folder, uses its names, changes with it in git history). Use "
        "before or after editing a file to know which tests to read and run.",
        schema_of(RelatedRequest, docs={"limit": "How many test files to return (default 10)."})),
    ToolSpec(
        "related_code", "Source a test exercises",
        "The source files a test file exercises, best first, each with why. Use when a test fails and you need "
        "the code under test.",
        schema_of(RelatedRequest, drop=("symbol",), docs={"limit": "How many source files to return (default 10)."})),
    ToolSpec(
        "symbols", "Find definitions by name",
        "Fuzzy search over the definitions (functions, classes, methods, types) in the workspace: exact, prefix, "
        "substring and subsequence matches of the name, with file and line: where something is defined, not "
        "every place its name appears (grep finds those).",
        schema_of(SymbolsRequest, docs={
            "query": "A definition's name or part of it: 'HttpClient', 'parse_conf', 'retryBackoff' (exact, prefix, "
                     "substring and subsequence matches).",
            "limit": "How many definitions to return (default 50)."})),
    ToolSpec(
        "index_status", "Is the index ready?",
        "Whether Delphi's index of the workspace is ready, still indexing (with progress), stale, or degraded, "
        "and why. 'indexing (lexical: 40/200)' is a normal answer: context still answers from what is indexed so "
        "far.",
        {"type": "object", "properties": {}, "additionalProperties": False}),
    ToolSpec(
        "reindex", "Re-index the workspace",
        "Schedule a re-index of the workspace (only files that changed are redone). Rarely needed: Delphi watches "
        "the workspace's files and picks up edits within seconds (where the system lets it watch: index_status "
        "says otherwise); use after a large change such as a branch switch if an answer looks out of date.",
        {"type": "object", "properties": {"workspace": {"type": "string", "description": FIELD_DOCS["workspace"]}},
         "additionalProperties": False}, read_only=False),
]
TOOL_NAMES = [t.name for t in TOOLS]
SPECS = {t.name: t for t in TOOLS}


def _cap(text: str, limit_tokens: int = MAX_TEXT_TOKENS) -> str:
    limit = limit_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    note = f"\n[truncated at {limit_tokens} tokens]"
    return text[: limit - len(note)] + note


def _fit_structured(data: dict[str, Any], text_chars: int) -> dict[str, Any]:
    """Structured output travels beside the text; together they stay under the cap."""
    room = MAX_TOOL_TOKENS * CHARS_PER_TOKEN - text_chars
    while data.get("results") and len(json.dumps(data)) > room:
        data["results"] = data["results"][: len(data["results"]) // 2]
        data["truncated"] = True
    return data


def run_tool(session: Session, name: str, args: Any) -> ToolOutput:
    """Run one tool; a bad argument is an error result naming the field, never an exception."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ToolOutput("arguments: must be an object", {"error": {"field": "arguments"}}, True)
    try:
        spec = SPECS.get(name)
        if spec is not None:
            # The schema's names only (`additionalProperties: false`): the api also takes its camelCase wire
            # names, which an agent reading this schema never sees (`budgetTokens` passed; session 25).
            _no_args(args, tuple(spec.schema["properties"]))
        if name == "context":
            return _context(session, args)
        if name in ("related_tests", "related_code"):
            req = RelatedRequest.from_wire(args)
            rows = session.related_tests(req) if name == "related_tests" else session.related_code(req)
            what = "tests" if name == "related_tests" else "source files"
            lines = [f"{len(rows)} {what} for {shown(req.path)}" + (f" ({shown(req.symbol)})" if req.symbol else "")]
            lines += [f"{i}. {shown(r['path'])} — {shown(r['why'])}" for i, r in enumerate(rows, 1)]
            # As the CLI's --json and delphi/relatedTests give them: an inline test module's line was dropped here, and
            # the score (a newcomer, session 45).
            data: dict[str, Any] = {"results": [{k: r[k] for k in ("path", "why", "score", "line") if k in r}
                                                for r in rows]}
            if name == "related_tests" and req.symbol and not rows:
                # "0 tests" read as "the file has none" where only the name had none (a newcomer, session 47).
                if session.related_tests(replace(req, symbol=None, limit=1)):
                    note = (f"no test names {shown(req.symbol)}; the file's own related tests are listed when "
                            "`symbol` is left out")
                    lines.append(f"note: {note}")
                    data["note"] = note
            _say_indexing(session, session.engine_for(req.workspace, (req.path,)), lines, data)
            text = _cap("\n".join(lines))
            return ToolOutput(text, _fit_structured(data, len(text)))
        if name == "symbols":
            req_s = SymbolsRequest.from_wire(args)
            if not req_s.query.strip():  # as the CLI: an agent asks for a name (the editor's empty query lists all)
                raise RequestError("query", "must not be empty (a name, or the start of one)")
            rows = session.symbols(req_s)
            lines = [f"{len(rows)} definitions matching {shown_question(req_s.query)}"]
            lines += [f"{shown(r['name'])}  {r['kind']}  {shown(r['path'])}:{r['line']}"
                      + (f"  (in {shown(r['container'])})" if r.get("container") else "") for r in rows]
            data = {"results": [{k: r[k] for k in ("name", "kind", "path", "line", "endLine", "container")}
                                for r in rows]}
            for eng in session.engines_for(req_s.workspace):
                _say_indexing(session, eng, lines, data)
            text = _cap("\n".join(lines))
            return ToolOutput(text, _fit_structured(data, len(text)))
        if name == "index_status":
            st = session.status()
            lines = []
            for w in st["workspaces"]:
                c = w["counts"]
                lines.append(f"{w['root']}: {w['state']}; {c['files']} files, {c['chunks']} chunks, "
                             f"{c['vectors']} vectors")
                lines += [f"  {p['severity']}: {shown(p['message'])}" for p in w["problems"]]
                if w.get("changes"):
                    lines.append(f"  changes: {shown(str(w['changes']))}")
                project = enclosing_project(Path(w["root"]))
                if project is not None and refusal(project) is None:  # not a home folder holding .git (dotfiles)
                    # Said on stderr at start, which an agent never reads: it got "0 tests" for a file whose tests
                    # sit beside the folder it was started in (an agents' newcomer, session 43).
                    lines.append(f"  note: this folder is inside the project {shown(str(project))}; only this folder "
                                 "is searched (start the server on the project's folder to search all of it)")
            lines += [f"settings: {shown(e)}" for e in st["settingsErrors"]]
            return ToolOutput(_cap("\n".join(lines) or "no workspace open"), st)
        if name == "reindex":
            ws = args.get("workspace")
            if ws is not None and not isinstance(ws, str):
                raise RequestError("workspace", "must be a folder path or URI")
            roots = session.reindex(ws)
            return ToolOutput(f"re-index scheduled for {', '.join(roots)}", {"scheduled": roots})
        return ToolOutput(f"unknown tool {name!r} (known: {', '.join(TOOL_NAMES)})", {"error": {"field": "name"}}, True)
    except RequestError as e:
        # Named as this tool's schema names it (`budget_tokens`, not the api's `budgetTokens`); an unknown field
        # as the caller spelled it.
        field, why = (e.field if e.field in args else snake_case(e.field)), str(e).removeprefix(e.field + ": ")
        return ToolOutput(f"argument '{field}': {why}", {"error": {"field": field, "message": f"{field}: {why}"}},
                          True)


def agent_paths(args: dict[str, Any], roots: list[Path]) -> dict[str, Any]:
    """``path`` and ``anchors`` as the agent meant them: relative to the workspace root as documented, else to the
    folder the agent started `delphi mcp` in (this process's) when that is inside one of ``roots`` and the file is
    there. An agent in vite's `packages/vite` passing `src/node/utils.ts` was told it does not exist, where the CLI
    reads the current folder first (a monorepo newcomer, session 39). Called where the agent's process runs:
    `delphi mcp` answering itself or forwarding (never in a daemon, whose folder is not the agent's; review)."""
    try:
        cwd = Path.cwd()
    except OSError:
        return args

    def meant(p: Any) -> Any:
        if not plain_relative(p):
            return p
        try:  # (a 300-character name raised ENAMETOOLONG here; the engine then says what is wrong with it)
            if any((root / p).exists() for root in roots):
                return p
            here = Path(os.path.normpath(cwd / p))
            inside = here.is_file() and any(here.is_relative_to(root) for root in roots)
        except OSError:
            return p
        return str(here) if inside else p

    out = dict(args)
    if "path" in out:
        out["path"] = meant(out["path"])
    if isinstance(out.get("anchors"), list):
        out["anchors"] = [meant(a) for a in out["anchors"]]
    return out


def indexing_line(running: dict[str, Any]) -> str:
    """What an answer given while the index is not (known to be) up to date may miss, in words."""
    if running["phase"] == "catch-up":
        # Said on most sessions' first call in a large folder, where usually nothing changed: "may miss them" read as
        # a fault to act on (an agents' newcomer, session 38); what is known is that the look is not done.
        return ("note: files changed since Delphi last ran are still being looked for (in a large folder this takes "
                "a while; usually none changed); this answer comes from the index as that run left it")
    if running["phase"] == "changes":
        n = f"{running['total']} " if running.get("total") else ""
        return (f"note: {n}files changed on disk (a checkout, a folder made or removed) and are about to be indexed; "
                "this answer comes from the index before them: lines may have moved (ask again shortly)")
    if running["phase"] == "elsewhere":
        pid = f" (pid {running['pid']})" if running.get("pid") else ""
        return (f"note: another Delphi process{pid} is indexing this folder; this answer comes from what it has "
                f"committed so far ({running['done']} files), not final (ask again shortly)")
    if running["phase"] == "queued":
        return "note: the first index has not started yet; this answer is empty for now, not final (ask again shortly)"
    left = running.get("secondsLeft")
    if left is None:
        return (f"note: indexing in progress ({running['phase']} {running['done']}/{running['total']}); "
                "this answer comes from what is indexed so far")
    if running["phase"] == "lexical":
        return (f"note: indexing in progress (lexical {running['done']}/{running['total']}, about {left} s to go); "
                f"this answer comes from the files indexed so far: ask again in about {left} s for one from every "
                "file")
    return (f"note: indexing in progress ({running['phase']} {running['done']}/{running['total']}, about {left} s to "
            "go); every file is searched by its words, matches by meaning are still being added")


def _say_indexing(session: Session, eng: Any, lines: list[str], data: dict[str, Any]) -> None:
    running = session.indexing_of(eng)
    if running is not None:
        several = len(session.engines) > 1  # which folder is still indexing, when the server serves several
        lines.append(indexing_line(running) + (f" ({shown(str(eng.root))})" if several else ""))
        data["indexing"] = {**running, "workspace": str(eng.root)} if several else running


def _no_args(args: dict[str, Any], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(args) - set(allowed))
    if extra:
        raise RequestError(extra[0], f"unknown field (known: {', '.join(allowed) or 'none'})")


def _context(session: Session, args: dict[str, Any]) -> ToolOutput:
    budget = args.get("budget_tokens")
    if budget is None:
        budget = DEFAULT_BUDGET_TOKENS
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise RequestError("budget_tokens", f"must be an integer from 1 (at most {MAX_BUDGET_TOKENS} are used)")
    notes = []
    if budget > MAX_BUDGET_TOKENS:
        notes.append(f"budget_tokens {budget} lowered to the cap of {MAX_BUDGET_TOKENS}")
        budget = MAX_BUDGET_TOKENS
    args = {k: v for k, v in args.items() if k != "budget_tokens"}
    req = ContextRequest.from_wire(args, limit=DEFAULT_LIMIT, budget_tokens=budget)
    ans, root = session.context_in(req)
    # Serving several folders, the answer says which it searched: its paths are relative to that folder, and an
    # agent that left `workspace` out could not tell (session 27's note).
    folder = str(root) if len(session.engines) > 1 else None
    return render_context(ans, req, notes, folder)


def _usable(status: str) -> bool:
    return state_of(status) in (State.READY, State.OFF)


def render_context(ans: dict[str, Any], req: ContextRequest, notes: list[str] | None = None,
                   folder: str | None = None) -> ToolOutput:
    """The ranked list first (path:lines — why), then the packed spans, within the cap."""
    lines = [f"Delphi: {len(ans['results'])} files for {shown_question(req.query)}"
             + (f" in {shown(folder)} (one of the open folders: pass workspace to pick another)" if folder else "")]
    for r in ans["results"]:
        span = r["spans"][0] if r["spans"] else None
        where = f":{span['startLine']}-{span['endLine']}" if span else ""
        lines.append(f"{r['rank']}. {shown(r['path'])}{where} [{r['kind']}] — {shown(r['why'])}")
    running = ans.get("indexing")
    if running:
        lines.append(indexing_line(running))
    if not (running and running["phase"] == "queued"):  # then every branch is "not ready": one line said it
        lines += [f"note: {n}" for n in branch_notes(ans["branchesReady"], _usable)]
    lines += [f"note: {n}" for n in query_notes(ans["query"])]
    lines += [f"note: {n}" for n in notes or []]
    packed = ans.get("packed") or []
    if packed:
        lines.append("")
        lines.append(f"Code ({ans.get('packedTokens', 0)} tokens):")
        # Whole spans, best first, while they fit under the cap: a span cut midway left its fence open, with the
        # truncation note read as code (review, session 24). The rest are counted, as the VS Code tool does.
        room = MAX_TEXT_TOKENS * CHARS_PER_TOKEN - 100
        size = sum(len(ln) + 1 for ln in lines)
        left = 0
        for p in packed:
            why = f" ({shown(p['why'])})" if p.get("why") else ""
            # Fenced: a file's own line `--- SECRET.py lines 1-9 ---` read as a span header Delphi never gave.
            block = [f"--- {shown(p['path'])} lines {p['startLine']}-{p['endLine']}{why} ---",
                     fenced(p["path"], p["text"])]
            need = sum(len(ln) + 1 for ln in block)
            if left or size + need > room:
                left += 1
                continue
            lines += block
            size += need
        if left:
            lines.append(f"({left} more span{'s' if left > 1 else ''} left out to stay within the output cap)")
    text = _cap("\n".join(lines))
    data = {"results": [{"path": r["path"], "rank": r["rank"], "kind": r["kind"], "why": r["why"],
                         "spans": r["spans"], "branches": r["branches"]} for r in ans["results"]],
            "packedTokens": ans.get("packedTokens", 0), "query": ans["query"],
            "indexing": running, "branchesReady": ans["branchesReady"]}
    if folder:
        data["workspace"] = folder
    return ToolOutput(text, _fit_structured(data, len(text)))
