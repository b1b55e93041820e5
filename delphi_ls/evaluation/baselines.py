"""Baselines measured in the same run as the engine, from ARB's published description.

- ``lexical``: ARB's set-overlap TF-IDF-ish ranker with path/basename/symbol bonuses.
- ``bm25``: Okapi BM25 (k1=1.5, b=0.75) over whole files, ARB tokens.
- ``grep``: ripgrep over the query's identifiers, backticked/quoted terms and paths.
- ``heuristic``: the bar ARB's baselines miss: identifier-splitting BM25, restricted to
  tests or sources by the question's words, with tests named after the anchor first.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from delphi_ls.core.tokens import code_tokens, is_identifier_like
from delphi_ls.workspace.kinds import file_kind, is_test_path, stem_of

# ARB corpus.py candidate rules (see ../shared/bench/ARB_SCORING.md §1).
ARB_LOCKFILES = {"package-lock.json", "pnpm-lock.yaml", "yarn.lock", "poetry.lock", "Pipfile.lock", "Cargo.lock",
                 "Gemfile.lock", "go.sum"}
ARB_SKIP_PARTS = ("dist/", "build/", "vendor/", "third_party/", "node_modules/", "target/", ".tox/", ".venv/")
ARB_SKIP_SUFFIX = (".lock", ".min.js", ".map", ".snap", ".snapshot", ".pb.go", ".generated.go", ".g.cs")
ARB_SKIP_EXT = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".pdf", ".zip", ".gz", ".tgz", ".bz2",
                ".xz", ".7z", ".jar", ".class", ".wasm", ".svg", ".mp4", ".mp3", ".woff", ".woff2", ".ttf", ".otf",
                ".eot", ".so", ".dll", ".exe", ".bin", ".pyc"}
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def arb_tokens(text: str) -> list[str]:
    return [t.lower() for t in re.findall(r"[A-Za-z0-9]+", _CAMEL.sub(r"\1 \2", text))]


@dataclass
class Corpus:
    root: Path
    paths: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Corpus:
        c = cls(root)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                if name in ARB_LOCKFILES or any(p in rel for p in ARB_SKIP_PARTS) or rel.endswith(ARB_SKIP_SUFFIX):
                    continue
                if os.path.splitext(name)[1].lower() in ARB_SKIP_EXT or os.path.islink(full):
                    continue
                try:
                    if os.path.getsize(full) > 400_000:
                        continue
                    data = open(full, "rb").read()
                except OSError:
                    continue
                if not data or b"\x00" in data:
                    continue
                c.paths.append(rel)
                c.texts[rel] = data.decode("utf-8", errors="replace")[:8000]
        return c


class Bm25:
    def __init__(self, docs: dict[str, list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.len = {d: len(toks) for d, toks in docs.items()}
        self.avg = sum(self.len.values()) / max(1, len(self.len))
        self.post: dict[str, list[tuple[str, int]]] = {}
        for d, toks in docs.items():
            for t, n in Counter(toks).items():
                self.post.setdefault(t, []).append((d, n))
        self.n = len(docs)

    def rank(self, terms: list[str], allow=None) -> list[str]:
        scores: Counter[str] = Counter()
        for t in set(terms):
            plist = self.post.get(t)
            if not plist:
                continue
            idf = math.log(1 + (self.n - len(plist) + 0.5) / (len(plist) + 0.5))
            for d, tf in plist:
                if allow is not None and not allow(d):
                    continue
                dl = self.len[d]
                scores[d] += idf * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * dl / self.avg))
        return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


class Baselines:
    """All baselines over one corpus, built once and queried per sample."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        docs = {p: arb_tokens(p + " " + corpus.texts[p]) for p in corpus.paths}
        self.bm25_arb = Bm25(docs)
        self.uniq = {p: set(t) for p, t in docs.items()}
        df: Counter[str] = Counter()
        for s in self.uniq.values():
            df.update(s)
        self.idf = {t: math.log((1 + len(docs)) / (1 + n)) + 1 for t, n in df.items()}
        code_docs = {p: [t for t, _ in code_tokens(p.replace("/", " ") + " " + corpus.texts[p])] for p in corpus.paths}
        self.bm25_code = Bm25(code_docs)
        self.symbols = {p: set(re.findall(r"(?:def|class|func|fn|function|struct|interface|type|enum|trait)\s+([A-Za-z_]\w*)",
                                          corpus.texts[p])) for p in corpus.paths}

    def lexical(self, text: str) -> list[str]:
        q = set(arb_tokens(text))
        low = text.lower()
        scored = []
        for p in self.corpus.paths:
            s = sum(self.idf.get(t, 0.0) for t in q & self.uniq[p]) / math.sqrt(max(1, len(self.uniq[p])))
            if p.lower() in low:
                s += 25
            elif os.path.basename(p).lower() in low:
                s += 8
            if any(sym.lower() in low for sym in self.symbols[p] if len(sym) > 3):
                s += 5
            if s > 0:
                scored.append((s, p))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [p for _, p in scored]

    def bm25(self, text: str) -> list[str]:
        return self.bm25_arb.rank(arb_tokens(text))

    def grep(self, text: str) -> list[str]:
        rg = shutil.which("rg")
        if rg is None:
            raise RuntimeError("ripgrep (rg) is not installed: the grep baseline cannot run")
        pats = grep_patterns(text)
        scores: Counter[str] = Counter()
        for pat in pats:
            res = subprocess.run([rg, "-i", "-F", "-c", "--no-messages", "--", pat, "."], cwd=self.corpus.root,
                                 capture_output=True, text=True)
            for line in res.stdout.splitlines():
                path, _, n = line.rpartition(":")
                path = path[2:] if path.startswith("./") else path
                if path in self.corpus.texts:
                    scores[path] += 1.0 + 0.1 * math.log1p(int(n))
            for p in self.corpus.paths:
                if pat.lower() in p.lower():
                    scores[p] += 2.0
        return [p for p, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]

    def heuristic(self, text: str, anchors: list[str]) -> list[str]:
        terms = [t for t, _ in code_tokens(text)]
        full = self.bm25_code.rank(terms)
        wants_tests = bool(re.search(r"\btests?\b", text.split("\n", 1)[0], re.I))
        if wants_tests:
            only = self.bm25_code.rank(terms, allow=is_test_path)
            stems = {stem_of(a).lower() for a in anchors if len(stem_of(a)) >= 2}
            named = sorted((p for p in self.corpus.paths if is_test_path(p)
                            and any(s in os.path.basename(p).lower() for s in stems)), key=len)
            lists = [full, only, named]
        else:
            only = self.bm25_code.rank(terms, allow=lambda p: file_kind(p) not in ("test", "doc"))
            lists = [full, only]
        scores: Counter[str] = Counter()
        for lst in lists:
            for r, p in enumerate(lst[:200], start=1):
                scores[p] += 1.0 / (60 + r)
        return [p for p, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def grep_patterns(text: str) -> list[str]:
    pats: list[str] = []
    pats += re.findall(r"`([^`\n]{3,80})`", text)
    pats += re.findall(r"(?<![\w/])((?:[\w.-]+/)+[\w.-]+\.\w+)", text)
    pats += re.findall(r"(?<!\w)(--[a-z][\w-]{2,})", text)
    pats += [w for w in re.findall(r"[A-Za-z_][\w.]{3,}", text) if is_identifier_like(w)]
    seen: dict[str, None] = {}
    for p in pats:
        p = p.strip().strip(".")
        if len(p) >= 3:
            seen.setdefault(p, None)
    return list(seen)[:20]
