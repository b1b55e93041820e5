"""Index snapshots a team can share: one machine (a teammate, CI) writes the index of a workspace to a
file, another loads it and brings it up to date with the normal incremental index run.

The file is a gzip'd tar. Its first member, ``delphi-snapshot.json``, is the header: what built the
index (the engine's index format, the parser version, the manifest and lexical schemas, the chunk size,
the embedding model's identity), the counts, and the size and sha256 of every other member. The other
member is ``index/meta.sqlite`` (a consistent copy made with SQLite's backup API while this process
holds the index's writer lock, so no run writes meanwhile), and nothing else: no traces, no daemon token,
no lock file, no moved-aside damaged manifest, and no store whose files Python unpickles: not Whoosh's
(its TOC and compound segments are read with ``pickle``) nor Chroma's. A file from another machine must
never reach ``pickle.load``. The loader rebuilds the Whoosh index from the manifest's chunk texts in its
staging folder before the swap (``Indexer.rebuild_lexical``, the repair path), so BM25 answers from the
first query after a load. The copy is scrubbed before it is packed: deleted rows' bytes are zeroed
(``secure_delete``), every FTS5 table is merged (``optimize``) so no old segment keeps a removed line's
terms, then VACUUM; the builder's skipped-file list and absolute root go. Every embedded chunk's vector is in the manifest's
embedding cache, so the loader's next full index refills Chroma from it (no re-embedding), and until
then the exact vector search answers from the cache (stores/exact.py).

Everything inside is relative to the workspace (paths, chunk ids, co-change pairs), so a snapshot
made in /a/repo loads into /b/repo. The manifest records each file's content hash; loading sets every
file's stored mtime to -1, so the next index run reads and hashes every file once: a file whose hash
matches is kept (only its size and mtime are updated), one that differs is re-indexed, one that is gone
is removed, one that is new is indexed. Mtimes are never trusted across machines.

Loading is all or nothing. The header is checked against this machine's settings first (a mismatch is
refused, naming what differs, before anything is touched); the members are written to a staging folder
beside the index, each checked against the header's size and hash (an absolute path, ``..``, a link or
any member the header does not list is refused, and so is a truncated or corrupt file); only then, under
the writer lock, does the staged index replace the old one. The old one is kept until the swap is done
and put back if the swap fails; after a kill -9 mid-swap, the next engine open (or load) puts it back
(``recover``). A load is refused while any engine, in any process, has the index open (``OPEN_LOCK``).
Tar extension headers (GNU long names, pax) over 64 KiB are refused before tarfile reads them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ..core.git import ask_git
from ..core.locks import take_or_close
from ..core.processes import running
from ..settings import Settings
from ..stores.lexical import FOLDERS as LEXICAL_FOLDERS
from ..stores.lexical import schema as lexical_schema
from ..stores.meta import SCHEMA as MANIFEST_SCHEMA
from ..stores.meta import merge_fts_tables
from ..stores.writer_lock import WriterLock
from .cochange import git_head
from .pipeline import PARSER_VERSION

MAGIC = "delphi-snapshot"
VERSION = 1
HEADER = "delphi-snapshot.json"
PREFIX = "index/"
STORES = ("meta.sqlite",)  # what of an index folder a snapshot holds, nothing else (no pickled store)
EXT_HEADER_MAX = 64 << 10  # a tar long-name / pax header larger than this is refused before it is read
HEADER_MAX = 1 << 20  # a header larger than this is not one of ours
# gzip level: on black's index 6 was 6% smaller than 1 (9.0 vs 9.5 MB of 23.9 MB) for 1.8x the CPU.
COMPRESS_LEVEL = 1
_CHUNK = 1 << 20
# Every open engine holds this file's flock shared (hold_open); a load's swap takes it exclusive without
# waiting, so an index another process has open is never swapped under it (its stores would split).
OPEN_LOCK = "open.lock"
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")  # each part of a member's name: what the stores write


class SnapshotError(ValueError):
    """A snapshot that cannot be loaded (refused, corrupt, hostile); the existing index is untouched."""


@dataclass(frozen=True)
class Built:
    """What an index was built with: a snapshot loads only where all of it is the same."""

    index_format: int
    parser_version: int
    manifest_schema: str
    lexical_schema: str
    chunk_chars: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def built_with(settings: Settings, index_format: int) -> Built:
    fields = sorted(f"{name}:{type(f).__name__}" for name, f in lexical_schema().items())
    # The manifest's schema as SQL, comments and spacing aside: a table or column added or changed is
    # another Delphi (a team shares snapshots between machines running the same version).
    sql = " ".join(re.sub(r"--[^\n]*", " ", MANIFEST_SCHEMA).split())
    return Built(index_format, PARSER_VERSION, hashlib.sha256(sql.encode()).hexdigest()[:16],
                 ",".join(fields), settings.chunk_chars)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _ro_uri(path: Path) -> str:
    """A read-only SQLite URI; the path percent-encoded (a `#` or `?` in a folder name would cut it)."""
    return Path(path).resolve().as_uri() + "?mode=ro"


def _copy_sqlite(src: Path, dst: Path) -> None:
    """A consistent copy of a live SQLite file (its WAL folded in), whatever other readers do."""
    s = sqlite3.connect(_ro_uri(src), uri=True, timeout=30)
    d = sqlite3.connect(str(dst))
    try:
        s.backup(d)
        d.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    finally:
        d.close()
        s.close()


def _prune(meta: Path) -> None:
    """Drop from the copy what the loader cannot use: cached vectors of other models or of chunks no
    longer indexed (the embedding cache keeps them for the builder's own edits and model switches)."""
    db = sqlite3.connect(str(meta), isolation_level=None)
    try:
        # Deleted rows' bytes are zeroed, not left in free pages (VACUUM drops free pages too).
        db.execute("PRAGMA secure_delete=ON")
        row = db.execute("SELECT value FROM state WHERE key='embedder'").fetchone()
        model = json.loads(row[0]).get("weights_sha256") if row else None
        db.execute("DELETE FROM embed_cache WHERE model IS NOT ? "
                   "OR content_hash NOT IN (SELECT content_hash FROM chunks)", (model,))
        # The builder's machine: its absolute root, and which files it skipped (names of secret files).
        db.execute("DELETE FROM state WHERE key IN ('root', 'recovered', 'recovered_rebuilt', 'snapshot_refused')")
        db.execute("DELETE FROM skipped")
        # An index from before the table has none (the snapshot's schema is the builder's own).
        if db.execute("SELECT 1 FROM sqlite_master WHERE name='skipped_seen'").fetchone():
            db.execute("DELETE FROM skipped_seen")
        merge_fts_tables(db)  # FTS5 keeps a removed line's terms in old segments until a merge
        db.execute("VACUUM")
    finally:
        db.close()


def _manifest_facts(meta_path: Path) -> dict[str, Any]:
    db = sqlite3.connect(_ro_uri(meta_path), uri=True)
    try:
        state = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM state")}
        files = db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        if db.execute("SELECT 1 FROM sqlite_master WHERE name='unembedded'").fetchone():
            vectors = chunks - db.execute("SELECT COUNT(*) FROM unembedded").fetchone()[0]
        else:  # an index from before the table (stores/meta.py UNEMBEDDED)
            vectors = db.execute("SELECT COUNT(*) FROM chunks WHERE embedded=1").fetchone()[0]
        # One digest of every (path, content hash): two snapshots of the same tree say the same.
        h = hashlib.sha256()
        for path, digest in db.execute("SELECT path, hash FROM files ORDER BY path"):
            h.update(f"{path}\0{digest}\n".encode())
    finally:
        db.close()
    return {"state": state, "counts": {"files": files, "chunks": chunks, "vectors": vectors},
            "content": h.hexdigest()}


def _refuse_special(out: Path) -> None:
    """Only a regular file (or nothing) at ``out`` is replaced: the rename over ``--out /dev/null`` as root
    replaced the device node itself with the snapshot (a security audit, session 26), a FIFO the same way."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise SnapshotError(f"--out {out} exists and is not a regular file (a device, FIFO, socket or link); "
                            "name a file to write")


def check_out(out: Path) -> Path:
    """``out`` resolved, or why no snapshot can be written there (before any work is done for it)."""
    out = Path(out).resolve()
    if out.is_dir():
        raise SnapshotError(f"--out {out} is a folder; name the snapshot file to write")
    if not out.parent.is_dir():
        # Made on the way, a typo in a CI job's path wrote the snapshot somewhere no one looks (`/nonexist/dir` was
        # created as root; a team newcomer, session 42). `eval --out` refuses the same.
        raise SnapshotError(f"the folder of {out} does not exist; create it first")
    return out


def create(root: Path, index_dir: Path, writer: WriterLock, settings: Settings, index_format: int,
           out: Path) -> dict[str, Any]:
    """Write the index at ``index_dir`` (of workspace ``root``) to ``out``; returns the header.

    The stores are copied under the writer lock (no run writes while they are read); the archive is
    written after it is released. ``out`` appears only complete (written beside it, then renamed)."""
    out = check_out(out)
    _refuse_special(out)
    # (SnapshotError is a ValueError: a try/except around relative_to() once swallowed this refusal.)
    if out.is_relative_to(Path(root).resolve()):
        raise SnapshotError(f"the snapshot {out} would be written inside the workspace {root}; write it elsewhere "
                            "(an index holds the text of every indexed file)")
    stage = index_dir / f".snapshot-out-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(mode=0o700)
    try:
        writer.acquire(wait=True)
        try:
            _copy_sqlite(index_dir / "meta.sqlite", stage / "meta.sqlite")
        finally:
            writer.release()
        _prune(stage / "meta.sqlite")
        facts = _manifest_facts(stage / "meta.sqlite")
        if not facts["state"].get("lexical_ready") or facts["state"].get("grams_upto") is not None \
                or facts["state"].get("filedocs_fts_owed"):
            # (grams_upto: the trigram index lacks chunks a stopped run wrote; a loaded copy would lack them too;
            # filedocs_fts_owed: so does the file documents' search index, stores/filedocs.FTS_OWED)
            raise SnapshotError("the index is not complete (its last run stopped early); run `delphi index` first")
        members: dict[str, dict[str, Any]] = {}
        for p in sorted(stage.rglob("*")):
            if p.is_file():
                members[PREFIX + p.relative_to(stage).as_posix()] = {"size": p.stat().st_size, "sha256": _sha256(p)}
        header = {
            "magic": MAGIC, "version": VERSION, "created": time.time(),
            "workspace": {"name": root.name, "head": git_head(root)},
            "built": built_with(settings, index_format).as_dict(),
            "embedder": facts["state"].get("embedder"),
            "counts": facts["counts"], "content": facts["content"],
            "members": members,
        }
        data = json.dumps(header, indent=1, sort_keys=True).encode()
        tmp = out.with_name(f".{out.name}.part-{os.getpid()}")
        try:
            # 0600 from the start (the snapshot holds the workspace's text), never through a file or
            # link already at that name (O_EXCL, O_NOFOLLOW).
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise SnapshotError(f"{tmp} is in the way (a file or link at the snapshot's partial name); "
                                "remove it and try again") from None
        try:
            with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz", compresslevel=COMPRESS_LEVEL,
                                                          format=tarfile.PAX_FORMAT) as tar:
                info = tarfile.TarInfo(HEADER)
                info.size, info.mtime, info.mode = len(data), int(header["created"]), 0o600
                tar.addfile(info, _bytes(data))
                for name in members:
                    p = stage / name[len(PREFIX):]
                    info = tarfile.TarInfo(name)
                    info.size, info.mtime, info.mode = p.stat().st_size, int(header["created"]), 0o600
                    with p.open("rb") as f:
                        tar.addfile(info, f)
            _refuse_special(out)  # again: the rename would replace whatever is there by now
            tmp.replace(out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        header["bytes"] = out.stat().st_size
        return header
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _bytes(data: bytes) -> IO[bytes]:
    import io

    return io.BytesIO(data)


def _member_path(name: str) -> str:
    """The store-relative path of an archive member, or SnapshotError for anything that could land
    outside the staging folder or is not a store's file."""
    if not name.startswith(PREFIX) or "\\" in name or "\0" in name:
        raise SnapshotError(f"the snapshot holds an unexpected member {name!r}; refused")
    p = PurePosixPath(name[len(PREFIX):])
    if p.is_absolute() or not p.parts or any(part in ("", ".", "..") or not _NAME.match(part) for part in p.parts):
        raise SnapshotError(f"the snapshot holds a member whose path escapes its folder ({name!r}); refused")
    if p.as_posix() not in STORES:  # exactly a store's file: not `meta.sqlite/x`, not Whoosh's or Chroma's
        raise SnapshotError(f"the snapshot holds {name!r}, which is not part of an index; refused")
    return p.as_posix()


class _CappedInfo(tarfile.TarInfo):
    """A tar member whose extension header (GNU long name or link, pax) is refused before tarfile
    reads it whole into memory: a small gzip can claim a header of hundreds of MiB."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:  # type: ignore[override]
        if self.type in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                         tarfile.SOLARIS_XHDTYPE) and self.size > EXT_HEADER_MAX:
            raise SnapshotError(f"the snapshot holds a tar extension header of {self.size:,} bytes "
                                f"(at most {EXT_HEADER_MAX:,}); refused")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


def _open(file: Path) -> tarfile.TarFile:
    return tarfile.open(file, "r|gz", tarinfo=_CappedInfo)


def read_header(file: Path) -> dict[str, Any]:
    """The header alone (``delphi snapshot load`` checks it before reading on)."""
    try:
        with _open(file) as tar:
            first = tar.next()
            return _header(tar, first)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise SnapshotError(f"no snapshot file at {file}") from None
        raise SnapshotError(f"{file} is not a readable snapshot (corrupt or truncated: {e})") from None


def _header(tar: tarfile.TarFile, first: tarfile.TarInfo | None) -> dict[str, Any]:
    if first is None or first.name != HEADER or not first.isreg() or first.size > HEADER_MAX:
        raise SnapshotError("not a Delphi snapshot (its first member is not delphi-snapshot.json)")
    f = tar.extractfile(first)
    assert f is not None
    try:
        header = json.loads(f.read())
    except ValueError:
        raise SnapshotError("the snapshot's header is not valid JSON (corrupt)") from None
    if not isinstance(header, dict) or header.get("magic") != MAGIC:
        raise SnapshotError("not a Delphi snapshot (its header lacks the magic word)")
    if header.get("version") != VERSION:
        raise SnapshotError(f"snapshot format version {header.get('version')!r}; this Delphi reads version {VERSION}")
    members = header.get("members")
    if not isinstance(members, dict) or not isinstance(header.get("workspace"), dict) or not all(
            isinstance(v, dict) and type(v.get("size")) is int and v["size"] >= 0
            and isinstance(v.get("sha256"), str) for v in members.values()):
        raise SnapshotError("the snapshot's header does not list its members properly (corrupt)")
    # Each field the loader reads has its type, or the file is refused (not a traceback later).
    built, emb, ws, counts = header.get("built"), header.get("embedder"), header["workspace"], header.get("counts")
    if (not isinstance(built, dict) or not (emb is None or isinstance(emb, dict))
            or not isinstance(counts, dict) or not all(type(v) is int for v in counts.values())
            or type(header.get("created")) not in (int, float) or not isinstance(header.get("content"), str)
            or not all(v is None or isinstance(v, str) for v in (ws.get("name"), ws.get("head")))):
        raise SnapshotError("the snapshot's header has fields of the wrong type (corrupt); refused")
    return header


def refusals(header: dict[str, Any], here: Built, serving: dict[str, Any] | None) -> list[str]:
    """Why this machine cannot use the snapshot (empty: it can). ``serving``: the identity of the
    embedding model this machine's settings load, or None when vectors are off here."""
    out: list[str] = []
    built = header.get("built") or {}
    words = {"index_format": "engine index format", "parser_version": "chunker/parser version",
             "manifest_schema": "manifest schema", "lexical_schema": "lexical schema",
             "chunk_chars": "chunk size (setting chunk_chars)"}
    for key, what in words.items():
        if built.get(key) != getattr(here, key):
            # What to do, not only what differs (an upgrade newcomer, session 37: every snapshot a CI published
            # before an upgrade is refused): the same setting, or a snapshot built by the same Delphi.
            todo = ("set `chunk_chars` to the same, or build the snapshot with this one" if key == "chunk_chars"
                    else "build the snapshot again with this version of Delphi (or index here: `delphi index`)")
            out.append(f"{what}: the snapshot has {built.get(key)!r}, this machine {getattr(here, key)!r}; {todo}")
    stored = header.get("embedder")
    if serving is not None and stored is not None and stored != serving:
        out.append(f"embedding model: the snapshot was built with {stored.get('name')} "
                   f"(sha256 {str(stored.get('weights_sha256'))[:12]}, dim {stored.get('dim')}), this machine's "
                   f"settings load {serving.get('name')} (sha256 {str(serving.get('weights_sha256'))[:12]}, "
                   f"dim {serving.get('dim')}); set `embedder` to the same model, or build the snapshot with this one")
    return out


def load(file: Path, root: Path, index_dir: Path, settings: Settings, index_format: int,
         serving: dict[str, Any] | None, only_if_new: bool = False) -> dict[str, Any] | None:
    """Replace the index at ``index_dir`` with the snapshot ``file``; returns what was loaded.

    Raises :class:`SnapshotError` (the existing index untouched) when the snapshot was built with
    something else than this machine would build with, or is corrupt, truncated or hostile."""
    had_index = (Path(index_dir) / "meta.sqlite").exists()
    try:
        return _load(Path(file), root, Path(index_dir), settings, index_format, serving, only_if_new)
    except SnapshotError as e:
        if had_index or KEPT not in str(e):
            raise
        # `delphi index --snapshot` on a workspace with no index: there was no index to keep (a newcomer,
        # session 31, read "the existing index is unchanged" and looked for one).
        raise SnapshotError(str(e).replace(KEPT, "no index was made")) from None


KEPT = "the existing index is unchanged"


def _load(file: Path, root: Path, index_dir: Path, settings: Settings, index_format: int,
          serving: dict[str, Any] | None, only_if_new: bool) -> dict[str, Any] | None:
    if not file.is_file():
        raise SnapshotError(f"no snapshot file at {file}")
    header = read_header(file)
    why = refusals(header, built_with(settings, index_format), serving)
    if why:
        raise SnapshotError("snapshot refused, the existing index is unchanged: " + "; ".join(why))
    index_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    recover(index_dir)
    if not only_if_new:  # refused now rather than after unpacking (the swap checks again)
        os.close(_take_open_exclusive(index_dir))
    # Sizes are checked member by member as they are read; here, that they fit at all (a small gzip
    # can claim a huge unpacked size, and a full disk mid-load would help no one), with a margin for
    # the Whoosh index rebuilt beside the manifest and the SQLite journal.
    need = sum(m["size"] for m in header["members"].values())
    free = shutil.disk_usage(index_dir).free
    if need + need // 10 + (100 << 20) > free:
        raise SnapshotError(f"the snapshot unpacks to {need / 2**20:,.0f} MiB (loading it needs "
                            f"{(need + need // 10 + (100 << 20)) / 2**20:,.0f} MiB with the lexical index rebuilt "
                            f"beside it) but {index_dir} has {free / 2**20:,.0f} MiB free; the existing index is unchanged")
    stage = index_dir / f".snapshot-in-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(mode=0o700)
    try:
        _extract(file, header, stage)
        # Embedded Chroma starts empty here and is refilled by the next full index (engine._repair); a
        # server's collection may hold the vectors already (same chunk ids), and the engine's check
        # refills it if it does not.
        _adopt(stage / "meta.sqlite", root, file, header, refill=settings.chroma_url is None)
        _rebuild_lexical(stage, root, settings)
        if not _swap(index_dir, stage, settings.chroma_url is None, only_if_new):
            return None  # another process made an index meanwhile (checked under the writer lock)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {"header": header, "vectors": "on the server (checked by the next index)" if settings.chroma_url else
            "exact search from the embedding cache now; Chroma filled from it by the next `delphi index`",
            "note": unknown_commit(root, header)}


