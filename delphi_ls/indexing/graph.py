"""The file graph: import edges resolved to workspace files, and test-to-code edges.

Test-to-code edges come from a test's imports (already import edges) and from naming
conventions (``x_test.go``, ``test_x.py``, ``x.spec.ts``, ``XTest.java``, ``tests/`` mirrors), including
``<object>.<member>.js`` tests whose first part is the module's name or its abbreviation
(express's ``res.cookie.js`` -> ``lib/response.js``, ``app.use.js`` -> ``lib/application.js``).
Built from the manifest in memory; cheap enough to rebuild whenever the index changes.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from ..core.tokens import stripped
from ..languages import MANIFEST_KINDS, language_of
from ..workspace.kinds import (
    in_test_dir,
    is_test_name,
    is_test_support,
    names_its_source,
    other_dotted_name,
    stem_of,
)
from .imports import Resolver


@dataclass
class FileGraph:
    imports: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # a imports b
    imported_by: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    tests_of: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # code -> tests (by name)
    mirrors_of: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # code -> tests (by folder)
    # test -> the first part of its name where it abbreviates the module it was linked to ("res")
    abbreviated: dict[str, str] = field(default_factory=dict)
    edges: int = 0
    # Kept for with_imports(): the resolver of this file list, and whether any name link consulted the
    # import edges (a dotted test name that abbreviates a module it reaches), so import edges alone move.
    resolver: Resolver | None = field(default=None, repr=False, compare=False)
    links_read_imports: bool = False
    # test -> the source files it is linked to by name (tests_of read backwards)
    named_code: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    roots: frozenset[str] = frozenset()  # the folders holding a package manifest (package_roots)

    @classmethod
    def build(cls, files: dict[str, str], imports: list[tuple[str, str]]) -> FileGraph:
        g = cls()
        resolver = g.resolver = Resolver(list(files), imports)
        for path, spec in imports:
            if path not in files or spec.partition(":")[0] in MANIFEST_KINDS:  # package.json facts, no edges
                continue
            for target in resolver.resolve(path, spec):
                if target != path and target not in g.imports[path]:
                    g.imports[path].add(target)
                    g.imported_by[target].add(path)
                    g.edges += 1
        by_stem = _Stems()
        for p, kind in files.items():
            if kind == "code":
                stem = stripped(stem_of(p))
                by_stem.setdefault(stem, []).append(p)
                folder = stripped(os.path.basename(os.path.dirname(p)))
                if stem in FOLDER_STEMS and len(folder) >= 3:
                    # A front file stands for its folder: vite's `__tests__/optimizer/*.spec.ts` test
                    # `optimizer/index.ts`, and were none of its related tests (a package-folder newcomer, s39).
                    by_stem.setdefault(folder, []).append(p)
        abbrev_cache: dict[str, list[str]] = {}
        by_distance: dict[tuple[str, str], list[str]] = {}
        roots = g.roots = package_roots(files)
        rules = NameRules(roots)
        for p, kind in files.items():
            if kind != "test" or is_test_support(p):  # koa's test-helpers/context.js tests no lib/context.js
                continue
            linked, prefix = g._named_code(p, by_stem, files, abbrev_cache, rules)
            for code in linked:
                g.tests_of[code].add(p)
                g.named_code[p].add(code)
                g.edges += 1
            if prefix:
                g.abbreviated[p] = prefix
            # `tests/` mirrors: a test inside a folder named after a source file
            # (`__tests__/response/body.test.js` -> `lib/response.js`), the nearest such file only.
            folder_of_p = os.path.dirname(p)
            for folder in folder_of_p.split("/")[1:]:
                # Less a leading test prefix (`tests/test_utils/` for `utils.py`, pytest's way; click's tests of each
                # of `utils.py`'s functions were related to it only as "mentions `utils`", a newcomer, session 45).
                # `tests/utils/` is the tests' own helpers; in `tests/test_utils/` the files named as tests take part
                # (kinds.py counts the folder as test support, the tests named so in it stay tests). Not a suffix:
                # `integration_tests/` holds a kind of test, not the tests of `integration.py` (a review).
                stem = stripped(_TEST_PREFIX.sub("", folder))
                if len(stem) < 4 or stripped(folder) in _TEST_FOLDERS or stem in _TEST_FOLDERS - {"utils"}:
                    continue
                # The stem's files by distance from p's folder, once per folder (tests share folders;
                # per test it was 0.58 M distance computations on the 100k workspace).
                key = (folder_of_p, stem)
                ranked = by_distance.get(key)
                if ranked is None:
                    ranked = by_distance[key] = sorted(by_stem.get(stem, []), key=lambda c: (dir_distance(c, p), c))
                best = next((c for c in ranked if p not in g.tests_of.get(c, ())), None)
                if best is not None:
                    g.mirrors_of[best].add(p)
                    g.edges += 1
        return g

    def _named_code(self, test: str, by_stem: _Stems, files: dict[str, str],
                    cache: dict[str, list[str]], rules: NameRules) -> tuple[list[str], str | None]:
        """The source files a test is named after, and the abbreviation used when one was.

        A plain name links every source file of that stem (``test_retry.py`` -> ``retry.py``). A dotted
        name ``<object>.<member>.js`` names an object: the module of that name or one it abbreviates
        (``res`` -> ``response``, ``req`` -> ``request``, ``app`` -> ``application``). An abbreviation is
        taken only when the module is reachable through the test's imports (``require('..')`` ->
        ``index.js`` -> ``lib/express.js`` -> ``lib/response.js``), or when the test imports no source at
        all and one module fits; a reachable one also wins over a same-named file the test never loads
        (``examples/.../js/app.js`` for ``app.use.js``).
        """
        stem = stripped(stem_of(test))
        # Only the nearest files of the stem: a workspace with seven vendored copies of spring-boot linked
        # every copy's test to every copy's class (and every `package-info.java` under a test folder to all
        # 4,163 in main folders): 2.3 M of the 100k workspace's 2.4 M name links, and wrong ones.
        exact = [c for c in by_stem.nearest(stem, test) if not other_dotted_name(c, test) and rules.allows(test, c)]
        if not exact and len(by_stem.get(stem, ())) > 1:
            # The nearest were all another package's or language's: the nearest of those the test may be named after
            # (the rare case: the nearest are looked up by an index; review, session 39).
            ok = [c for c in by_stem.get(stem, ()) if rules.allows(test, c) and not other_dotted_name(c, test)]
            if ok:
                shared = {c: _shared_folders(c, test) for c in ok}
                exact = [c for c in ok if shared[c] == max(shared.values())]
        if stem not in FOLDER_STEMS:
            # A file of the stem before a folder's front file standing for it (`server.ts` before `server/index.ts`).
            plain = [c for c in exact if stripped(stem_of(c)) == stem]
            exact = plain or exact
        parts = [x for x in os.path.basename(test).split(".")[:-1] if x.lower() not in ("test", "spec")]
        if len(parts) < 2 or len(stem) < 2:
            if not names_its_source(test):  # a fixture or helper in a Python test folder (kinds.py)
                return [], None
            if len(exact) > 1 and stem in FOLDER_STEMS:
                # A folder's front file (`index.ts`) is the one of a folder the test's folders name, else the nearest:
                # vite's `__tests__/plugins/index.spec.ts` was named after every index.ts under src/node (a monorepo
                # newcomer, session 39).
                folders = os.path.dirname(test).split("/")

                def depth(c: str) -> int:  # where the test's folders name c's folder, the deepest place
                    own = os.path.basename(os.path.dirname(c))
                    return max((i for i, part in enumerate(folders) if part == own), default=-1)
                deepest = max(depth(c) for c in exact)
                exact = [c for c in exact if depth(c) == deepest]
                near = min(dir_distance(c, test) for c in exact)
                exact = [c for c in exact if dir_distance(c, test) == near]
            if len(exact) > 1:
                # Several of the stem at the same distance (`tests/test_views.py`: flask's `views.py` and two in
                # `examples/`): a test of the product is not one of its examples' (a newcomer, session 38).
                product = [c for c in exact if not _EXAMPLE_DIR.search(c)]
                if product:
                    exact = product
            return exact, None
        if stem not in cache:  # many tests share one object name (`res.*.js`): one scan of the stems each
            cache[stem] = [c for s, codes in by_stem.items() if abbreviates(stem, s) for c in codes]
        abbrevs = [c for c in cache[stem] if not other_dotted_name(c, test) and rules.allows(test, c)]
        if not abbrevs:
            return exact, None
        self.links_read_imports = True
        reach = self.reachable(test, files)
        near = [c for c in exact + abbrevs if c in reach]
        if near:
            # The closest fit only: `res` is a prefix of `response` and only scattered through `request`.
            def fit(c: str) -> tuple[bool, int]:
                cs = stripped(stem_of(c))
                return cs == stem, len(os.path.commonprefix([cs, stem]))
            best = max(fit(c) for c in near)
            chosen = [c for c in near if fit(c) == best]
        elif exact:
            return exact, None
        elif not any(files.get(i) == "code" for i in self.imports.get(test, ())) and len(abbrevs) == 1:
            chosen = abbrevs
        else:
            return [], None
        return chosen, (stem if any(c not in exact for c in chosen) else None)

    def with_imports(self, files: dict[str, str], specs: dict[str, list[str]]) -> FileGraph | None:
        """This graph with the import edges of the files in ``specs`` (path -> its import specs, as the
        manifest now holds them) resolved again, for an update of those files that left the file list
        (``files``, as at build) the same: the rest of the graph is shared, not rebuilt (resolving every
        import again took 1.1-1.6 s of CPU on spring-boot after each save, issue 18). None when only a
        rebuild is right: no resolver kept, other files, changed manifest facts (package.json entries,
        Kotlin and C# declarations: what resolution reads besides the file list), or a patched file whose
        edges moved while name links read the import edges. The graph in use is not modified (queries may
        be reading it)."""
        if self.resolver is None or self.resolver.files != files.keys():
            return None

        old_facts: dict[str, list[str]] = {p: [] for p in specs}
        for p, spec in self.resolver.index.manifest_specs:
            if p in old_facts and spec.partition(":")[0] in MANIFEST_KINDS:
                old_facts[p].append(spec)
        if any(old_facts[p] != [x for x in specs[p] if x.partition(":")[0] in MANIFEST_KINDS] for p in specs):
            return None
        resolved: dict[str, set[str]] = {}
        for path, path_specs in specs.items():
            new: set[str] = set()
            for spec in path_specs:
                if spec.partition(":")[0] in MANIFEST_KINDS:  # facts, not edges (as in build)
                    continue
                new.update(t for t in self.resolver.resolve(path, spec) if t != path)
            resolved[path] = new
        # A name link that read the import edges (a dotted test name reaching the module it abbreviates) can
        # only move when some edge moved: a save that leaves its file's edges as they were (most saves) is
        # patched. Refusing every patch once any such link existed made each save on the 100k workspace
        # (express's `res.*.js` tests among its files) rebuild the whole view for the next question (9-16 s).
        if self.links_read_imports and any(resolved[p] != self.imports.get(p, set()) for p in specs):
            return None
        imports = defaultdict(set, self.imports)
        imported_by = defaultdict(set, self.imported_by)
        edges = self.edges
        for path, new in resolved.items():
            old = imports.pop(path, set())
            for target in old:
                rest = imported_by[target] - {path}
                if rest:
                    imported_by[target] = rest
                else:
                    del imported_by[target]  # as a build leaves it: no key for a file nothing imports
            edges -= len(old)
            for target in new:
                imported_by[target] = imported_by.get(target, set()) | {path}
            if new:
                imports[path] = new
            edges += len(new)
        return dataclasses.replace(self, imports=imports, imported_by=imported_by, edges=edges)

    def reachable(self, start: str, files: dict[str, str], depth: int = 4) -> set[str]:
        """Source files reachable from ``start`` through at most ``depth`` import edges."""
        seen: set[str] = set()
        frontier = [start]
        for _ in range(depth):
            nxt = []
            for f in frontier:
                for n in self.imports.get(f, ()):
                    if n not in seen and files.get(n) == "code":
                        seen.add(n)
                        nxt.append(n)
            frontier = nxt
        return seen

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


class _Stems(dict[str, list[str]]):
    """Source files by stripped stem, and for a stem the files nearest a given path."""

    def __init__(self) -> None:
        super().__init__()
        self._folders: dict[str, dict[str, list[str]]] = {}

    def nearest(self, stem: str, path: str) -> list[str]:
        """The files of ``stem`` sharing the longest leading folders with ``path`` (all of them when
        none shares any): found by looking up ``path``'s folders, deepest first, in an index of every
        folder above each file of the stem, built once per stem (comparing paths pairwise cost the
        100k workspace 2.3 M comparisons for `package-info.java` alone)."""
        cands = self.get(stem, [])
        if len(cands) <= 1:
            return list(cands)
        folders = self._folders.get(stem)
        if folders is None:
            folders = self._folders[stem] = {}
            for c in cands:
                d = c
                while d:
                    d = d.rpartition("/")[0]
                    folders.setdefault(d, []).append(c)
        d = path
        while d:
            d = d.rpartition("/")[0]
            if d in folders:
                return list(folders[d])
        return list(cands)


# A package's manifest: the folder holding one is a package (npm, Go module, crate, Python project, Maven or Gradle
# module, Composer, Bundler).
PACKAGE_MANIFESTS = frozenset({"package.json", "go.mod", "Cargo.toml", "pyproject.toml", "setup.py", "pom.xml",
                               "build.gradle", "build.gradle.kts", "composer.json", "Gemfile"})
# Data a test reads, not a test: a fixture's `index.js`, `index.css`, `index.html` were "named after" every index.ts
# (a monorepo newcomer, session 39).
_FIXTURE_DIR = re.compile(r"(^|/)(__)?(fixtures?|mocks|snapshots|testdata)(__)?(/|$)", re.I)
# Files that hold no test, wherever they are: a fixture's styles, markup and data.
_NOT_TESTS = frozenset({".css", ".scss", ".less", ".sass", ".html", ".htm", ".json", ".yaml", ".yml", ".toml",
                        ".xml", ".txt", ".md", ".svg", ".csv"})
# Language families a test and the file it is named after share: a TypeScript test of JavaScript, C++ of C.
_FAMILY = {"typescript": "javascript", "cpp": "c", "kotlin": "java"}
# A file named like this stands for its folder: `models/__init__.py`, `response/index.js`, `walk/mod.rs`.
FOLDER_STEMS = frozenset({"init", "index", "mod"})


def package_roots(files: dict[str, str]) -> frozenset[str]:
    """The folders holding a package manifest ('' for the workspace's top); not those in test folders (a fixture
    package: vite's `src/node/__tests__/package.json`)."""
    return frozenset(os.path.dirname(p) for p in files
                     if os.path.basename(p) in PACKAGE_MANIFESTS and not in_test_dir(p))


def package_of(path: str, roots: frozenset[str]) -> str | None:
    """The deepest package folder holding ``path``; None when no manifest is above it."""
    d = path
    while d:
        d = d.rpartition("/")[0]
        if d in roots:
            return d
    return None


def _family(path: str) -> str | None:
    lang = language_of(path)
    return None if lang is None else _FAMILY.get(lang.name, lang.name)


class NameRules:
    """Which source files a test's name may link it to. Not from a file in a fixtures folder (data a test reads),
    nor from a file not named as a test for a folder's front file (`index.ts`); not to one of another language (a
    test of a parsed language's file is of its family: express's `test/config.js` was flask's config.py's second
    test in a folder of both); not from a Go test of another folder (a `_test.go` file tests its own folder's
    package: etcd's `util_test.go`s were every util.go's); not to another package of a monorepo (vue core's
    compiler-ssr `__tests__/utils.ts` was compiler-core's utils.ts's; a monorepo newcomer, session 39). A test in
    a package above the file's (a top-level `tests/`) may be. What a path gives is kept: a build asks of each test
    against each file of its stem (computed per pair, the rules made spring-boot's graph 3-4x slower)."""

    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots
        self._tests: dict[str, tuple[bool, bool, str | None, str | None]] = {}
        self._code: dict[str, tuple[bool, str | None, str | None]] = {}

    def _test(self, test: str) -> tuple[bool, bool, str | None, str | None]:
        """(named as a test, may name a file at all, its family, its package)."""
        got = self._tests.get(test)
        if got is None:
            named = is_test_name(test)
            # (`src/mocks/server.test.ts` is a test by its name wherever it is; review)
            usable = (named or not _FIXTURE_DIR.search(os.path.dirname(test))) \
                and os.path.splitext(test)[1].lower() not in _NOT_TESTS
            got = self._tests[test] = (named, usable, _family(test), package_of(test, self.roots))
        return got

    def _of(self, code: str) -> tuple[bool, str | None, str | None]:
        """(a folder's front file, its family, its package)."""
        got = self._code.get(code)
        if got is None:
            got = self._code[code] = (stripped(stem_of(code)) in FOLDER_STEMS, _family(code),
                                      package_of(code, self.roots))
        return got

    def allows(self, test: str, code: str) -> bool:
        named, usable, tfam, t_root = self._test(test)
        front, fam, c_root = self._of(code)
        if not usable or (front and not named):
            return False  # a plain `index.ts` in a test folder is a fixture package's entry, not a test of an index.ts
        if fam is not None and tfam is not None and tfam != fam:
            return False  # (a language with no module here, Groovy's Spock or Scala, may test a Java class; review)
        if code.endswith(".go") and test.endswith(".go") and os.path.dirname(code) != os.path.dirname(test):
            return False
        return _reaches(t_root, c_root)


def same_package(test: str, code: str, roots: frozenset[str]) -> bool:
    """Whether a test can reach ``code`` without another package between: in its package, or in one above it (a
    top-level `tests/`), or where no manifest says."""
    return not roots or _reaches(package_of(test, roots), package_of(code, roots))


def _reaches(t_root: str | None, c_root: str | None) -> bool:
    return not (t_root and c_root is not None and t_root != c_root and not c_root.startswith(t_root + "/"))


# Folders of example, sample and demo programs beside a product (flask's `examples/celery/.../views.py`).
_EXAMPLE_DIR = re.compile(r"(^|/)(examples?|samples?|demos?|tutorials?)/", re.I)
_TEST_PREFIX = re.compile(r"^tests?[-_]", re.I)
_TEST_FOLDERS = {"test", "tests", "testing", "spec", "specs", "unit", "integration", "e2e", "fixtures",
                 "testdata", "helpers", "utils", "src", "lib", "main", "java", "kotlin", "python"}


def abbreviates(short: str, long: str) -> bool:
    """``short`` is an abbreviation of ``long``: same first letter, its letters in order, at least
    three of them (``res``/``response``, ``req``/``request``, ``app``/``application``, ``ctx``/``context``)."""
    return (3 <= len(short) < len(long) and short[0] == long[0]
            and all(ch in it for it in [iter(long[1:])] for ch in short[1:]))


def _shared_folders(a: str, b: str) -> int:
    """How many leading folders a's and b's folders share."""
    common = 0
    for x, y in zip(os.path.dirname(a).split("/"), os.path.dirname(b).split("/"), strict=False):
        if x != y:
            break
        common += 1
    return common


def dir_distance(a: str, b: str) -> int:
    """Folder steps from a's folder to b's."""
    common = _shared_folders(a, b)
    return (os.path.dirname(a).count("/") + 1 - common) + (os.path.dirname(b).count("/") + 1 - common)
