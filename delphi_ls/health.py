"""The health report: model identity and probe, branch readiness, counts, skips, staleness.

It reads an engine through :class:`EngineState` (what it looks at, no more) and imports no engine,
so the engine sits above it (tests/test_layers.py).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .core import Need, State, state_of
from .indexing import workers
from .indexing.languages import grammar_status
from .indexing.pipeline import PARSER_VERSION, WorkspaceUnreadable, embed_text, unwalkable
from .models.embedders import Embedder, ModelIdentity
from .retrieval.branches.registry import registered
from .settings import Settings
from .stores.filedocs import FTS_OWED_STATUS, FileDocs
from .stores.meta import MetaStore
from .stores.vectors import VectorStore
from .stores.writer_lock import Holder
from .workspace.scan import scan
from .workspace.vendored import Vendored

CHROMA_PROBLEMS = ("vector_store", "vector_store_damaged")  # keys of Engine.problems that are Chroma's


class EngineState(Protocol):
    """What the health report reads of an engine (``delphi_ls.engine.Engine`` is one)."""

    root: Path
    index_dir: Path
    settings: Settings
    meta: MetaStore
    vectors: VectorStore | None
    embedder: Embedder | None
    problems: dict[str, str]
    warnings: dict[str, str]
    branch_errors: dict[str, str]
    reranker_status: str
    cochange_status: str
    indexing: dict[str, Any] | None
    lexical: Any  # stores.lexical.LexicalStore or stores.tantivy_store.TantivyStore

    def vector_status(self, counts: dict[str, int] | None = None) -> tuple[bool, str]: ...
    def vector_search(self, counts: dict[str, int] | None = None) -> str: ...
    def chroma_answers(self, counts: dict[str, int] | None = None) -> bool: ...
    def is_indexed(self) -> bool: ...
    def stored_identity(self) -> ModelIdentity | None: ...
    def model_matches(self) -> bool: ...
    def probe(self) -> dict[str, Any]: ...
    def writer_holder(self) -> Holder | None: ...


# Chunks the model probe re-embeds. One was a coin flip on partial damage: with 30% of the cached vectors' floats
# shuffled, health said ok and `delphi index` repaired nothing (a hostile-input newcomer, session 39); 8 find such
# damage with probability 1 - 0.7**8 = 94%, 16 (before a full run trusts the cache) 99.7%. Each is one chunk's
# embedding: microseconds for the static model, about 10 ms for MiniLM.
PROBE_SAMPLES = 8


def probe(meta: MetaStore, vectors: VectorStore | None, embedder: Embedder | None,
          cache_model: str | None = None, samples: int = PROBE_SAMPLES) -> dict[str, Any]:
    """Re-embed ``samples`` stored chunks, picked at random, and compare with what queries are answered from: with
    ``cache_model`` (the exact search) their vectors in the embedding cache, and Chroma's too when ``vectors`` is
    given; the worst is reported, naming the store."""
    if embedder is None or (vectors is None and cache_model is None):
        return {"cosine": None, "chunk": None, "status": "not run: no vector store or embedder"}
    rows = {}
    for _ in range(samples):
        row = meta.sample_embedded()
        if row is None:
            break
        rows.setdefault(row.id, row)
    if not rows:
        return {"cosine": None, "chunk": None, "status": "not run: no stored vectors"}
    picked = list(rows.values())
    cached = meta.cached_vectors(cache_model, [r.content_hash for r in picked]) if cache_model is not None else {}
    fresh_all = embedder.embed([embed_text(r) for r in picked])
    worst: dict[str, Any] | None = None
    for row, fresh in zip(picked, fresh_all, strict=True):
        stored: list[tuple[str, np.ndarray | None]] = []
        if cache_model is not None:
            stored.append(("embedding cache", cached.get(row.content_hash)))
        if vectors is not None:
            try:
                stored.append(("vector store", vectors.get_vector(row.id)))
            except Exception as e:
                return {"cosine": 0.0, "chunk": row.id, "status": f"failed: vector store error {e}"}
        for where, vec in stored:
            if vec is None:
                return {"cosine": 0.0, "chunk": row.id,
                        "status": f"failed: chunk marked embedded but missing from the {where}"}
            if vec.shape != fresh.shape:
                return {"cosine": 0.0, "chunk": row.id,
                        "status": f"failed: stored dim {vec.shape[0]} != model dim {fresh.shape[0]} ({where})"}
            cos = float(np.dot(vec, fresh) / ((np.linalg.norm(vec) * np.linalg.norm(fresh)) or 1.0))
            if not np.any(vec) and not np.any(fresh):
                cos = 1.0  # a text with no token the model knows ("x" * 2000) embeds to zero on both sides: the same
            if worst is None or cos < worst["cosine"]:
                worst = {"cosine": round(cos, 6), "chunk": row.id, "path": row.path, "compared": where,
                         "status": "ok" if cos >= 0.99 else
                         f"failed: stored vector ({where}) differs from a fresh embedding"}
    if worst is not None:
        worst["sampled"] = len(picked)
    return worst  # type: ignore[return-value]


def staleness(engine: EngineState, buffered: Collection[str] = (), loaded: bool = False) -> dict[str, Any]:
    """What changed on disk since the index was written. ``buffered``: files an editor has open, whose index
    holds the buffer's text: not stale whatever the disk says (a file opened unchanged showed the whole
    workspace as stale until it was closed; an editor newcomer, session 25)."""
    stored = engine.meta.file_hashes()
    res = scan(engine.root, engine.settings.max_file_bytes, engine.settings.extra_ignores)
    skipped = engine.meta.skipped()
    current = {f.path: f for f in res.files}
    buffered = set(buffered)
    # A file loaded from a snapshot has no mtime here (-1): not known to differ until the next run hashes it. Counted
    # as changed, every file of a snapshot loaded a moment ago was "stale" (a team newcomer, session 42).
    # (``loaded``: only then; a file indexed from an editor's buffer is stored with -1 too, and is stale once the
    # buffer is closed unsaved: a review, session 42.)
    unchecked = [p for p, f in current.items() if loaded and p in stored and stored[p][2] == -1 and p not in buffered]
    changed = [p for p, f in current.items() if p in stored and (stored[p][1], stored[p][2]) != (f.size, f.mtime_ns)
               and not (loaded and stored[p][2] == -1) and p not in buffered]
    new = [p for p in current if p not in stored and p not in skipped and p not in buffered]
    deleted = [p for p in stored if p not in current and p not in buffered]
    return {"changed": len(changed), "new": len(new), "deleted": len(deleted), "unchecked": len(unchecked),
            "examples": (changed + new + deleted)[:10], "stale": bool(changed or new or deleted)}


def vendored_summary(engine: EngineState) -> dict[str, Any] | None:
    """How many indexed files are other projects' code, by the folder that makes them so (most first)."""
    rules = Vendored.from_state(engine.meta.get_state("vendored"))
    folders: dict[str, int] = {}
    for path, _kind, _n in engine.meta.files():
        root = rules.root_of(path)
        if root is not None:
            folders[root] = folders.get(root, 0) + 1
    if not folders:
        return None
    ordered = dict(sorted(folders.items(), key=lambda kv: (-kv[1], kv[0])))
    return {"files": sum(folders.values()), "folders": dict(list(ordered.items())[:20]),
            "repositories": list(rules.repos)}