def unknown_commit(root: Path, header: dict[str, Any]) -> str | None:
    """What to say when the snapshot was made at a commit this repository does not hold: black's snapshot loaded
    into chi without a word (a team newcomer, session 42). Loaded all the same (a commit not fetched yet is common
    and harmless: the next run re-indexes what differs), but said. None when it holds it, or cannot be asked."""
    head = (header.get("workspace") or {}).get("head")
    if not isinstance(head, str) or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head) or not (root / ".git").exists():
        return None
    res = ask_git(root, "cat-file", "-e", f"{head}^{{commit}}", mark_slow=False)
    if res is None or res.returncode == 0:
        return None
    name = (header.get("workspace") or {}).get("name") or "?"
    return (f"the snapshot was made at commit {head[:12]} of a folder named {name!r}, and this repository has no such "
            "commit (a snapshot of another repository, or of commits not fetched here): the next index run re-indexes "
            "every file that differs")


def _extract(file: Path, header: dict[str, Any], stage: Path) -> None:
    members: dict[str, dict[str, Any]] = header["members"]
    seen: set[str] = set()
    try:
        with _open(file) as tar:
            _header(tar, tar.next())
            while (m := tar.next()) is not None:  # not `for m in tar`: it starts again at the header
                if not m.isreg():  # links, devices, fifos, folders: whatever their name
                    kind = "link" if m.issym() or m.islnk() else "folder" if m.isdir() else "special file"
                    raise SnapshotError(f"the snapshot holds a {kind} ({m.name!r}); refused")
                rel = _member_path(m.name)
                want = members.get(m.name)
                if want is None or m.name in seen:
                    raise SnapshotError(f"the snapshot holds {m.name!r}, which its header does not list; refused")
                if m.size != want.get("size"):
                    raise SnapshotError(f"{m.name} is {m.size} bytes but the header says {want.get('size')} (corrupt)")
                seen.add(m.name)
                dst = stage / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None
                h = hashlib.sha256()
                with open(dst, "xb") as out:  # "x": never through an existing file or link
                    while block := src.read(_CHUNK):
                        h.update(block)
                        out.write(block)
                if h.hexdigest() != want.get("sha256"):
                    raise SnapshotError(f"{m.name} does not match its checksum (corrupt)")
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise SnapshotError(f"{file} is corrupt or truncated ({type(e).__name__}: {e}); "
                            "the existing index is unchanged") from None
    except OSError as e:  # a member where a folder should be, a full disk: refused, not a traceback
        raise SnapshotError(f"{file} could not be unpacked ({type(e).__name__}: {e}); "
                            "the existing index is unchanged") from None
    missing = sorted(set(members) - seen)
    if missing:
        raise SnapshotError(f"the snapshot lacks {len(missing)} member(s) its header lists, e.g. {missing[0]} "
                            "(truncated); the existing index is unchanged")
    if not (stage / "meta.sqlite").is_file():
        raise SnapshotError("the snapshot holds no manifest; refused")


