"""The one validated settings object.

Sources, later ones winning:

1. defaults;
2. the repository's own ``delphi.toml`` (or ``[tool.delphi]`` in its ``pyproject.toml``);
3. the user's config file (``platformdirs.user_config_dir("delphi")/config.toml``, or the file
   ``DELPHI_CONFIG`` names);
4. ``DELPHI_*`` environment variables;
5. explicit overrides (CLI flags, the editor's ``initializationOptions``, ``Engine(**overrides)``).

A cloned repository is not the user: its file may only set keys that keep Delphi inside the
workspace and this machine (chunking, ignores, weights, built-in model names...). Keys that reach
outside -- a network endpoint, an output path, the index location, a model loaded from a folder --
are taken only from sources 3-5; a repository file that sets one is ignored for that key and
recorded in :attr:`Settings.refused` (health shows it as a warning). Keys may be written in
snake_case or camelCase. A bad value raises :class:`SettingsError` naming the key; nothing falls
back silently.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import logging
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

EMBEDDERS = ("potion-base-8M", "minilm-l6-int8")
RERANKERS = ("off", "ltr", "cross-encoder", "ltr+cross-encoder")
VECTOR_SEARCHES = ("auto", "exact", "hnsw")
LEXICAL_STORES = ("whoosh", "tantivy")
MAX_INDEX_WORKERS = 32  # index_workers' bound: a repository's file may set it, and each worker is a process
BM25_SCORINGS = ("whoosh", "tantivy")
PRF_MODES = ("off", "bm25", "vector", "both")
CLEANINGS = ("squash", "basic", "off")  # retrieval/description.py's, repeated so settings imports no retrieval code
log = logging.getLogger("delphi_ls.settings")

# Keys only the user's own configuration may set: each reaches outside the workspace or the machine
# (chroma_url: vectors and paths go to a server; trace_file and index_dir: files written anywhere;
# snapshot: an index read from anywhere, whose chunk text answers questions).
# embedder and reranker are in this class only when they name a folder (a model loaded from disk);
# their built-in names are fine from a repository.
USER_ONLY = ("chroma_url", "index_dir", "trace_file", "snapshot")
USER_ONLY_AS_FOLDER = {"embedder": EMBEDDERS, "reranker": RERANKERS}
TRUSTED_SOURCES = "user config, environment, editor settings or command line"
# The most a repository's own file may set these to: a cloned repository's `max_file_bytes = 100000000` had a
# 20 MB file cut into 14,000 chunks (a newcomer, session 25). Your own configuration may go higher.
REPO_MAX = {"max_file_bytes": 10_000_000}


class SettingsError(ValueError):
    """A setting has a bad value; ``key`` names it."""

    def __init__(self, key: str, message: str, source: str | None = None) -> None:
        # source: where the value came from ("the environment variable DELPHI_RRF_K", a file's path),
        # so a user with several config sources knows which one to fix.
        super().__init__(f"setting '{key}'" + (f" (from {source})" if source else "") + f": {message}")
        self.key, self.message, self.source = key, message, source


def default_index_base() -> Path:
    """Where index folders go unless ``index_dir`` says otherwise: the user cache dir's ``delphi/``."""
    return Path(platformdirs.user_cache_dir("delphi"))


