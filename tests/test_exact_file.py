"""The exact matrix kept for the next process as mapped sections (stores/exact_file.py): what a second
process answers from it equals what the manifest gives, and a file that is damaged, cut short, unsigned,
stale or of the old format is never used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from delphi_ls.stores.exact import ExactVectors
from delphi_ls.stores.exact_file import FILE, LEGACY_FILE, ExactFile

KEY = ("manifest", "version", 7, "sha", "digest")


def _vectors(n: int = 40, dim: int = 8, seed: int = 3) -> ExactVectors:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n // 2, dim)).astype(np.float32)
    # Every vector twice (identical chunks share a row), paths shared by several chunks, one badly named.
    rows = [(f"c{i:03d}", f"src/f{i % 7}.py" if i % 5 else "src/b\udcffad name.py", base[i % (n // 2)].tobytes())
            for i in range(n)]
    return ExactVectors.from_rows(rows, dim)


def _same(a: ExactVectors, b: ExactVectors) -> None:
    assert len(a) == len(b) and sorted(a.ids) == sorted(b.ids)
    for q in np.random.default_rng(1).standard_normal((5, a.matrix.shape[1])):
        assert a.query(q, 12) == b.query(q, 12)


def test_saved_then_loaded_answers_the_same_and_is_mapped(tmp_path: Path) -> None:
    ev = _vectors()
    f = ExactFile(tmp_path)
    assert f.save(KEY, ev)
    got = ExactFile(tmp_path).load(KEY)
    assert got is not None
    _same(ev, got)
    assert isinstance(got._blocks[0], np.memmap) and not got._blocks[0].flags.writeable
    assert got.get_vector("c001") is not None and np.allclose(got.get_vector("c001"), ev.get_vector("c001"))
    assert ExactFile(tmp_path).load(("manifest", "other", 7, "sha", "digest")) is None  # another state


def test_a_patched_matrix_with_dead_rows_round_trips(tmp_path: Path) -> None:
    ev = _vectors()
    fresh = [("n001", "src/f1.py", np.ones(8, np.float32).tobytes()), ("n002", "src/new.py", np.arange(8, dtype=np.float32).tobytes())]
    patched = ev.replaced({"src/f1.py"}, fresh, 8)
    assert patched._alive is not None and len(patched._blocks) == 2
    f = ExactFile(tmp_path)
    assert f.save(KEY, patched)
    got = f.load(KEY)
    assert got is not None
    _same(patched, got)
    again = got.replaced({"src/f2.py"}, [], 8)  # a loaded (mapped, read-only) matrix is patched as any
    _same(again, patched.replaced({"src/f2.py"}, [], 8))


@pytest.mark.parametrize("damage", ["cut", "section", "mac", "index", "head", "zeroed", "sizes"])
def test_a_damaged_file_is_not_used(tmp_path: Path, damage: str) -> None:
    f = ExactFile(tmp_path)
    assert f.save(KEY, _vectors())
    raw = bytearray(f.path.read_bytes())
    mac, head, rest = raw.split(b"\n", 2)
    info = json.loads(head)
    if damage == "cut":
        raw = raw[: len(raw) - 40]  # the matrix's last rows missing
    elif damage == "section":
        at = len(mac) + 1 + len(head) + 1 + 2
        raw[at] ^= 0x01  # a chunk id changed: the signature no longer holds
    elif damage == "mac":
        raw[0:4] = b"0000" if raw[0:4] != b"0000" else b"1111"
    elif damage == "index":
        # Re-signed by a forger who has no key cannot pass; here the head claims more rows than exist, signed
        # by this user's own key (as a bug writing it would), and the load must still refuse it.
        import hmac

        from delphi_ls.stores.view_cache import _secret
        info["rows"] = info["rows"] + 10**6
        head = json.dumps(info).encode()
        sections = rest[: sum(info["sizes"])]
        m = hmac.new(_secret(), head + b"\n", "sha256")
        m.update(sections)
        raw = bytearray(m.hexdigest().encode() + b"\n" + head + b"\n" + rest)
    elif damage == "head":
        raw = bytearray(mac + b"\n" + b"{not json\n" + rest)
    elif damage == "zeroed":  # the matrix's bytes lost (a power loss after the rename): same size, all zero
        matrix_bytes = info["rows"] * info["dim"] * 4
        raw[len(raw) - matrix_bytes:] = bytes(matrix_bytes)
    elif damage == "sizes":  # a head claiming sections larger than the file: refused before reading them
        info["sizes"][0] = 1 << 40
        raw = bytearray(mac + b"\n" + json.dumps(info).encode() + b"\n" + rest)
    f.path.write_bytes(bytes(raw))
    assert f.load(KEY) is None


def test_a_link_or_a_fifo_in_its_place_is_not_read(tmp_path: Path) -> None:
    import os

    other = tmp_path / "elsewhere"
    other.mkdir()
    f = ExactFile(other)
    assert f.save(KEY, _vectors())
    (tmp_path / FILE).symlink_to(other / FILE)  # a signed file, but reached through a link: not followed
    assert ExactFile(tmp_path).load(KEY) is None
    (tmp_path / FILE).unlink()
    os.mkfifo(tmp_path / FILE)  # a FIFO would block the load for ever
    assert ExactFile(tmp_path).load(KEY) is None


def test_the_old_pickle_is_removed_and_never_read(tmp_path: Path) -> None:
    (tmp_path / LEGACY_FILE).write_bytes(b"\x80\x05 a pickle that must not be loaded")
    ExactFile(tmp_path)
    assert not (tmp_path / LEGACY_FILE).exists() and not (tmp_path / FILE).exists()


def test_an_empty_matrix_round_trips(tmp_path: Path) -> None:
    empty = ExactVectors.from_rows([], 8)
    f = ExactFile(tmp_path)
    assert f.save(KEY, empty)
    got = f.load(KEY)
    assert got is not None and len(got) == 0 and got.query(np.ones(8), 5) == []