def _check_schema(meta: Path) -> None:
    """Triggers and views run inside our own writes: the staged manifest may hold only those this
    Delphi makes (the manifest's and the file documents'), word for word. Tables and indexes run
    nothing and may differ (an older or newer manifest is the index format's business)."""
    import tempfile

    from ..stores.filedocs import FileDocs
    from ..stores.meta import MetaStore

    def code(path: Path) -> set[tuple[str, str, str]]:
        db = sqlite3.connect(_ro_uri(path), uri=True)
        try:
            db.execute("PRAGMA trusted_schema=OFF")
            return {(t, n, " ".join((sql or "").split())) for t, n, sql in
                    db.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'view')")}
        finally:
            db.close()

    try:
        got = code(meta)
    except sqlite3.DatabaseError as e:
        raise SnapshotError(f"the snapshot's manifest does not open ({e})") from None
    with tempfile.TemporaryDirectory() as tmp:
        ref = MetaStore(Path(tmp) / "meta.sqlite")
        FileDocs(ref).ensure()
        ref.close()
        want = code(Path(tmp) / "meta.sqlite")
    extra = sorted(f"{t} {n}" for t, n, _sql in got - want)
    if extra:
        raise SnapshotError(f"the snapshot's manifest holds triggers or views this Delphi does not make "
                            f"({', '.join(extra[:5])}); refused")


