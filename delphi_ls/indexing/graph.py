"""The file graph: import edges resolved to workspace files, and test-to-code edges.

Test-to-code edges come from a test's imports (already import edges) and from naming
conventions (``x_test.go``, ``test_x.py``, ``x.spec.ts``, ``XTest.java``, ``tests/`` mirrors).
Built from the manifest in memory; cheap enough to rebuild whenever the index changes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

from ..indexing.tokens import stripped
from ..workspace.kinds import stem_of
from .imports import Resolver


@dataclass
class FileGraph:
    imports: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # a imports b
    imported_by: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    tests_of: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # code -> tests (by name)
    edges: int = 0

    @classmethod
    def build(cls, files: dict[str, str], imports: list[tuple[str, str]]) -> FileGraph:
        g = cls()
        resolver = Resolver(list(files))
        for path, spec in imports:
            if path not in files:
                continue
            for target in resolver.resolve(path, spec):
                if target != path and target not in g.imports[path]:
                    g.imports[path].add(target)
                    g.imported_by[target].add(path)
                    g.edges += 1
        by_stem: dict[str, list[str]] = defaultdict(list)
        for p, kind in files.items():
            if kind == "code":
                by_stem[stripped(stem_of(p))].append(p)
        for p, kind in files.items():
            if kind != "test":
                continue
            for code in by_stem.get(stripped(stem_of(p)), []):
                g.tests_of[code].add(p)
                g.edges += 1
        return g

    def neighbours(self, path: str) -> dict[str, float]:
        """Adjacent files with an edge strength: imports both ways, and name-linked tests/code."""
        out: dict[str, float] = {}
        for n in self.imports.get(path, ()):
            out[n] = max(out.get(n, 0.0), 1.0)
        for n in self.imported_by.get(path, ()):
            # A file imported by hundreds says little about each importer.
            out[n] = max(out.get(n, 0.0), 1.0 / max(1.0, len(self.imported_by[path]) ** 0.5))
        for n in self.tests_of.get(path, ()):
            out[n] = max(out.get(n, 0.0), 1.5)
        return out


def same_dir(a: str, b: str) -> bool:
    return os.path.dirname(a) == os.path.dirname(b)
