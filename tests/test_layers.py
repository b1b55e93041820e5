"""The import graph of ``delphi_ls``: no cycles, and no import that goes up the declared layers.

Every module is parsed with ``ast`` (nothing is imported), and every import counts -- at module
level, inside functions (lazy imports) and under ``if TYPE_CHECKING:`` -- unless it is listed in
ALLOWED with the reason it is allowed. docs/DESIGN.md draws the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "delphi_ls"

# Bottom first. A module may import its own layer and the layers below it; the first matching prefix
# (longest first) decides a module's layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bottom", ("delphi_ls.api", "delphi_ls.settings", "delphi_ls.core")),
    ("languages", ("delphi_ls.languages",)),  # one module per language: grammars, imports, test names, frames
    ("stores", ("delphi_ls.stores",)),
    ("workspace", ("delphi_ls.workspace",)),
    ("models", ("delphi_ls.models",)),
    ("indexing", ("delphi_ls.indexing",)),
    ("retrieval", ("delphi_ls.retrieval",)),
    ("health", ("delphi_ls.health",)),
    ("engine", ("delphi_ls.engine", "delphi_ls.traces", "delphi_ls.indexes")),
    ("session", ("delphi_ls.session",)),
    ("package", ("delphi_ls",)),  # delphi_ls/__init__.py: the public names, loaded lazily
    ("evaluation", ("delphi_ls.evaluation",)),
    ("fronts", ("delphi_ls.cli", "delphi_ls.server", "delphi_ls.lsp_protocol", "delphi_ls.__main__",
                "delphi_ls.mcp")),
)

# (importer, imported) -> why an upward or cyclic import is acceptable. Keep this short.
ALLOWED: dict[tuple[str, str], str] = {
    ("delphi_ls.settings", "delphi_ls.retrieval.branches.registry"):
        "branch_weights names are checked against the one registry of branches; imported inside validate() "
        "only when the key is set, so loading settings stays light",
}


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The delphi_ls modules ``name`` imports anywhere in its source, resolved to module names."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "delphi_ls"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "delphi_ls":
                continue
            for a in node.names:  # `from .x import y`: y may be a module of package x
                found.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    # A module that imports a submodule also runs its parents' __init__; those are not edges of interest.
    return {m for m in found if m in known and m != name}


def layer_of(name: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for i, (_label, prefixes) in enumerate(LAYERS):
        for pre in prefixes:
            if (name == pre or name.startswith(pre + ".")) and (best is None or len(pre) > best[0]):
                best = (len(pre), i)
    assert best is not None, f"{name} is in no layer: add it to LAYERS in {__file__}"
    return best[1]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def test_every_module_has_a_layer() -> None:
    for name in modules():
        layer_of(name)


def test_no_upward_imports() -> None:
    up = []
    for src, targets in graph().items():
        for dst in sorted(targets):
            if layer_of(dst) > layer_of(src) and (src, dst) not in ALLOWED:
                up.append(f"{src} ({LAYERS[layer_of(src)][0]}) imports {dst} ({LAYERS[layer_of(dst)][0]})")
    assert not up, "imports that go up the layers:\n" + "\n".join(up)


def test_no_import_cycles() -> None:
    g = {src: {d for d in dsts if (src, d) not in ALLOWED} for src, dsts in graph().items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(g):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_allowed_exceptions_are_still_needed() -> None:
    """An allowance whose import is gone would hide the next one that comes back."""
    g = graph()
    stale = [pair for pair in ALLOWED if pair[1] not in g.get(pair[0], set())]
    assert not stale, f"ALLOWED lists imports that no longer exist: {stale}"


@pytest.mark.parametrize("src,dst,expect", [
    ("delphi_ls.engine", "delphi_ls.health", True),
    ("delphi_ls.stores.meta", "delphi_ls.engine", False),
])
def test_layer_order_reads_as_declared(src: str, dst: str, expect: bool) -> None:
    """The check itself can fail: a lower layer importing a higher one is caught."""
    assert (layer_of(dst) <= layer_of(src)) is expect