def _adopt(meta: Path, root: Path, file: Path, header: dict[str, Any], refill: bool) -> None:
    """Make the staged manifest this machine's: no mtime is trusted (every file is hashed once by the
    next run), the root is this workspace, and the builder's machine-specific notes go. The schema is
    checked to be the one this Delphi writes (a file from elsewhere could carry triggers or views of
    its own, which would run inside our writes)."""
    _check_schema(meta)
    try:
        db = sqlite3.connect(str(meta), isolation_level=None)
        db.execute("PRAGMA trusted_schema=OFF")
    except sqlite3.DatabaseError as e:
        raise SnapshotError(f"the snapshot's manifest does not open ({e})") from None
    try:
        # Every page: a snapshot built on a failing disk (or made so) with a header that matches its bytes was
        # loaded, and every question after it died "database disk image is malformed" (a hostile-input audit,
        # session 46). A load reads the whole file anyway (its checksum).
        check = db.execute("PRAGMA quick_check(1)").fetchone()
        if not check or check[0] != "ok":
            said = " ".join(str(check and check[0]).split())
            raise SnapshotError(f"the snapshot's manifest is damaged (SQLite's check: {said}); refused, the index is "
                                "untouched")
        _check_content(db)
        db.execute("BEGIN")
        db.execute("UPDATE files SET mtime_ns = -1")
        # Nor the builder's skipped list (a crafted one named ../../etc/passwd for a diagnostic) or its size and
        # mtime of files skipped for their bytes (another machine's stat could hide a file): the next run redoes
        # both (review, session 26).
        db.execute("DELETE FROM skipped")
        if db.execute("SELECT 1 FROM sqlite_master WHERE name='skipped_seen'").fetchone():
            db.execute("DELETE FROM skipped_seen")
        if refill:  # the engine refills Chroma from the embedding cache at its next full index
            db.execute("INSERT OR REPLACE INTO state VALUES ('vectors_refill', 'true')")
        db.execute("DELETE FROM state WHERE key IN ('recovered', 'recovered_rebuilt', 'snapshot_refused')")
        db.execute("INSERT OR REPLACE INTO state VALUES ('root', ?)", (json.dumps(str(root)),))
        # Until a full run here has compared every file with this checkout (answers and health say so meanwhile: the
        # builder's files, a teammate's deleted or untracked ones, answered as if here; a team newcomer, session 42).
        db.execute("INSERT OR REPLACE INTO state VALUES ('snapshot_unchecked', 'true')")
        db.execute("INSERT OR REPLACE INTO state VALUES ('snapshot', ?)", (json.dumps({
            "file": file.name, "created": header.get("created"), "head": header["workspace"].get("head"),
            "content": header.get("content"), "loaded": time.time()}),))
        db.execute("COMMIT")
        db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.DatabaseError as e:
        raise SnapshotError(f"the snapshot's manifest is damaged ({e})") from None
    finally:
        db.close()


