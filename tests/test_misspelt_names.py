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
    "include/log/details/io.h": "namespace log { int io::flush(); }\n",
    "src/main/java/app/Threads.java": "package app;\nclass Threads { void start() {} }\n",
    ".eslintrc.json": '{"rules": {"semi": "error"}}\n',
    # Three names one edit from "gadgetZ.py" (a guess among three is allowed), four from "widgetZ.py" (not).
    **{f"src/gadget{c}.py": f"def gadget_{c}():\n    return 1\n" for c in "ABC"},
    **{f"src/widget{c}.py": f"def widget_{c}():\n    return 1\n" for c in "ABCD"},
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
    assert view.misspelt("os.h") == []  # io.h is one edit away, but a 2-letter stem is too short to guess from
    assert view.misspelt("registry-inl.hh") == []  # one edit away, in the extension: not guessed
    assert view.misspelt("Registry-inl.h") == ["include/log/details/registry-inl.h"]  # case alone
    assert view.misspelt("gadgetZ.py") == ["src/gadgetA.py", "src/gadgetB.py", "src/gadgetC.py"]
    assert view.misspelt("widgetZ.py") == []  # four files one edit away: a guess


def test_a_dotfile_named_is_found_as_named(engine: Engine):
    hits = engine.retrieve("Tighten the rules in .eslintrc.json").lists["path"]
    assert (hits[0].path, hits[0].score) == (".eslintrc.json", pytest.approx(10.0, abs=0.1))
    assert hits[0].note == "named in the question (.eslintrc.json)"


def test_a_frame_outside_the_workspace_is_not_read_as_a_typo(engine: Engine):
    trace = 'File "/usr/lib/python3.11/socket.py", line 12, in create_connection\n'
    assert engine.view().misspelt("socket.py") == ["src/sockets.py"]  # one edit away, as a name alone
    hits = engine.retrieve(trace).lists.get("path", [])
    assert all("spelt" not in h.note for h in hits)


def test_a_java_frame_names_no_typo(engine: Engine):
    """A JVM frame carries a bare file name: java.lang's ``Thread.java`` is one letter off ``Threads.java``."""
    trace = ("Exception in thread \"pool-1\" java.lang.IllegalStateException: stopped\n"
             "\tat java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)\n"
             "\tat java.lang.Thread.run(Thread.java:750)\n")
    assert engine.view().misspelt("Thread.java") == ["src/main/java/app/Threads.java"]
    hits = engine.retrieve(trace).lists.get("path", [])
    assert all("spelt" not in h.note for h in hits)


def test_a_save_keeps_the_misspelling_table(tmp_path):
    """A save that changes a file's content, not the file list, patches the view: the table built for
    misspelt names (58-142 ms at 100,000 files) carries over, and a saved view does not hold it."""
    import pickle

    ws = tmp_path / "ws"
    for rel in ("src/registry.py", "src/engine.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("def f():\n    return 1\n")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index()
        view = eng.view()
        assert view.misspelt("regisry.py") == ["src/registry.py"]
        table = view._by_shape
        assert table is not None and pickle.loads(pickle.dumps(view))._by_shape is None
        (ws / "src/engine.py").write_text("def f():\n    return 2\n\n\ndef g():\n    return 3\n")
        eng.index(only=["src/engine.py"])
        after = eng.view()
        assert after is not view and after._by_shape is table
        assert after.misspelt("regisry.py") == ["src/registry.py"]