@dataclass
class Settings:
    # Where the index lives; default: the user's cache dir, one folder per workspace.
    index_dir: Path | None = None
    # A `chroma run` server shared by a team; default: embedded PersistentClient.
    chroma_url: str | None = None
    embedder: str = "potion-base-8M"
    # Vectors off means lexical branches only (health says so).
    vectors: bool = True
    # Which search answers the vector branch: "exact" (the embedding cache in memory), "hnsw" (Chroma),
    # "auto": exact up to stores/exact.py's bound (512 MiB of vectors), HNSW above it.
    vector_search: str = "auto"
    # What holds the BM25 index: "tantivy" (Rust, its own threads) or "whoosh" (pure Python). Switching
    # rebuilds the lexical index from the manifest. tantivy by default since session 7: on spring-boot
    # lexical ready 79 -> 60 s, warm p50 166 -> 83 ms, its store 63 -> 10 MB; dev_mined MRR 0.742 vs 0.737,
    # within paired noise (README "Lexical store", bench/RESULTS.md).
    lexical_store: str = "tantivy"
    # How tantivy scores a term: "whoosh" (Whoosh's idf and its field boosts' worth, put in as per-term
    # boosts at query time: the engine and the learned ranker, trained on Whoosh's ranks, see nearly the
    # same BM25 whichever store: idf exactly, the boosts' worth exactly at tf 1 and average length) or "tantivy" (Lucene's idf, a boost multiplying a field's score). Session 8: BM25 file
    # rankings against Whoosh's, Spearman 0.975 -> 0.998 on dev_mined (bench/RESULTS.md).
    bm25_scoring: str = "whoosh"
    # Pseudo-relevance feedback: "bm25", "vector" or "both" search that branch once more with the first
    # fusion's top files fed back (their shared words; the question's vector moved toward their chunks),
    # the second list replacing the first; "off" by default (session 8, bench/RESULTS.md).
    prf: str = "off"
    # The BM25 branch's weight of a question's whole identifiers (`AssertJ` -> `assertj`; not their camel parts,
    # `assert`, which the query also holds) against its other words: 1.0 is plain BM25.
    bm25_identifier_weight: float = 1.0
    # ... and of those camel/snake parts that the question never writes as words of their own (0 drops them).
    bm25_identifier_parts: float = 1.0
    # The BM25 branch's weight of other forms of a question's plain words (`pushing` -> `push`, `retries` ->
    # `retry`, `option` -> `options`) that the index holds: code names things in the stem, a description
    # writes them inflected. 0 searches the words as written.
    bm25_inflections: float = 0.0
    # How a change description is cleaned before it is searched (retrieval/description.py): "basic" (links,
    # trailers, template checklists and headings, issue numbers, bot lines; session 5), "squash" (also a
    # checklist item's wrapped lines, a squash-merge's housekeeping bullets, revert lines), "off" (the text as
    # written). Traces are never cleaned. "squash" by default since session 9: dev_mined MRR +0.013, dev_langs
    # +0.000, ARB v0_1 unchanged (bench/RESULTS.md).
    clean_description: str = "squash"
    # For a question that asks for source code, a declaration file (a C/C++ header, a `.pyi` stub, a `.d.ts`,
    # a PHP `FooInterface`, a C# `IFoo`) in the top 20 goes just below its implementation twin when the twin
    # ranks below it, the question does not name the declaration and does not speak of types, stubs, headers,
    # signatures or overloads (retrieval/rerank.py, retriever.py). On by default since session 9: intent2code
    # MRR dev_mined +0.008, dev_langs +0.045 [+0.014, +0.081], no question worse; ARB v0_1 unchanged.
    implementation_first: bool = True
    max_file_bytes: int = 1_000_000
    chunk_chars: int = 1500
    extra_ignores: list[str] = field(default_factory=list)
    # Cross-encoder: "off", or a folder holding model.onnx + tokenizer.json.
    reranker: str = "ltr"
    reranker_window: int = 20
    reranker_weight: float = 0.3
    rrf_k: int = 30
    # The learned ranker may not push a file of the fused top ``ltr_keep_top`` below rank 20 (0: it may).
    # Why: on unseen repositories it raised code2test MRR but pushed gold tests out of the top 20. On by
    # default since session 6: dev_mined code2test R@20 0.958 -> 0.967 (koa: a gold test the fusion put at
    # 5 went to 33, now 20), nothing else moved on dev_mined or ARB v0_1 (bench/RESULTS.md).
    ltr_keep_top: int = 5
    branch_weights: dict[str, float] = field(default_factory=dict)
    path_cap_per_dir: int = 3
    # Per-query traces (JSON lines). Relative: under the index folder; absolute only from the user.
    trace_file: Path | None = None
    embed_batch: int = 256  # chunks per embedding call (the indexer reads it)
    # Worker processes for a large run's read + parse + chunk + tokenize stage (indexing/workers.py); the
    # parent stays the one writer of every store. 0 or 1: in-process; at most one per core is started.
    # Runs of fewer than 256 files (an editor's save) stay in-process whatever this says: a pool's
    # start-up would cost more than it saves.
    index_workers: int = 2
    # A long-lived front (the language server, `delphi serve`/`mcp`) opens what the first question reads
    # in the background: at start on an index that exists, and in a quiet spell after a run (Engine.warm).
    warm_start: bool = True
    # A snapshot file (`delphi snapshot create`) a new index starts from; ignored once an index exists.
    snapshot: Path | None = None

    def __post_init__(self) -> None:
        # Not a dataclass field: not a setting anyone can set, only what load() refused and why.
        self.refused: list[str] = []
        # Keys a repository's file sets that Delphi does not know (a typo): warned, defaults kept.
        self.unknown: list[str] = []
        # What the user's own environment got wrong (a misspelt DELPHI_* variable, DELPHI_CONFIG naming no file, a
        # home folder that cannot be entered): warned apart from the repository's (health's `user_setting`).
        self.own: list[str] = []

    @classmethod
    def load(cls, workspace: Path | None = None, overrides: dict[str, Any] | None = None,
             env: dict[str, str] | None = None, user_config: Path | None = None) -> Settings:
        """Merge the sources (module docstring); ``user_config`` defaults to :func:`user_config_path`."""
        env = os.environ if env is None else env
        # One entry per setting, keyed by its snake_case name, holding (the key as its source spelt it, the value):
        # a later source replaces an earlier one however each spells the key. Keyed by spelling, a user file's
        # `rerankerWindow` sat beside the environment's `reranker_window` and, applied later, won over it and over
        # the editor's camelCase settings (a newcomer, session 37).
        raw: dict[str, tuple[str, Any]] = {}
        refused: list[str] = []
        unknown: list[str] = []
        origin: dict[str, str] = {}  # setting name -> the source its value came from (for error messages)
        known = [f.name for f in fields(cls)]
        if workspace is not None:
            repo, where = _file_settings(workspace, unknown)
            repo_file = workspace / where.split(" ")[0]  # where: "delphi.toml" or "pyproject.toml [tool.delphi]"
            for key, value in repo.items():
                if snake_case(key) not in known:
                    # A cloned repository's typo must not lock its user out of every command: warn, keep
                    # the default for that key. (The user's own sources still fail on an unknown key.)
                    close = difflib.get_close_matches(snake_case(key), known, n=1)
                    unknown.append(f"{repo_file}{where[len(repo_file.name):]} sets unknown setting '{key}'"
                                   + (f" (did you mean {close[0]}?)" if close else "") + "; ignored")
                    continue
                why = _repo_refusal(key, value)
                if why is None:
                    raw[snake_case(key)] = (key, value)
                    origin[snake_case(key)] = str(repo_file)
                else:
                    refused.append(f"{where} sets {why}, which only your own configuration may set "
                                   f"({TRUSTED_SOURCES}); ignored")
        user_path = user_config if user_config is not None else user_config_path(env)
        own: list[str] = []
        user, there = _user_file_settings(user_path, own)
        if user_config is None and env.get("DELPHI_CONFIG") and there is False:
            # A typo in the variable's path read no settings without a word (noticed session 29).
            own.append(f"DELPHI_CONFIG names {_shown(user_path)}, which is not a file; no user settings read")
        raw.update({snake_case(k): (k, v) for k, v in user.items()})
        origin.update({snake_case(k): _shown(user_path) for k in user})
        from_env = _env_settings(env)
        own += _misspelt_env(env, known)
        raw.update({snake_case(k): (k, v) for k, v in from_env.items()})
        origin.update({k: f"the environment variable DELPHI_{k.upper()}" for k in from_env})
        raw.update({snake_case(k): (k, v) for k, v in (overrides or {}).items()})
        for k in overrides or {}:
            origin.pop(snake_case(k), None)  # an explicit override: the caller knows where it came from
        try:
            s = cls.from_dict(dict(raw.values()))
        except SettingsError as e:
            source = origin.get(snake_case(e.key))
            if source is None or e.source is not None:
                raise
            raise SettingsError(e.key, e.message, source) from None
        s.refused, s.unknown, s.own = refused, unknown, own
        for msg in refused + unknown + own:
            log.warning("%s", msg)
        return s

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Settings:
        s = cls()
        known = {f.name: f for f in fields(cls)}
        for key, value in raw.items():
            name = snake_case(key)
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise SettingsError(key, f"unknown setting ({hint}known: {', '.join(sorted(known))})")
            if value is None and name in ("index_dir", "chroma_url", "trace_file", "snapshot"):
                setattr(s, name, None)
                continue
            setattr(s, name, _coerce(key, name, value))
        s.validate()
        return s

    def validate(self) -> None:
        if self.embedder not in EMBEDDERS and not (Path(self.embedder).expanduser() / "model.safetensors").is_file():
            raise SettingsError("embedder", f"{self.embedder!r} is not one of {', '.join(EMBEDDERS)} "
                                "nor a folder holding a model2vec model.safetensors")
        for key in ("max_file_bytes", "chunk_chars", "reranker_window", "rrf_k", "path_cap_per_dir", "embed_batch"):
            if getattr(self, key) <= 0:
                raise SettingsError(key, "must be a positive integer")
        if not 0 <= self.index_workers <= MAX_INDEX_WORKERS:
            raise SettingsError("index_workers", f"must be between 0 (in-process) and {MAX_INDEX_WORKERS}")
        if not 0 <= self.ltr_keep_top <= 20:
            raise SettingsError("ltr_keep_top", "must be between 0 (off) and 20 (the depth it keeps them within)")
        if self.chunk_chars < 200:
            raise SettingsError("chunk_chars", "must be at least 200")
        folder = Path(self.reranker).expanduser()
        if self.reranker not in RERANKERS and not ((folder / "model.onnx").is_file() or (folder / "ltr.json").is_file()):
            raise SettingsError("reranker", f"{self.reranker!r} is not one of {', '.join(RERANKERS)} nor a folder "
                                "holding an ONNX cross-encoder (model.onnx + tokenizer.json) or a learned ranker (ltr.json)")
        if self.vector_search not in VECTOR_SEARCHES:
            raise SettingsError("vector_search", f"{self.vector_search!r} is not one of {', '.join(VECTOR_SEARCHES)}")
        if self.lexical_store not in LEXICAL_STORES:
            raise SettingsError("lexical_store", f"{self.lexical_store!r} is not one of {', '.join(LEXICAL_STORES)}")
        if self.bm25_scoring not in BM25_SCORINGS:
            raise SettingsError("bm25_scoring", f"{self.bm25_scoring!r} is not one of {', '.join(BM25_SCORINGS)}")
        if self.clean_description not in CLEANINGS:
            raise SettingsError("clean_description", f"{self.clean_description!r} is not one of {', '.join(CLEANINGS)}")
        if self.prf not in PRF_MODES:
            raise SettingsError("prf", f"{self.prf!r} is not one of {', '.join(PRF_MODES)}")
        if not 0.0 < self.bm25_identifier_weight <= 10.0:
            raise SettingsError("bm25_identifier_weight", "must be above 0 and at most 10")
        if not 0.0 <= self.bm25_identifier_parts <= 1.0:
            raise SettingsError("bm25_identifier_parts", "must be between 0 (dropped) and 1 (plain BM25)")
        if not 0.0 <= self.bm25_inflections <= 1.0:
            raise SettingsError("bm25_inflections", "must be between 0 (off) and 1 (as much as the word itself)")
        if not 0.0 <= self.reranker_weight <= 1.0:
            raise SettingsError("reranker_weight", "must be between 0 and 1")
        if self.branch_weights:
            # The names are the registry's (retrieval/branches/registry.py), imported only when the key is set.
            from .retrieval.branches.registry import branch_names
            known = branch_names()
            for b, w in self.branch_weights.items():
                if b not in known:
                    raise SettingsError("branch_weights", f"unknown branch {b!r} (known: {', '.join(known)})")
                # nan passed `w < 0`, inf and true passed too: a repository's file scrambled the ranking and the
                # language server sent `"score": NaN`, which is no JSON (a newcomer, session 29).
                if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                    raise SettingsError("branch_weights", f"weight of {b!r} must be a finite number >= 0, got {w!r}")
        if self.chroma_url is not None and not re.match(r"^https?://[^/\s]+", self.chroma_url):
            raise SettingsError("chroma_url", f"{self.chroma_url!r} is not an http(s) URL")

    def trace_path(self, index_dir: Path) -> Path | None:
        """Where traces go: a relative ``trace_file`` lives under the index folder."""
        if self.trace_file is None:
            return None
        p = Path(self.trace_file).expanduser()
        return p if p.is_absolute() else Path(index_dir) / p

    def index_path(self, workspace: Path) -> Path:
        if self.index_dir is not None:
            return Path(self.index_dir).expanduser()
        root = workspace.resolve()
        digest = hashlib.sha1(os.fsencode(root)).hexdigest()[:12]  # a folder's name can be any bytes
        # The folder's name as text (tantivy and Chroma take only UTF-8 paths; the digest keeps it unique).
        name = os.fsencode(root.name).decode("utf-8", "replace") or "root"
        return default_index_base() / f"{name}-{digest}"

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