# Every column of the manifest that names a workspace file (a table this Delphi does not make is no concern:
# nothing reads it). A snapshot is a file from elsewhere: its rows are checked like its tar members.
_PATH_COLUMNS = (("files", "path"), ("chunks", "path"), ("symbols", "path"), ("imports", "path"),
                 ("cochange", "a"), ("cochange", "b"), ("changes", "path"), ("file_docs", "path"))


def unsafe_path(p: Any) -> bool:
    """Not a plain workspace-relative path: absolute, with ``..``/``.``/empty parts, or holding a NUL."""
    return (not isinstance(p, str) or not p or p.startswith("/") or "\x00" in p
            or any(part in ("", ".", "..") for part in p.split("/")))


def _check_content(db: sqlite3.Connection) -> None:
    """Refuse a manifest whose rows name files outside the workspace (``../../etc/passwd``, ``/etc/shadow``:
    loaded, they were answered with ``file:///ws/../../etc/passwd`` links until the next index; a security
    audit, session 26) or whose state the engine cannot read (a value that is not JSON made every command
    a traceback)."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for table, col in _PATH_COLUMNS:
        if table not in tables:
            continue
        for (p,) in db.execute(f"SELECT DISTINCT {col} FROM {table}"):  # noqa: S608 (names are ours)
            if unsafe_path(p):
                raise SnapshotError(f"the snapshot's manifest names a file outside the workspace ({table}.{col} "
                                    f"{str(p)[:80]!r}); refused")
    if "commit_messages" in tables:
        for (files,) in db.execute("SELECT files FROM commit_messages"):
            try:
                named = json.loads(files)
            except (TypeError, ValueError):
                named = None
            if not isinstance(named, list) or any(unsafe_path(p) for p in named):
                raise SnapshotError("the snapshot's manifest has a commit naming files outside the workspace "
                                    "or not as a list; refused")
    from ..stores.meta import unreadable_state

    bad = unreadable_state(db)
    if bad is not None:
        raise SnapshotError(f"the snapshot's manifest state {bad[:40]!r} is not readable; refused")
    # The manifest's own word over the header's: a header saying this Delphi's chunker over a manifest another one
    # cut was loaded, and the next run called the index a newer Delphi's (a team newcomer, session 42).
    row = db.execute("SELECT value FROM state WHERE key='parser_version'").fetchone()
    if row is not None and json.loads(row[0]) != PARSER_VERSION:
        raise SnapshotError(f"the snapshot's manifest was cut by chunker version {json.loads(row[0])!r}, this Delphi's "
                            f"is {PARSER_VERSION} (its header says otherwise); refused")


def _rebuild_lexical(stage: Path, root: Path, settings: Settings) -> None:
    """Build the Whoosh index from the staged manifest (no Whoosh file travels: Whoosh unpickles its
    TOC and segments). The engine's own repair path, run here so the swap installs a whole index."""
    from ..stores.lexical import open_lexical
    from ..stores.meta import MetaStore
    from .pipeline import Indexer

    meta = MetaStore(stage / "meta.sqlite")
    lexical = open_lexical(stage, settings.lexical_store)  # this machine's store, whatever the maker's was
    try:
        Indexer(root, settings, meta, lexical, None, None).rebuild_lexical()
        meta.set_state("lexical_store", settings.lexical_store)
    finally:
        lexical.close()
        meta.close()
    for side in ("meta.sqlite-wal", "meta.sqlite-shm"):  # folded in at the last close; none may be left
        if (stage / side).exists():
            raise SnapshotError(f"the staged manifest left {side} behind; refused")


