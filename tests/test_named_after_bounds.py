"""Which tests a source file's name links it to, in a monorepo (a newcomer, session 39): not another package's file
of the same name, not a fixture, not a test in another language, not a Go test of another folder; and a folder's
front file (`index.ts`) only by the folder the test names."""

from __future__ import annotations

import pytest

from delphi_ls import Engine

FILES = {
    "package.json": '{"name": "mono", "private": true}\n',
    "packages/a/package.json": '{"name": "@mono/a"}\n',
    "packages/a/src/utils.ts": "export function slugify(s: string): string {\n  return s.toLowerCase()\n}\n",
    "packages/a/src/__tests__/utils.spec.ts": "import { slugify } from '../utils'\n\ntest('slug', () => {\n"
                                              "  expect(slugify('A')).toBe('a')\n})\n",
    "packages/a/src/server/index.ts": "export function createServer(port: number) {\n  return { port }\n}\n",
    "packages/a/src/plugins/index.ts": "export function resolvePlugins() {\n  return []\n}\n",
    "packages/a/src/__tests__/plugins/index.spec.ts": "import { resolvePlugins } from '../../plugins'\n\n"
                                                      "test('none', () => {\n  expect(resolvePlugins()).toEqual([])\n})\n",
    "packages/a/src/__tests__/fixtures/dep/index.js": "module.exports = 1\n",
    "packages/a/src/__tests__/fixtures/dep/index.css": ".a { color: red }\n",
    "packages/a/src/__tests__/fixture-pkg/index.ts": "export const x = 1\n",
    "packages/a/src/cli.ts": "function start(root: string) {\n  return root\n}\nexport function run() {\n  return start('.')\n}\n",
    "packages/a/src/__tests__/run.spec.ts": "import { run } from '../cli'\n\ntest('start', () => {\n"
                                            "  expect(run()).toBe('.') // start\n})\n",
    "packages/b/__tests__/server.spec.ts": "import { createServer } from '../src/server'\n\n"
                                            "test('start', async () => {\n  const server = createServer()\n"
                                            "  await server.start()\n})\n",
    "packages/a/src/optimizer/index.ts": "export function optimizeDeps() {\n  return []\n}\n",
    "packages/a/src/__tests__/optimizer/resolve.spec.ts": "import { x } from '../../other'\n\ntest('r', () => {\n"
                                                          "  expect(x).toBe(1)\n})\n",
    "packages/b/package.json": '{"name": "@mono/b"}\n',
    "packages/b/src/render.ts": "export function render() {\n  return ''\n}\n",
    "packages/b/__tests__/utils.ts": "export function mount(el: string) {\n  return el\n}\n",
    "packages/b/__tests__/render.spec.ts": "import { mount } from './utils'\nimport { render } from '../src/render'\n\n"
                                           "test('r', () => {\n  expect(render()).toBe(mount(''))\n})\n",
    "go.mod": "module example.com/mono\n\ngo 1.22\n",
    "server/read/util.go": "package read\n\nfunc Clamp(n int) int {\n\treturn n\n}\n",
    "server/util_test.go": "package server\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n",
    "py/config.py": "def load_config(path):\n    return {}\n",
    "jvm/src/main/java/com/acme/Retry.java": "package com.acme;\n\npublic class Retry {}\n",
    "jvm/src/test/groovy/com/acme/RetrySpec.groovy": "package com.acme\n\nclass RetrySpec {}\n",
    "packages/a/src/server.ts": "export const serve = () => 1\n",
    "packages/a/src/mocks/server.test.ts": "import { serve } from '../server'\ntest('s', () => serve())\n",
    "js/test/config.js": "const assert = require('assert')\nassert.ok(true)\n",
}


@pytest.fixture(scope="module")
def eng(tmp_path_factory) -> Engine:
    root = tmp_path_factory.mktemp("mono")
    ws = root / "ws"
    for rel, text in FILES.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    e = Engine(ws, index_dir=str(root / "idx"), vectors=False)
    e.index(vectors=False)
    yield e
    e.close()


def _named(eng: Engine, path: str) -> set[str]:
    return {r["path"] for r in eng.related_tests(path) if "named after" in r["why"]}


def test_a_test_of_another_package_is_not_named_after_a_file(eng: Engine) -> None:
    assert _named(eng, "packages/a/src/utils.ts") == {"packages/a/src/__tests__/utils.spec.ts"}


def test_a_fixture_is_named_after_nothing(eng: Engine) -> None:
    assert _named(eng, "packages/a/src/server/index.ts") == set()
    rows = eng.related_tests("packages/a/src/server/index.ts")
    assert not any("fixture" in r["path"] for r in rows), rows


def test_a_folders_front_file_by_the_folder_the_test_names(eng: Engine) -> None:
    assert _named(eng, "packages/a/src/plugins/index.ts") == {"packages/a/src/__tests__/plugins/index.spec.ts"}


def test_a_go_test_of_another_folder_and_a_test_in_another_language_are_not_named_after(eng: Engine) -> None:
    assert _named(eng, "server/read/util.go") == set()
    assert _named(eng, "py/config.py") == set()


def test_a_test_of_a_language_without_a_module_and_a_test_named_file_in_mocks_keep_their_link(eng: Engine) -> None:
    """Spock's `RetrySpec.groovy` tests `Retry.java`; `mocks/server.test.ts` is a test by its name (review, s39)."""
    assert _named(eng, "jvm/src/main/java/com/acme/Retry.java") == {"jvm/src/test/groovy/com/acme/RetrySpec.groovy"}
    assert "packages/a/src/mocks/server.test.ts" in _named(eng, "packages/a/src/server.ts")


def test_a_name_spelt_by_another_package_s_test_is_not_its_test(eng: Engine) -> None:
    """create-vite's private `start()` had 19 lenses from vite's and the playground's tests (`server.start()`; a
    monorepo newcomer, session 39): a test of another package that spells the name without loading the file is out."""
    got = {r["path"] for r in eng.related_tests("packages/a/src/cli.ts", symbol="start")}
    assert "packages/b/__tests__/server.spec.ts" not in got, got
    assert "packages/a/src/__tests__/run.spec.ts" in got, got


def test_a_test_folder_named_after_a_front_file_s_folder_holds_its_tests(eng: Engine) -> None:
    """vite's `__tests__/optimizer/*.spec.ts` were none of `optimizer/index.ts`'s related tests (a package-folder
    newcomer, session 39): a front file stands for its folder, as `optimizer.ts` would."""
    rows = {r["path"]: r["why"] for r in eng.related_tests("packages/a/src/optimizer/index.ts")}
    assert rows.get("packages/a/src/__tests__/optimizer/resolve.spec.ts") == "in a test folder named after optimizer/"
