import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(import.meta.url);
const logic = require("../out/logic.js");
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url)));

function reader(values) {
  return { get: (k) => values[k], isSet: (k) => Object.prototype.hasOwnProperty.call(values, k) };
}

test("every server setting is contributed as delphi.<key>, and nothing else but the extension's own", () => {
  const props = Object.keys(pkg.contributes.configuration.properties).map((k) => k.replace(/^delphi\./, ""));
  const own = ["server.command", "server.pythonPath", "agentTools.enabled", "mcpServer.enabled", "mcpServer.command"];
  const server = props.filter((k) => !own.includes(k));
  assert.deepEqual([...server].sort(), [...logic.SERVER_SETTING_KEYS].sort());
  for (const k of server) assert.ok(pkg.contributes.configuration.properties[`delphi.${k}`].description);
});

test("initializationOptions carry only what the user set", () => {
  const opts = logic.initializationOptions(reader({ embedder: "minilm-l6-int8", rrfK: 20, indexDir: null }));
  assert.deepEqual(opts, { embedder: "minilm-l6-int8", rrfK: 20 });
  assert.deepEqual(logic.initializationOptions(reader({})), {});
});

test("server command: explicit, or python -m delphi_ls", () => {
  assert.deepEqual(logic.serverCommand(reader({ "server.command": ["/v/bin/delphi-ls", "--x"] })),
    { command: "/v/bin/delphi-ls", args: ["--x"] });
  assert.deepEqual(logic.serverCommand(reader({ "server.pythonPath": "/v/bin/python" })),
    { command: "/v/bin/python", args: ["-m", "delphi_ls"] });
  assert.deepEqual(logic.serverCommand(reader({})), { command: "python3", args: ["-m", "delphi_ls"] });
});

const answer = {
  results: [
    { path: "proxy/grpc_proxy.go", uri: "file:///w/proxy/grpc_proxy.go", rank: 1, score: 0.1, kind: "code",
      branches: { symbol: 1, bm25: 2 }, spans: [{ startLine: 15, endLine: 22, symbol: "NewGrpcProxy", preview: "func NewGrpcProxy(" }],
      why: "symbol #1: defines `NewGrpcProxy`" },
    { path: "README.md", uri: "file:///w/README.md", rank: 2, score: 0.05, kind: "doc", branches: { bm25: 1 }, spans: [], why: "bm25 #1: words match" },
  ],
  packed: [{ path: "proxy/grpc_proxy.go", startLine: 15, endLine: 22, text: "func NewGrpcProxy() {}\n", whole: false }],
  packedTokens: 6,
};

test("quick pick items show rank, path, branches, why and open at the best span", () => {
  const items = logic.quickPickItems(answer);
  assert.equal(items[0].label, "1. proxy/grpc_proxy.go");
  assert.equal(items[0].description, "code · symbol:1 bm25:2");
  assert.match(items[0].detail, /defines `NewGrpcProxy` — L15: func NewGrpcProxy\(/);
  assert.equal(items[0].line, 14);
  assert.equal(items[1].line, 0);
});

test("packed context renders as Markdown with fenced spans", () => {
  const md = logic.packedMarkdown("where is TLS set up?", answer);
  assert.match(md, /^Context for: where is TLS set up\?/);
  assert.match(md, /### proxy\/grpc_proxy.go \(lines 15-22\)\n```go\nfunc NewGrpcProxy\(\) \{\}\n```/);
});

test("the start failure names the README's install step and the setting, not a package index", () => {
  const msg = logic.startFailureMessage("python3", ["-m", "delphi_ls"], new Error("spawn python3 ENOENT"));
  assert.match(msg, /python3 -m delphi_ls/);
  assert.match(msg, /ENOENT/);
  assert.match(msg, /scripts\/try\.sh/);
  assert.match(msg, /delphi\.server\.pythonPath/);
  assert.doesNotMatch(msg, /pip install delphi-ls/);
});

test("status text: progress, then green, or what is wrong", () => {
  assert.equal(logic.statusText({ indexing: { percentage: 40, message: "lexical: 40/100 files" } }).text, "$(sync~spin) Delphi 40%");
  const ok = { workspaces: [{ ok: true, counts: { files: 12, chunks: 30, vectors: 30 }, problems: [{ severity: "info", message: "reranker off" }] }] };
  assert.deepEqual(logic.statusText({ health: ok }), { text: "$(check) Delphi", tooltip: "12 files indexed; click for the health report", ok: true });
  const bad = { workspaces: [{ ok: false, counts: { files: 1, chunks: 1, vectors: 0 }, problems: [{ severity: "error", message: "vector branch disabled: model mismatch" }] }] };
  const s = logic.statusText({ health: bad });
  assert.equal(s.ok, false);
  assert.equal(s.text, "$(warning) Delphi: 1 problem");
  assert.match(s.tooltip, /model mismatch/);
  assert.equal(logic.statusText({ error: "server stopped" }).ok, false);
});

test("the manifest lists the commands", () => {
  const cmds = pkg.contributes.commands.map((c) => c.command).sort();
  assert.deepEqual(cmds, ["delphi.copyContext", "delphi.findContext", "delphi.reindex", "delphi.restart", "delphi.showHealth"]);
});

test("the open file anchors a question only when it is a file inside an open workspace folder", () => {
  const uri = "file:///ws/src/app.py";
  assert.deepEqual(logic.anchorsOf(uri, "file", true), [uri]);
  // A file opened from outside every folder (site-packages after go-to-definition): the server refuses such an
  // anchor and the whole request with it, so none is sent.
  assert.deepEqual(logic.anchorsOf("file:///usr/lib/python3/site-packages/x.py", "file", false), []);
  assert.deepEqual(logic.anchorsOf("untitled:Untitled-1", "untitled", true), []);
  assert.deepEqual(logic.anchorsOf(undefined, undefined, false), []);
});

test("a lens's files open at their line, listed by path and why; URIs alone (an older server) still open", () => {
  const items = logic.openTestItems(["file:///w/src/defs.rs", "file:///w/tests/misc.rs"],
    [{ line: 1781, path: "src/defs.rs", why: "inline test `reports_match` at line 1781" }, { line: 1, path: "tests/misc.rs", why: "mentions `heading`" }]);
  assert.deepEqual(items.map((i) => [i.label, i.line, i.uri]), [["src/defs.rs", 1780, "file:///w/src/defs.rs"], ["tests/misc.rs", 0, "file:///w/tests/misc.rs"]]);
  assert.equal(items[0].detail, "inline test `reports_match` at line 1781");
  assert.deepEqual(logic.openTestItems(["file:///w/a.py"]).map((i) => [i.label, i.line]), [["file:///w/a.py", 0]]);
});