def _dead(name: str, prefix: str) -> bool:
    """A staging or moved-aside folder of a process that no longer runs (killed mid-load or mid-create)."""
    try:
        pid = int(name[len(prefix):])
    except ValueError:
        return False
    if pid == os.getpid():
        return False
    return running(pid) is False


def recover(index_dir: Path) -> list[str]:
    """Undo what a killed load or create left (kill -9 mid-swap): an index whose manifest is gone gets
    the stores a dead loader moved aside back; dead processes' staging folders go. Under the writer
    lock, skipped when another process holds it. Returns what was done (for the caller to say)."""
    if not index_dir.is_dir():
        return []
    old = [p for p in index_dir.glob(".snapshot-old-*") if p.is_dir() and _dead(p.name, ".snapshot-old-")]
    stale = [p for pre in (".snapshot-in-", ".snapshot-out-") for p in index_dir.glob(pre + "*")
             if p.is_dir() and _dead(p.name, pre)]
    if not old and not stale:
        return []
    lock = WriterLock(index_dir)
    if not lock.try_acquire():
        return []
    done: list[str] = []
    try:
        for folder in old:
            # _swap moves the old manifest out after the other stores and the new one in last.
            here, aside = (index_dir / "meta.sqlite").exists(), (folder / "meta.sqlite").exists()
            if aside and not here:
                # The old manifest went out, the new one never came in: the new Whoosh folder (if it
                # got in) goes, and the old index comes back whole.
                for lex in LEXICAL_FOLDERS.values():
                    shutil.rmtree(index_dir / lex, ignore_errors=True)
            back = [n for n in sorted(os.listdir(folder)) if not (aside and here)
                    and (aside or not (index_dir / n).exists())]
            for n in back:
                dst = index_dir / n
                if dst.is_dir() and not dst.is_symlink():
                    shutil.rmtree(dst)
                elif dst.exists() or dst.is_symlink():
                    dst.unlink()
                (folder / n).rename(dst)
            if back:
                done.append(f"restored {', '.join(back)} that a killed snapshot load had moved aside")
            shutil.rmtree(folder, ignore_errors=True)
        for folder in stale:
            shutil.rmtree(folder, ignore_errors=True)
            done.append(f"removed {folder.name}, left by a killed snapshot run")
    finally:
        lock.release()
    return done


