// The MCP server definitions the extension hands VS Code, under plain Node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const mcp = require("../out/mcp.js");

function reader(values) {
  return { get: (k) => values[k], isSet: (k) => Object.prototype.hasOwnProperty.call(values, k) && !k.includes(".") };
}

test("one stdio definition per local folder: <pythonPath> -m delphi_ls.cli mcp <folder>", () => {
  const folders = [
    { name: "api", fsPath: "/src/api", scheme: "file" },
    { name: "web", fsPath: "/src/web", scheme: "file" },
    { name: "remote", fsPath: "/r", scheme: "vscode-vfs" },
  ];
  const specs = mcp.mcpServerSpecs(folders, reader({ "server.pythonPath": "/d/.venv/bin/python", indexDir: "/idx" }), "0.1.0");
  assert.deepEqual(specs.map((s) => s.label), ["Delphi (api)", "Delphi (web)"]);
  assert.deepEqual(specs[0], { label: "Delphi (api)", command: "/d/.venv/bin/python",
    args: ["-m", "delphi_ls.cli", "mcp", "/src/api"], cwd: "/src/api", env: { DELPHI_INDEX_DIR: "/idx" }, version: "0.1.0" });
  const one = mcp.mcpServerSpecs([folders[0]], reader({}), "0.1.0");
  assert.equal(one[0].label, "Delphi");
  assert.equal(one[0].command, "python3");
  assert.deepEqual(one[0].env, {});
  assert.deepEqual(mcp.mcpServerSpecs([], reader({}), "0.1.0"), []);
});

test("the MCP command follows delphi.server.command, or delphi.mcpServer.command, or says why not", () => {
  // delphi.server.command was ignored: the MCP server ran python3 -m delphi_ls.cli on the system Python (session 26).
  const f = [{ name: "ws", fsPath: "/w", scheme: "file" }];
  const spec = (values) => mcp.mcpServerSpecs(f, reader(values), "0.1.0").map((s) => [s.command, ...s.args]);
  assert.deepEqual(spec({ "server.command": ["/d/.venv/bin/delphi-ls"] }), [["/d/.venv/bin/delphi", "mcp", "/w"]]);
  assert.deepEqual(spec({ "server.command": ["/d/py", "-X", "utf8", "-m", "delphi_ls"] }),
    [["/d/py", "-X", "utf8", "-m", "delphi_ls.cli", "mcp", "/w"]]);
  assert.deepEqual(spec({ "mcpServer.command": ["/x/delphi", "mcp", "--no-daemon"], "server.command": ["wrap"] }),
    [["/x/delphi", "mcp", "--no-daemon", "/w"]]);
  assert.deepEqual(spec({ "server.command": ["ssh", "box", "delphi-ls"] }), []);
  assert.match(mcp.mcpCommand(reader({ "server.command": ["ssh", "box", "delphi-ls"] })), /delphi\.mcpServer\.command/);
});

test("settings travel as DELPHI_* variables; what a variable cannot carry is named", () => {
  const { env, problems } = mcp.settingsEnv(reader({ rrfK: 20, vectors: false, extraIgnores: ["a/", "b/"],
    branchWeights: { vector: 0 }, embedder: "minilm-l6-int8", chromaUrl: null }));
  assert.deepEqual(env, { DELPHI_RRF_K: "20", DELPHI_VECTORS: "false", DELPHI_EXTRA_IGNORES: "a/,b/",
    DELPHI_BRANCH_WEIGHTS: "vector=0", DELPHI_EMBEDDER: "minilm-l6-int8" });
  assert.deepEqual(problems, []);
  const bad = mcp.settingsEnv(reader({ extraIgnores: ["{a,b}/"] }));
  assert.deepEqual(bad.env, {});
  assert.match(bad.problems[0], /delphi\.extraIgnores: "\{a,b\}\/" cannot be passed/);
});

test("the language server serves MCP on loopback unless the MCP server is turned off", () => {
  assert.deepEqual(mcp.frontOptions(reader({})), { mcpHttp: true });
  assert.deepEqual(mcp.frontOptions({ get: (k) => (k === "mcpServer.enabled" ? false : undefined), isSet: () => true }), {});
});

test("the README's delphi.mcpServer.command example is one mcpCommand takes as written", async () => {
  const { readFileSync } = await import("node:fs");
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8").replace(/\s*\n\s*/g, " ");
  const m = readme.match(/`delphi\.mcpServer\.command` \(e\.g\. `(\[[^`]*\])`/);
  assert.ok(m, "README lost its delphi.mcpServer.command example");
  const example = JSON.parse(m[1]);
  const got = mcp.mcpCommand(reader({ "mcpServer.command": example }));
  assert.deepEqual([got.command, ...got.args], example);
  assert.equal(example[example.length - 1], "mcp");  // the folder is appended after it
});
