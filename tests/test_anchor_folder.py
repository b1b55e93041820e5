"""Tests kept in a folder named after the file the question holds (koa's ``__tests__/response/`` for
``lib/response.js``, httpx's ``tests/models/`` for ``_models.py``): the ``anchor_folder`` branch."""

from __future__ import annotations

from pathlib import Path

from delphi_ls import Engine


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


WORKSPACE = {
    "lib/response.js": "module.exports = { set body(val) { this._body = val }, get status() { return 200 } }\n",
    "lib/request.js": "module.exports = { get header() { return this.req.headers } }\n",
    "__tests__/response/body.js": "const response = require('../../lib/response')\ntest('sets', () => {})\n",
    "__tests__/response/status.js": "const r = require('../../lib/response')\ntest('status', () => {})\n",
    "__tests__/request/header.js": "const request = require('../../lib/request')\ntest('header', () => {})\n",
    "pkg/_models.py": "class Model:\n    pass\n",
    "pkg/models_extra/__init__.py": "X = 1\n",
    "tests/models/test_fields.py": "def test_fields():\n    assert True\n",
    "tests/test_other.py": "def test_other():\n    assert True\n",
    "walk/mod.rs": "pub fn walk() {}\n",
    "tests/walk/deep.rs": "#[test]\nfn deep() {}\n",
}


def _folder_hits(eng: Engine, anchor: str) -> dict[str, str]:
    ans = eng.context("which tests cover this change?", anchors=[anchor], limit=20)
    return {r["path"]: r["why"] for r in ans["results"] if r["branches"].get("anchor_folder")}


def test_tests_in_a_folder_named_after_the_anchor_are_found_and_others_are_not(tmp_path: Path) -> None:
    _write(tmp_path, WORKSPACE)
    eng = Engine(tmp_path, index_dir=str(tmp_path / ".idx"))
    try:
        eng.index()
        hits = _folder_hits(eng, "lib/response.js")
        assert set(hits) == {"__tests__/response/body.js", "__tests__/response/status.js"}
        assert all("test folder named after response.js" in why for why in hits.values())
        # The leading underscore of a private module does not hide its folder of tests.
        assert set(_folder_hits(eng, "pkg/_models.py")) == {"tests/models/test_fields.py"}
        # A file that stands for its folder (`mod.rs`, `__init__.py`, `index.js`) is named by the folder.
        assert set(_folder_hits(eng, "walk/mod.rs")) == {"tests/walk/deep.rs"}
        # A test as the anchor brings no folder: the question is about that test itself.
        assert _folder_hits(eng, "__tests__/request/header.js") == {}
    finally:
        eng.close()
