"""The one list of retrieval branches: the list that runs is the list that exists.

Each entry says, beside the branch, everything the rest of Delphi needs to know about it: its
stage (1 runs on the question; 2 runs after a first fusion, seeded by its top files and the
anchors), what it needs before it can answer (health and ``branchesReady`` read this), and its
weight for every question shape (docs/DESIGN.md, lesson 6: route by shape; a weight of 0 means the
branch does not run for that shape). The engine runs these branches in this order, fusion weighs
them with these weights, settings accept exactly these names in ``branch_weights``, health reports
each one's readiness, and the learned ranker's features have a column pair per branch.

Adding a branch is one ``register(BranchSpec(...))`` call; a spec without a weight for some shape
is refused when it is made. Weights were checked on both dev sets (dev_mined and ARB v0_1); see
bench/RESULTS.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType

from ...core import Need, Shape
from .anchors import AnchorBranch, AnchorFolderTestsBranch, AnchorRefsBranch, AnchorTestsBranch
from .base import Branch
from .commits import CommitsBranch
from .filedoc import FileDocBranch
from .lexical import Bm25Branch
from .path import PathBranch
from .structure import CochangeBranch, GraphBranch
from .symbol import SymbolBranch
from .trigram import TrigramBranch
from .vector import VectorBranch


@dataclass(frozen=True)
class BranchSpec:
    name: str
    make: Callable[[], Branch]
    weights: Mapping[str, float]  # question shape -> weight in fusion; every Shape must be there
    stage: int = 1
    needs: frozenset[Need] = field(default_factory=lambda: frozenset({Need.INDEX}))

    def __post_init__(self) -> None:
        missing = [s.value for s in Shape if s not in self.weights]
        if missing:
            raise ValueError(f"branch {self.name!r} has no weight for question shape(s) {', '.join(missing)}")
        unknown = sorted(set(self.weights) - {s.value for s in Shape})
        if unknown:
            raise ValueError(f"branch {self.name!r} has weights for unknown shape(s) {', '.join(unknown)}")
        if self.stage not in (1, 2):
            raise ValueError(f"branch {self.name!r}: stage must be 1 or 2, not {self.stage!r}")
        object.__setattr__(self, "weights", MappingProxyType({Shape(s): float(w) for s, w in self.weights.items()}))


def _w(english: float, identifier: float, trace: float, test: float) -> dict[str, float]:
    return {Shape.ENGLISH: english, Shape.IDENTIFIER: identifier, Shape.TRACE: trace, Shape.TEST: test}


_REGISTRY: dict[str, BranchSpec] = {}


def register(spec: BranchSpec) -> BranchSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"branch {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    del _REGISTRY[name]


def registered() -> tuple[BranchSpec, ...]:
    """Every branch, in the order the engine runs them (registration order)."""
    return tuple(_REGISTRY.values())


def branch_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


@contextmanager
def registered_branch(spec: BranchSpec) -> Iterator[BranchSpec]:
    """A branch registered for the length of a ``with`` block (tests, experiments)."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


# Weights by shape:                english identifier trace test
register(BranchSpec("bm25", Bm25Branch, _w(1.0, 1.0, 0.7, 1.0), needs=frozenset({Need.INDEX, Need.LEXICAL})))
register(BranchSpec("vector", VectorBranch, _w(0.8, 0.5, 0.4, 0.6), needs=frozenset({Need.VECTORS})))
register(BranchSpec("symbol", SymbolBranch, _w(0.6, 1.2, 1.0, 0.5)))
register(BranchSpec("path", PathBranch, _w(0.6, 0.8, 1.5, 0.6)))
register(BranchSpec("trigram", TrigramBranch, _w(0.5, 0.6, 1.0, 0.4), needs=frozenset({Need.INDEX, Need.TRIGRAMS})))
register(BranchSpec("anchor", AnchorBranch, _w(2.0, 2.0, 2.0, 0.1)))
register(BranchSpec("anchor_tests", AnchorTestsBranch, _w(0.2, 0.2, 0.0, 2.0)))
register(BranchSpec("anchor_refs", AnchorRefsBranch, _w(0.0, 0.0, 0.0, 1.0)))
# Tests in a folder named after an anchor (issue 19, code2test depth; measured in bench/RESULTS.md, "Test
# folders named after a module"). Half of anchor_tests' weight: a folder is weaker evidence than a name.
register(BranchSpec("anchor_folder", AnchorFolderTestsBranch, _w(0.0, 0.0, 0.0, 1.0)))
register(BranchSpec("graph", GraphBranch, _w(0.3, 0.3, 0.3, 0.5), stage=2))
register(BranchSpec("cochange", CochangeBranch, _w(0.3, 0.3, 0.2, 0.5), needs=frozenset({Need.INDEX, Need.HISTORY})))
# One document per file (path, header comment, top-level names, imports, importers): issue 19, measured in
# bench/RESULTS.md ("File-level branch", session 6; "Retrained ranker", session 7). On by default since the
# ranker delphi-ltr-3 was trained with its columns (windows mined at this weight): against delphi-ltr-2 without
# it, MRR +0.020 on dev_mined and +0.013 on dev_langs (intent2code +0.006 / +0.037; dev_langs code2test -0.011,
# ns). `branch_weights = {filedoc = 0}` turns it off; indexing keeps its documents only while it is on.
register(BranchSpec("filedoc", FileDocBranch, _w(0.6, 0.6, 0.6, 0.6),
                    needs=frozenset({Need.INDEX, Need.LEXICAL, Need.FILEDOCS})))
# Files that past commits described like the question changed (issue 19; bench/RESULTS.md, "Session 20").
# Weight 1.5 chosen on dev_mined with history (intent2code MRR +0.018, R@5 +0.025; dev_langs held out: +0.011,
# +0.006; neither interval above 0). Off for test questions: on dev_langs code2test it lost R@20 (-0.021 at
# 1.0-1.5), pulling tests of similar past changes over the anchor's own; off for traces: not measured.
register(BranchSpec("commits", CommitsBranch, _w(1.5, 1.5, 0.0, 0.0), needs=frozenset({Need.INDEX, Need.HISTORY})))