# Said in the vector branch's status when chunks wait to be embedded and no run is under way (a warning here).
VECTORS_BEHIND = "embedding stopped:"
GRAMS_COUNTED = 1_000  # the most chunks a status line counts above the trigram index's watermark


def grams_status(engine: EngineState) -> str | None:
    """What the trigram branch lacks while its index (stores/meta.py, ``build_grams``) is behind the
    manifest, in words; None when it holds every chunk."""
    behind = engine.meta.grams_behind(cap=GRAMS_COUNTED)  # read on every question during a run: bounded
    if not behind:
        return None
    n = f"over {GRAMS_COUNTED:,}" if behind > GRAMS_COUNTED else str(behind)
    if engine.indexing is not None or engine.writer_holder() is not None:
        return f"partial: {n} chunks written by the run under way are not in the trigram index yet"
    return (f"partial: {n} chunks are not in the trigram index (a run stopped before adding them, or an upgrade "
            "of Delphi dropped an index of an older format to build it again); "
            "literals in them are not found until the next `delphi index`, which adds them first")


def docs_status(engine: EngineState) -> str | None:
    """The file documents' branch while their search index waits for the end of a large run (or for the next
    run, after one stopped); None when it is built."""
    return FTS_OWED_STATUS if FileDocs(engine.meta).fts_owed() else None


