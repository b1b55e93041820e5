"""A file the question names one letter off (issue 19, session 22).

A change titled "Fixed regisry-inl.h" (spdlog, dev_langs) edits ``include/spdlog/details/registry-inl.h``:
the name as typed matches no file, so the path branch found nothing and the file sat at rank 15 by its words.
The path branch now resolves a name no file has to the files one edit away (a letter dropped, added,
changed, or two swapped), when there are at most three of them; the ranker's "named" column counts them.
A frame's absolute path is never read this way: it names files outside the workspace. Real Whoosh, real
tree-sitter chunks, the shipped ranker.
"""

from __future__ import annotations

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval.context import _one_edit

FILES = {
    "include/log/details/registry-inl.h": "namespace log { void registry::drop_all() { loggers_.clear(); } }\n",
    "include/log/details/registry.h": "namespace log { class registry { public: void drop_all(); }; }\n",
    "include/log/details/os-inl.h": "namespace log { int os::pid() { return ::getpid(); } }\n",
    "src/socket_server.py": "def serve(port):\n    return port\n",
    "src/sockets.py": "def open_socket(host):\n    return host\n",
    # Files that share the question's other words, so words alone do not find the named file.
    **{f"include/log/sinks/fixed_sink{i}.h": f"// fixed sink {i}: the fixed header\nclass fixed_sink{i} {{}};\n"
       for i in range(12)},
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("misspelt")
    ws = root / "ws"
    for rel, text in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    with Engine(ws, index_dir=str(root / "idx"), vectors=False) as eng:
        assert not eng.index().errors
        yield eng


@pytest.mark.parametrize(("a", "b", "one"), [
    ("registry-inl.h", "regisry-inl.h", True),   # dropped
    ("main.py", "mian.py", True),                 # swapped
    ("config.go", "confog.go", True),             # changed
    ("util.rs", "utils.rs", True),                # added
    ("registry.h", "registry.h", False),          # the same name is no typo
    ("abcd.py", "badc.py", False),                # two edits
    ("handler.go", "handlers_test.go", False),
])
def test_one_edit(a: str, b: str, one: bool):
    assert _one_edit(a, b) is one and _one_edit(b, a) is one


def test_a_misspelt_name_finds_its_file_with_the_reason(engine: Engine):
    hits = engine.retrieve("Fixed regisry-inl.h").lists["path"]
    assert hits[0].path == "include/log/details/registry-inl.h"
    assert "spelt registry-inl.h" in hits[0].note
    ranked = [r["path"] for r in engine.context("Fixed regisry-inl.h", limit=5)["results"]]
    assert ranked[0] == "include/log/details/registry-inl.h"


def test_a_correct_name_and_a_name_far_off_are_not_guessed(engine: Engine):
    view = engine.view()
    assert view.misspelt("registry-inl.h") == []  # exists: the exact branch answers it
    assert view.misspelt("factory-inl.h") == []  # no file one edit away
    assert view.misspelt("os.h") == []  # too short to guess from
    assert view.misspelt("registry-inl.hpp") == []  # the extension is spelt as typed, not guessed


def test_a_frame_outside_the_workspace_is_not_read_as_a_typo(engine: Engine):
    trace = 'File "/usr/lib/python3.11/socket.py", line 12, in create_connection\n'
    assert engine.view().misspelt("socket.py") == ["src/sockets.py"]  # one edit away, as a name alone
    hits = engine.retrieve(trace).lists.get("path", [])
    assert all("spelt" not in h.note for h in hits)


def test_a_mention_with_folders_must_agree_on_the_nearest_one(engine: Engine):
    hits = engine.retrieve("Fixed details/regisry-inl.h").lists["path"]
    assert hits[0].path == "include/log/details/registry-inl.h"
    hits = engine.retrieve("Fixed sinks/regisry-inl.h").lists.get("path", [])
    assert all("spelt" not in h.note for h in hits)