def snake_case(key: str) -> str:
    """A setting's or a request field's name as Python spells it: ``chunkChars`` and ``chunk-chars`` are
    ``chunk_chars`` (the MCP tools name their errors' fields this way too)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower().replace("-", "_")


def _coerce(key: str, name: str, value: Any) -> Any:
    default = getattr(Settings(), name)
    if name in ("index_dir", "trace_file", "snapshot"):
        if not isinstance(value, (str, Path)) or not str(value):
            raise SettingsError(key, "must be a path")
        return Path(value).expanduser()
    if name == "chroma_url":
        if not isinstance(value, str):
            raise SettingsError(key, "must be a URL string")
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise SettingsError(key, f"must be true or false, got {value!r}")
    if isinstance(default, int):
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise SettingsError(key, f"must be an integer, got {value!r}") from None
    if isinstance(default, float):
        try:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        except (TypeError, ValueError):
            raise SettingsError(key, f"must be a number, got {value!r}") from None
    if isinstance(default, str):
        if not isinstance(value, str):
            raise SettingsError(key, f"must be a string, got {value!r}")
        return value
    if isinstance(default, list):
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingsError(key, "must be a list of strings")
        return list(value)
    if isinstance(default, dict):
        if isinstance(value, str):
            try:
                value = {k: float(v) for k, v in (kv.split("=") for kv in value.split(",") if kv)}
            except ValueError:
                raise SettingsError(key, "must look like 'bm25=1.0,vector=0.8'") from None
        if not isinstance(value, dict):
            raise SettingsError(key, "must be a table of branch -> weight")
        return dict(value)
    raise SettingsError(key, "unsupported type")  # pragma: no cover


def user_config_path(env: Any = None) -> Path:
    """The user's own config file: ``$DELPHI_CONFIG``, else ``<user config dir>/delphi/config.toml``."""
    env = os.environ if env is None else env
    if env.get("DELPHI_CONFIG"):
        return Path(env["DELPHI_CONFIG"]).expanduser()
    return Path(platformdirs.user_config_dir("delphi")) / "config.toml"


