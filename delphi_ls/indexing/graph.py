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
    mirrors_of: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # code -> tests (by folder)
    edges: int = 0

    @classmethod
    def build(cls, files: dict[str, str], imports: list[tuple[str, str]]) -> FileGraph:
        g = cls()
        resolver = Resolver(list(files), imports)
        for path, spec in imports:
            if path not in files or spec.startswith(("pkgmain:", "pkgname:")):
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
            # `tests/` mirrors: a test inside a folder named after a source file
            # (`__tests__/response/body.test.js` -> `lib/response.js`), the nearest such file only.
            for folder in os.path.dirname(p).split("/")[1:]:
                stem = stripped(folder)
                if len(stem) < 4 or stem in _TEST_FOLDERS:
                    continue
                cands = [c for c in by_stem.get(stem, []) if p not in g.tests_of.get(c, ())]
                if cands:
                    best = min(cands, key=lambda c: (dir_distance(c, p), c))
                    g.mirrors_of[best].add(p)
                    g.edges += 1
        return g

    def neighbours(self, path: str) -> dict[str, float]:
        """Adjacent files with an edge strength: imports both ways, and name-linked tests/code."""
        out: dict[str, float] = {}
        # Import edges weighted 1/sqrt(out-degree x in-degree) (symmetric normalisation): a file imported
        # by hundreds says little about each importer, and a test importing one module says more about
        # it than a test importing fifteen.
        imps = self.imports.get(path, ())
        for n in imps:
            out[n] = max(out.get(n, 0.0), 1.0 / (len(imps) * max(1, len(self.imported_by.get(n, ())))) ** 0.5)
        importers = self.imported_by.get(path, ())
        for n in importers:
            out[n] = max(out.get(n, 0.0), 1.0 / (len(importers) * max(1, len(self.imports.get(n, ())))) ** 0.5)
        mirrored = self.mirrors_of.get(path, ())
        for n in mirrored:
            # a folder of tests for one file: each is likely, none is singled out
            out[n] = max(out.get(n, 0.0), 1.0 / max(1.0, len(mirrored) ** 0.25))
        for n in self.tests_of.get(path, ()):
            out[n] = max(out.get(n, 0.0), 1.5)
        return out


_TEST_FOLDERS = {"test", "tests", "testing", "spec", "specs", "unit", "integration", "e2e", "fixtures",
                 "testdata", "helpers", "utils", "src", "lib", "main", "java", "kotlin", "python"}


def dir_distance(a: str, b: str) -> int:
    """Folder steps from a's folder to b's."""
    pa, pb = os.path.dirname(a).split("/"), os.path.dirname(b).split("/")
    common = 0
    for x, y in zip(pa, pb, strict=False):
        if x != y:
            break
        common += 1
    return (len(pa) - common) + (len(pb) - common)


def same_dir(a: str, b: str) -> bool:
    return os.path.dirname(a) == os.path.dirname(b)