def branch_readiness(engine: EngineState, lexical_ready: bool, vec_status: str,
                     grams: str | None = None, docs: str | None = None) -> dict[str, str]:
    """Every registered branch's readiness, from what it needs (then the rerankers')."""
    lex_damage = engine.problems.get("lexical_store")
    out: dict[str, str] = {}
    for spec in registered():
        if Need.TRIGRAMS in spec.needs and grams and lexical_ready:
            out[spec.name] = grams
        elif Need.FILEDOCS in spec.needs and docs and lexical_ready:
            out[spec.name] = docs
        elif Need.VECTORS in spec.needs:
            out[spec.name] = vec_status
        elif Need.HISTORY in spec.needs:
            out[spec.name] = engine.cochange_status
        elif Need.LEXICAL in spec.needs and lex_damage:
            out[spec.name] = "error: " + lex_damage
        else:
            out[spec.name] = "ready" if lexical_ready else "not ready"
    out["rerank"] = engine.reranker_status
    return out


def report(engine: EngineState, check_staleness: bool = True, buffered: Collection[str] = (),
           tracked_ignored: list[str] | None = None) -> dict[str, Any]:
    """``tracked_ignored``: files git tracks that the ignore rules exclude (a full report asks git)."""
    counts = engine.meta.counts()
    vec_ok, vec_status = engine.vector_status()
    lexical_ready = engine.is_indexed()
    stored = engine.stored_identity()
    serving = engine.embedder.identity if engine.embedder else None
    problems: list[dict[str, str]] = []
    problems += [{"severity": "warning", "code": "repo_setting_refused", "message": m} for m in engine.settings.refused]
    problems += [{"severity": "warning", "code": "repo_setting_unknown", "message": m}
                 for m in getattr(engine.settings, "unknown", [])]
    problems += [{"severity": "warning", "code": "user_setting", "message": m} for m in getattr(engine.settings, "own", [])]
    chroma_needed = engine.chroma_answers(counts) or bool(engine.settings.chroma_url)
    for key, msg in engine.problems.items():
        if key in CHROMA_PROBLEMS and not chroma_needed:
            problems.append({"severity": "warning", "code": key, "message": msg + "; the exact search over the "
                             "embedding cache answers meanwhile (Chroma is used past the exact bound)"})
        else:
            problems.append({"severity": "error", "code": key, "message": msg})
    for key, msg in engine.warnings.items():
        problems.append({"severity": "warning", "code": key, "message": msg})
    not_here = unwalkable(engine.root)
    gone = not_here is not None
    if not_here is not None:
        code = "workspace_unreadable" if isinstance(not_here, WorkspaceUnreadable) else "workspace_gone"
        problems.append({"severity": "error", "code": code,
                         "message": str(not_here) + "; answers come from that index meanwhile"})
    holder = engine.writer_holder()
    if counts["vectors"] == 0 and vec_status.split(": ", 1)[-1].startswith(VECTORS_BEHIND):
        # None embedded: the vector branch answers nothing (some left after a catch-up without vectors, `delphi
        # symbols`, is the status line's to say, not a warning: that is ordinary use).
        problems.append({"severity": "warning", "code": "vectors_behind", "message": "vector branch " + vec_status})
    elif not vec_ok and engine.settings.vectors and not vec_status.startswith("not ready: no vectors yet"):
        problems.append({"severity": "error", "code": "vector_branch", "message": "vector branch " + vec_status})
    if not lexical_ready:
        # Files in the manifest but no finished run: a run is under way, or one was stopped (Ctrl-C).
        if counts["files"] and engine.indexing is not None:
            msg = f"indexing in progress: {counts['files']} files indexed so far"
        elif holder is not None:
            # Another process's run (a terminal's `delphi index --rebuild`): not "interrupted", not "never
            # indexed" (a hostile newcomer, session 28); writer_busy below names it.
            msg = f"another process is indexing: {counts['files']} files indexed so far"
        elif counts["files"]:
            # Front-neutral: a language or MCP server resumes it by itself; the CLI needs `delphi index`.
            msg = (f"indexing was interrupted: {counts['files']} files indexed so far; the next run finishes it "
                   "(a running Delphi server starts one itself; otherwise `delphi index`)")
        else:
            msg = "the workspace has not been indexed yet"
        problems.append({"severity": "warning", "code": "not_indexed", "message": msg})
    failed = engine.meta.get_state("index_failed")
    if failed and "index_run" not in engine.problems:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(failed["at"]))
        problems.append({"severity": "error", "code": "index_run", "message": (
            f"the last index run failed on {when} ({failed['error']}); the index may be incomplete until a full run "
            "succeeds (a running Delphi server starts one itself; otherwise `delphi index`)")})
    recovered = engine.meta.get_state("recovered")
    if recovered:
        rebuilt = bool(engine.meta.get_state("recovered_rebuilt")) and lexical_ready
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(recovered["at"]))
        problems.append({
            "severity": "info" if rebuilt else "error", "code": "manifest_recovered",
            "message": (f"the manifest (meta.sqlite) was damaged ({recovered['error']}) and was moved aside to "
                        f"{recovered['movedTo']} on {when}; "
                        + ("the index was rebuilt from the workspace since" if rebuilt else
                           "run `delphi index` to rebuild it from the workspace (its embedding cache was lost "
                           "with it, so every chunk is embedded again)"))})
    for branch, err in sorted(engine.branch_errors.items()):
        problems.append({"severity": "error", "code": "branch_error",
                         "message": f"branch {branch} failed on the last query: {err}"})
    if holder is not None:
        problems.append({"severity": "info", "code": "writer_busy",
                         "message": holder.describe() + "; answers come from the committed index meanwhile"})
    if engine.settings.reranker == "off":
        problems.append({"severity": "info", "code": "reranker_off", "message": "reranker " + engine.reranker_status})
    if state_of(engine.cochange_status) == State.ERROR:
        problems.append({"severity": "warning", "code": "cochange", "message": "co-change branch " + engine.cochange_status})
    grammars = grammar_status()
    for lang, st in grammars.items():
        if st != "ok":
            problems.append({"severity": "error", "code": "grammar", "message": f"tree-sitter grammar {lang}: {st}"})
    # A folder that is gone is not "stale" with every file deleted: workspace_gone says what it is.
    unchecked = bool(engine.meta.get_state("snapshot_unchecked"))
    stale = staleness(engine, buffered, unchecked) if check_staleness and lexical_ready and not gone else None
    if lexical_ready and unchecked:
        loaded = engine.meta.get_state("snapshot") or {}
        problems.append({"severity": "warning", "code": "snapshot_unchecked", "message": (
            f"the index was loaded from the snapshot {loaded.get('file') or ''} and is not yet compared with this "
            "checkout: until the next index run (`delphi index`; a running server does it itself) answers may hold "
            "files as the snapshot's machine had them" + (f" ({stale['unchecked']} files to compare by content"
                                                           f"{', ' + str(stale['new']) + ' new' if stale['new'] else ''})"
                                                           if stale else ""))})
    if stale and stale["stale"]:
        problems.append({"severity": "warning", "code": "stale_index",
                         "message": f"index is stale: {stale['changed']} changed, {stale['new']} new, "
                                    f"{stale['deleted']} deleted files since the last index; `delphi index` brings "
                                    "it up to date (an editor's or agent's running Delphi does it itself)"})
    if tracked_ignored:
        some = ", ".join(tracked_ignored[:3]) + (", ..." if len(tracked_ignored) > 3 else "")
        problems.append({"severity": "info", "code": "tracked_but_ignored",
                         "message": f"{len(tracked_ignored)} files git tracks are matched by ignore rules and not "
                                    f"indexed ({some}); Delphi follows the ignore rules, as ripgrep does"})
    vendored = vendored_summary(engine) if lexical_ready and check_staleness else None
    if vendored:
        folders = ", ".join(f"{f or '(.gitattributes patterns)'}/ ({n})" for f, n in list(vendored["folders"].items())[:4])
        more = ", ..." if len(vendored["folders"]) > 4 else ""
        problems.append({"severity": "info", "code": "vendored", "message": (
            f"{vendored['files']} indexed files are other projects' code (vendored copies, submodules, nested "
            f"repositories, `linguist-vendored`): {folders}{more}; they rank below your own files unless a question "
            "names them, and their tests are not listed for your files (`-linguist-vendored` in .gitattributes "
            "makes a folder yours)")})
    parser = engine.meta.get_state("parser_version", 1)
    if lexical_ready and isinstance(parser, int) and parser > PARSER_VERSION:
        problems.append({"severity": "warning", "code": "newer_parser", "message": (
            f"this index was made by a newer version of Delphi (chunker version {parser}, this one is "
            f"{PARSER_VERSION}): this one indexes changed files only and keeps the rest as that version cut them; "
            "stop this older Delphi (an editor or daemon not restarted after an upgrade), or to go back to it for "
            "good run `delphi index --rebuild` with it")})
    elif lexical_ready and parser != PARSER_VERSION:
        problems.append({"severity": "warning", "code": "older_parser", "message": (
            f"this index was made by another version of Delphi (chunker version {parser}, this one is "
            f"{PARSER_VERSION}): the next full run parses every file again (a running Delphi server does it "
            "itself; otherwise `delphi index`); until then answers show text as that version cut it"
            + (", secrets in it not redacted" if isinstance(parser, int) and parser < 4 else ""))})
    elif lexical_ready and check_staleness and (others := engine.meta.parsed_by_other(PARSER_VERSION)):
        some = ", ".join(sorted(others)[:3]) + (", ..." if len(others) > 3 else "")
        problems.append({"severity": "warning", "code": "older_parser", "message": (
            f"{len(others)} files were written by another version of Delphi (an older editor or daemon still "
            f"running?): {some}; the next full run parses them again (`delphi index`)")})
    grams = grams_status(engine)
    if grams and engine.indexing is None and engine.writer_holder() is None:
        problems.append({"severity": "warning", "code": "trigram_behind", "message": "trigram branch " + grams})
    docs = docs_status(engine)
    if docs and engine.indexing is None and engine.writer_holder() is None:
        problems.append({"severity": "warning", "code": "filedocs_behind", "message": (
            "filedoc branch off until the next run: a run stopped before building the file documents' search "
            "index (`delphi index` builds it)")})
    indexed_at = engine.meta.get_state("indexed_at")
    branches = branch_readiness(engine, lexical_ready, vec_status, grams, docs)
    return {
        "ok": not any(p["severity"] == "error" for p in problems),
        "root": str(engine.root),
        "indexDir": str(engine.index_dir),
        "vectorStore": engine.vectors.where if engine.vectors else None,
        "vectorSearch": engine.vector_search(counts),  # "exact, N vectors ..." or "Chroma HNSW (...)"
        # The lexical store in use (settings.lexical_store), its version and folder; an unavailable one
        # is an error in problems, never replaced by the other store.
        "lexicalStore": engine.lexical.describe(),
        # Worker processes of a large index run (setting index_workers) and how they end with this process.
        "indexWorkers": workers.describe(engine.settings.index_workers, engine.embedder is not None),
        # How the in-memory view every query reads came to be: built (and saved, on a big index) or
        # loaded from what an earlier process saved for this very manifest state.
        "view": engine.view_source or "not built yet (built or loaded by the first query)",
        "model": {
            "stored": stored.as_dict() if stored else None,
            "serving": serving.as_dict() if serving else None,
            "match": engine.model_matches(),
            "probe": engine.probe() if engine.settings.vectors and engine.embedder is not None else None,
        },
        "branches": branches,
        "counts": {**counts, "skipped": len(engine.meta.skipped())},
        "skipped": engine.meta.skipped(),
        "decodedWithReplacement": engine.meta.replaced_files(),
        # Files whose text held secrets, redacted before indexing (workspace/secrets.py): path → what, in words.
        "redactedSecrets": engine.meta.redacted_files(),
        # Tracked by git, excluded by its ignore rules, not indexed (at most 100 named); None: not asked (a
        # status poll) or not a git work tree.
        "trackedButIgnored": None if tracked_ignored is None else {"count": len(tracked_ignored),
                                                                   "paths": tracked_ignored[:100]},
        "indexedAt": indexed_at,
        "indexAgeSeconds": round(time.time() - indexed_at, 1) if indexed_at else None,
        # The snapshot this index was loaded from (file name, when it was made, its commit), or None: a
        # teammate's answer that differs from yours may come from an index built at another commit.
        "snapshot": engine.meta.get_state("snapshot"),
        "staleness": stale,
        # Indexed files that are other projects' code (workspace/vendored.py): their count and the folders that
        # hold them; None when not asked (a status poll) or there are none.
        "vendored": vendored,
        "grammars": grammars,
        "writer": holder.as_dict() if holder else None,
        "problems": problems,
    }
