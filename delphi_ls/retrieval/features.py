"""Per-candidate features for the learned ranker: what the engine already knows about a file.

Every feature is cheap (no model, no disk): branch ranks, the fused position, the
file's kind against the question's wanted kinds, path words shared with the question,
the file's relation to the anchors, its place in the import graph, its size. The
training tool (``bench.train``) and the query path call this one function, so the
model never sees features computed two ways. Hand-written path priors (example,
docs, bench and fixture folders, support file names) were tried and dropped: on
held-out training repositories they changed nothing (MRR and Recall@5 within 0.001).
"""

from __future__ import annotations

import math
import os
import re

import numpy as np

from ..core import KINDS, SHAPES
from ..core.tokens import stripped
from ..workspace.kinds import stem_of
from .branches.registry import branch_names
from .context import SearchContext
from .fusion import Fused
from .query import QueryInfo

_WORD = re.compile(r"[a-z0-9]+")


def feature_names() -> tuple[str, ...]:
    """The columns, by name: two per registered branch, then the rest. The learned ranker picks the
    columns it was trained on by these names, so a newly registered branch adds columns it ignores."""
    branches = branch_names()
    return (
        *(f"rr_{b}" for b in branches),
        *(f"top5_{b}" for b in branches),
        "n_branches", "fused_rr", "fused_rel",
        *(f"kind_{k}" for k in KINDS),
        *(f"shape_{s}" for s in SHAPES),
        "kind_preferred", "kind_avoided", "test_when_test_wanted", "code_when_test_wanted",
        "path_term_frac", "stem_in_query", "basename_in_query",
        "has_anchor", "is_anchor", "same_dir_anchor", "name_linked_anchor", "mirror_linked_anchor",
        "imports_anchor", "imported_by_anchor",
        "log_in_degree", "log_out_degree", "has_named_tests",
        "log_chunks", "path_depth",
        "log_changes", "changes_rel",
    )


# The columns of the built-in branches (what the training tool records and trains on).
FEATURE_NAMES: tuple[str, ...] = feature_names()


def _path_words(path: str) -> set[str]:
    return set(_WORD.findall(stripped(path).replace("_", " ").lower())) | set(
        _WORD.findall(re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", path).lower()))


def candidate_features(fused: list[Fused], q: QueryInfo, ctx: SearchContext,
                       names: tuple[str, ...] | None = None) -> np.ndarray:
    """One row per candidate, one column per name of ``names`` (default: :func:`feature_names`)."""
    names = names or feature_names()
    n = len(fused)
    x = np.zeros((n, len(names)), dtype=np.float32)
    if not n:
        return x
    col = {name: i for i, name in enumerate(names)}
    n_registered = sum(1 for name in names if name.startswith("rr_"))
    terms = {t.lower() for t in q.terms if len(t) >= 3} | {i.lower() for i in q.identifiers}
    text_low = q.text.lower()
    anchors = [a for a in ctx.anchors if a in ctx.files]
    graph = ctx.view.graph
    top = fused[0].score or 1.0
    wants_test = "test" in q.prefer
    ctx.view.chunk_lines.fetch([f.path for f in fused])  # one manifest read for every candidate's chunk count
    # How often each candidate changed in the history co-change read (nothing outside git): the file a change
    # edits is usually one that changes often, and which of the window's files changes most is the question.
    wants_churn = ctx.meta is not None and ("log_changes" in col or "changes_rel" in col)
    changes = ctx.meta.change_weights([f.path for f in fused]) if wants_churn else {}
    most_changed = max(changes.values(), default=0.0)
    # A file named one letter off counts as named (the path branch's why-line says so): "Fixed regisry-inl.h".
    misspelt = {p for _i, _m, p in ctx.misspelt_named(q)}
    for i, f in enumerate(fused):
        row = x[i]
        for b, r in f.branches.items():
            if f"rr_{b}" in col:
                row[col[f"rr_{b}"]] = 1.0 / r
                row[col[f"top5_{b}"]] = 1.0 if r <= 5 else 0.0
        # Only branches with a column count: a branch registered after training must not move this one.
        row[col["n_branches"]] = sum(1 for b in f.branches if f"rr_{b}" in col) / n_registered
        row[col["fused_rr"]] = 1.0 / (i + 1)
        row[col["fused_rel"]] = f.score / top
        kind = ctx.files.get(f.path, "other")
        row[col[f"kind_{kind if kind in KINDS else 'other'}"]] = 1.0
        row[col[f"shape_{q.shape if q.shape in SHAPES else 'english'}"]] = 1.0
        row[col["kind_preferred"]] = 1.0 if kind in q.prefer else 0.0
        # Vendored code the question does not name counts as an avoided kind (retrieval/fusion.py scores it so).
        row[col["kind_avoided"]] = 1.0 if kind in q.avoid or ctx.demoted(f.path) else 0.0
        row[col["test_when_test_wanted"]] = 1.0 if wants_test and kind == "test" else 0.0
        row[col["code_when_test_wanted"]] = 1.0 if wants_test and kind == "code" else 0.0
        words = _path_words(f.path)
        if terms:
            row[col["path_term_frac"]] = len(words & terms) / min(len(terms), 8)
        stem = stem_of(f.path).lower()
        row[col["stem_in_query"]] = 1.0 if len(stem) >= 3 and (stem in terms or stripped(stem) in terms) else 0.0
        row[col["basename_in_query"]] = 1.0 if os.path.basename(f.path).lower() in text_low or f.path in misspelt else 0.0
        if anchors:
            row[col["has_anchor"]] = 1.0
            row[col["is_anchor"]] = 1.0 if f.path in anchors else 0.0
            row[col["same_dir_anchor"]] = 1.0 if any(os.path.dirname(a) == os.path.dirname(f.path) for a in anchors) else 0.0
            if graph is not None:
                row[col["name_linked_anchor"]] = 1.0 if any(f.path in graph.tests_of.get(a, ()) for a in anchors) else 0.0
                row[col["mirror_linked_anchor"]] = 1.0 if any(f.path in graph.mirrors_of.get(a, ()) for a in anchors) else 0.0
                imps = graph.imports.get(f.path, ())
                row[col["imports_anchor"]] = 1.0 if any(a in imps for a in anchors) else 0.0
                row[col["imported_by_anchor"]] = 1.0 if any(f.path in graph.imports.get(a, ()) for a in anchors) else 0.0
        if graph is not None:
            row[col["log_in_degree"]] = math.log1p(len(graph.imported_by.get(f.path, ()))) / 5
            row[col["log_out_degree"]] = math.log1p(len(graph.imports.get(f.path, ()))) / 5
            row[col["has_named_tests"]] = 1.0 if graph.tests_of.get(f.path) else 0.0
        lines = ctx.view.chunk_lines.get(f.path)
        row[col["log_chunks"]] = math.log1p(len(lines[0]) if lines else 0) / 5
        row[col["path_depth"]] = min(f.path.count("/"), 10) / 10
        if changes:
            w = changes.get(f.path, 0.0)
            if "log_changes" in col:
                row[col["log_changes"]] = math.log1p(w) / 5
            if "changes_rel" in col:
                row[col["changes_rel"]] = w / most_changed if most_changed > 0 else 0.0
    return x
