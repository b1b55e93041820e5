"""Two versions of Delphi on one index (session 31): an editor or daemon of an older version still running after
an upgrade writes files with its own chunker; the current one must parse them again, and say so meanwhile."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from delphi_ls import Engine
from delphi_ls.indexing.pipeline import PARSER_VERSION
from tests.conftest import copy_fixture

TARGET = "shipyard/retry.py"
STALE = 'AWS_SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # cut by an older chunker\n'


def _written_by_an_older_delphi(meta: Path, path: str) -> None:
    """What an older Delphi's save of ``path`` does to the manifest, as its code writes it: the file's chunks
    deleted and written again (here: text its chunker did not redact), then the file's row inserted again."""
    db = sqlite3.connect(str(meta), isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        rows = db.execute("SELECT id, path, ord, start_line, end_line, symbols, kind, content_hash, text, embedded "
                          "FROM chunks WHERE path=? ORDER BY ord", (path,)).fetchall()
        db.execute("DELETE FROM chunks WHERE path=?", (path,))
        for r in rows:
            db.execute("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)", (*r[:8], STALE + r[8], r[9]))
        db.execute("INSERT OR REPLACE INTO files SELECT * FROM files WHERE path=?", (path,))
        db.execute("COMMIT")
    finally:
        db.close()


def _texts(eng: Engine, path: str) -> str:
    return "".join(r[0] for r in eng.meta.db.execute("SELECT text FROM chunks WHERE path=?", (path,)))


def test_a_file_another_delphi_wrote_is_parsed_again_by_the_next_full_run_and_health_says_so(tmp_path: Path):
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        eng.index()
        assert not eng.meta.parsed_by_other(PARSER_VERSION)
    _written_by_an_older_delphi(idx / "meta.sqlite", TARGET)
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        assert eng.meta.parsed_by_other(PARSER_VERSION) == {TARGET}
        assert "EXAMPLEKEY" in _texts(eng, TARGET)
        said = [p for p in eng.health()["problems"] if p["code"] == "older_parser"]
        assert said and TARGET in said[0]["message"], said
        rep = eng.index()  # nothing changed on disk: only that file is parsed again
        assert rep.files_indexed == 1 and not rep.errors
        assert "EXAMPLEKEY" not in _texts(eng, TARGET)
        assert not eng.meta.parsed_by_other(PARSER_VERSION)
        assert not [p for p in eng.health()["problems"] if p["code"] == "older_parser"]
        assert eng.index().files_indexed == 0


def test_an_index_from_before_the_per_file_record_is_not_parsed_again(tmp_path: Path):
    """An index made before the table existed: its files count as made by the parser its state names, so an
    upgrade costs nothing when that is this one's (and a full re-parse, as before, when it is not)."""
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        eng.index()
        n = eng.counts()["files"]
    db = sqlite3.connect(str(idx / "meta.sqlite"), isolation_level=None)
    db.executescript("DROP TRIGGER files_parsed_ai; DROP TRIGGER files_parsed_ad; DROP TABLE parsed;"
                     "DELETE FROM state WHERE key='parsed_seeded';")
    db.close()
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        assert eng.meta.db.execute("SELECT COUNT(*) FROM parsed").fetchone()[0] == n
        assert eng.index().files_indexed == 0
    db = sqlite3.connect(str(idx / "meta.sqlite"), isolation_level=None)
    db.executescript("DROP TRIGGER files_parsed_ai; DROP TRIGGER files_parsed_ad; DROP TABLE parsed;"
                     "DELETE FROM state WHERE key='parsed_seeded'; UPDATE state SET value='5' WHERE key='parser_version';")
    db.close()
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        said = [p for p in eng.health()["problems"] if p["code"] == "older_parser"]
        assert said and "chunker version 5" in said[0]["message"]
        assert eng.index().files_indexed == n
        assert not eng.meta.parsed_by_other(PARSER_VERSION)
    # A seed that did not happen (the table made, the seed's transaction refused): done at the next open.
    db = sqlite3.connect(str(idx / "meta.sqlite"), isolation_level=None)
    db.executescript("DELETE FROM parsed; DELETE FROM state WHERE key='parsed_seeded';")
    db.close()
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        assert not eng.meta.parsed_by_other(PARSER_VERSION) and eng.index().files_indexed == 0


def test_an_index_a_newer_delphi_wrote_is_not_parsed_back_and_health_says_how_to_go_back(tmp_path: Path):
    """An older server still running beside a newer one (or a downgrade): it re-parsed every file the newer one
    wrote, at each full pass, and the newer one re-parsed them back (session 37's upgrade newcomer). Now the older
    one indexes changed files only, keeps the index's version, says so, and `--rebuild` takes the index back."""
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    newer = PARSER_VERSION + 1
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        eng.index()
    db = sqlite3.connect(str(idx / "meta.sqlite"), isolation_level=None)
    db.execute("UPDATE state SET value=? WHERE key='parser_version'", (str(newer),))
    db.execute("UPDATE parsed SET version=?", (newer,))
    db.close()
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        said = [p for p in eng.health()["problems"] if p["code"] == "newer_parser"]
        assert said and f"chunker version {newer}" in said[0]["message"] and "--rebuild" in said[0]["message"]
        assert not [p for p in eng.health()["problems"] if p["code"] == "older_parser"]
        rep = eng.index()
        assert rep.files_indexed == 0 and not rep.errors, rep
        assert any("newer Delphi" in n for n in rep.notes), rep.notes
        assert eng.meta.get_state("parser_version") == newer
        (ws / TARGET).write_text((ws / TARGET).read_text() + "\n\ndef backoff_cap():\n    return 30\n")
        rep = eng.index()  # a changed file is indexed (with this chunker; the newer Delphi parses it once again)
        assert rep.files_indexed == 1
        assert eng.meta.get_state("parser_version") == newer
        assert eng.meta.parsed_by_other(newer) == {TARGET}
        assert eng.index(rebuild=True).files_indexed > 1  # the way back, as health says
        assert eng.meta.get_state("parser_version") == PARSER_VERSION
        assert not [p for p in eng.health()["problems"] if p["code"] in ("newer_parser", "older_parser")]


def test_a_new_index_first_written_by_a_run_of_named_files_records_its_chunker(tmp_path: Path):
    """An editor's save before the first full run (`only=[...]`) made an index with no chunker version: health then
    said "chunker version 1" and the next full run parsed every file again, saying why falsely (review, session
    38). A run of named files into an index holding others leaves the version to full runs."""
    ws = copy_fixture("shipyard", tmp_path / "ws")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(only=[TARGET])
        assert eng.meta.get_state("parser_version") == PARSER_VERSION
        assert not [p for p in eng.health()["problems"] if p["code"] == "older_parser"]
        rep = eng.index()
        assert not any("parsed again" in n for n in rep.notes), rep.notes