def hold_open(index_dir: Path) -> IO[bytes]:
    """Say this process has the index at ``index_dir`` open (a shared flock, released when the returned
    file is closed or collected); a snapshot load refuses while anyone holds it."""
    fd = os.open(index_dir / OPEN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only for a load's swap (milliseconds)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", buffering=0)


def try_open_exclusive(index_dir: Path) -> int | None:
    """The open lock taken exclusively, without waiting (its fd; closing it releases the lock), or None while any
    process has the index open (:func:`hold_open`)."""
    fd = os.open(index_dir / OPEN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    return fd if take_or_close(fd) else None


def _take_open_exclusive(index_dir: Path) -> int:
    fd = try_open_exclusive(index_dir)
    if fd is None:
        raise SnapshotError(f"the index at {index_dir} is open in a Delphi process (a language server, "
                            "`delphi serve`, an MCP server or an Engine): stop it, then load; the existing "
                            "index is unchanged")
    return fd


def _swap(index_dir: Path, stage: Path, local_chroma: bool, only_if_new: bool) -> bool:
    """Under the writer lock, put the staged stores in place of the old ones; the old ones are moved
    aside first and moved back if anything fails, so an index is always whole. ``only_if_new``: do
    nothing (False) when an index is there by the time the lock is held."""
    lock = WriterLock(index_dir)
    lock.acquire(wait=True)
    # The old Chroma folder describes the old manifest: it goes too (refilled from the cache).
    # The manifest goes out after the other stores (recover() reads the order back after a kill -9).
    names = [*LEXICAL_FOLDERS.values()] + (["chroma"] if local_chroma else []) + ["meta.sqlite", "meta.sqlite-wal", "meta.sqlite-shm"]
    try:
        if only_if_new and (index_dir / "meta.sqlite").exists():
            return False
        opened = _take_open_exclusive(index_dir)
        old = index_dir / f".snapshot-old-{os.getpid()}"
        try:
            shutil.rmtree(old, ignore_errors=True)
            old.mkdir(mode=0o700)
            _move(index_dir, stage, old, names)
        finally:
            os.close(opened)  # releases the flock: engines may open the new index
        shutil.rmtree(old, ignore_errors=True)
        return True
    finally:
        lock.release()


def _move(index_dir: Path, stage: Path, old: Path, names: list[str]) -> None:
    """The old stores out to ``old``, the staged ones in; all moved back if anything fails."""
    moved_out: list[str] = []
    moved_in: list[str] = []
    try:
        for n in names:
            if (index_dir / n).exists():
                (index_dir / n).rename(old / n)
                moved_out.append(n)
        for n in (*LEXICAL_FOLDERS.values(), "meta.sqlite"):  # the manifest last: its presence says the swap finished
            if (stage / n).exists():
                (stage / n).rename(index_dir / n)
                moved_in.append(n)
    except BaseException:
        for n in moved_in:
            p = index_dir / n
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        for n in moved_out:
            (old / n).rename(index_dir / n)
        raise