def _repo_refusal(key: str, value: Any) -> str | None:
    """Why a repository file may not set ``key`` to ``value`` (a phrase naming the key), or None."""
    name = snake_case(key)
    if name in USER_ONLY:
        return f"'{key}'"
    builtin = USER_ONLY_AS_FOLDER.get(name)
    if builtin is not None and isinstance(value, str) and value not in builtin:
        return f"'{key}' to a folder ({value!r})"
    bound = REPO_MAX.get(name)
    if bound is not None:
        try:  # as the setting will read it: `1e9` and "100000000" are numbers too (review, session 25)
            number = _coerce(key, name, value)
        except SettingsError:
            return None  # a bad value: reported as such when the settings are built
        if number > bound:
            return f"'{key}' to {value!r}, over {bound:,}"
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return dict(tomllib.load(f))
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(str(path), f"not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # a Latin-1 comment was a traceback from every front (a newcomer, session 29)
        raise SettingsError(str(path), f"not valid TOML: not UTF-8 at byte {e.start}") from None
    except RecursionError:  # tomllib recurses per nesting level (review, session 29)
        raise SettingsError(str(path), "not valid TOML: nested too deeply") from None
    except OSError as e:
        raise SettingsError(str(path), f"cannot be read: {e.strerror or e}") from None


def _file_settings(workspace: Path, warnings: list[str] | None = None) -> tuple[dict[str, Any], str]:
    """The repository's own settings and the file they came from (for messages). ``delphi.toml`` is Delphi's
    own: a broken one is an error. A ``pyproject.toml`` is the project's, mostly about other tools: one that
    does not parse, or whose ``tool`` is not a table, is said in ``warnings`` and not read (it stopped every
    command, a cloned repository locking its user out; a newcomer, session 29)."""
    toml = workspace / "delphi.toml"
    if toml.is_file():
        return _read_toml(toml), "delphi.toml"
    pyproject = workspace / "pyproject.toml"
    if pyproject.is_file():
        try:
            tool = _read_toml(pyproject).get("tool", {})
        except SettingsError as e:
            if warnings is not None:
                warnings.append(f"{pyproject}: {e.message}; its [tool.delphi] is not read")
            return {}, ""
        table = tool.get("delphi", {}) if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            if warnings is not None:
                what = "[tool.delphi]" if isinstance(tool, dict) else "[tool]"
                warnings.append(f"{pyproject}: {what} is not a table; not read")
            return {}, ""
        return dict(table), "pyproject.toml [tool.delphi]"
    return {}, ""


def _shown(path: Path) -> str:
    """A path as a message shows it: under the home folder as ``~/...``."""
    try:
        return "~/" + str(Path(path).expanduser().resolve().relative_to(Path.home().resolve()))
    except (ValueError, RuntimeError):
        return str(path)


def _user_file_settings(path: Path, warnings: list[str]) -> tuple[dict[str, Any], bool | None]:
    """The user's own file's settings, and whether it is there (None: its folder cannot be entered)."""
    try:
        there = path.is_file()
    except PermissionError:
        # A home folder this user cannot enter (`docker run -u 1000` on an image whose HOME is /root, `sudo -u`
        # keeping HOME) was a traceback from every command, `--index-dir` given or not (a newcomer, session 30).
        warnings.append(f"{_shown(path.parent)} cannot be entered (permission denied); no user settings read")
        return {}, None
    return (_read_toml(path) if there else {}), there


def _misspelt_env(env: Any, known: list[str]) -> list[str]:
    """``DELPHI_RFF_K=3`` was ignored without a word (a newcomer, session 29). A variable one slip from a setting's
    is a warning; others are left alone (``DELPHI_`` is no namespace Delphi owns on a machine)."""
    out = []
    for k in env:
        if not k.startswith("DELPHI_") or k == "DELPHI_CONFIG":
            continue
        name = k[len("DELPHI_"):].lower()
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        if close:
            out.append(f"the environment variable {k} is not a setting (did you mean DELPHI_{close[0].upper()}?); "
                       "ignored")
    return out


def _env_settings(env: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = {f.name for f in fields(Settings)}
    for k, v in env.items():
        if k.startswith("DELPHI_"):
            name = k[len("DELPHI_"):].lower()
            if name in names:
                out[name] = v
    return out
