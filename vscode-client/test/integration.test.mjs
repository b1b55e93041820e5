// Starts the real delphi-ls over stdio from Node, with the initialization options the extension sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const rpc = require("vscode-jsonrpc/node");
const logic = require("../out/logic.js");

const repoPython = resolve(new URL("../../.venv/bin/python", import.meta.url).pathname);
const python = process.env.DELPHI_PYTHON || (existsSync(repoPython) ? repoPython : "python3");

function fixture() {
  const root = mkdtempSync(join(tmpdir(), "delphi-vsc-"));
  const ws = join(root, "ws");
  const files = {
    "proxy/grpc_proxy.go": "package proxy\n\nimport \"crypto/tls\"\n\n// NewGrpcProxy sets up TLS for the gRPC proxy.\nfunc NewGrpcProxy(cert, key string) (*tls.Config, error) {\n\tc, err := tls.LoadX509KeyPair(cert, key)\n\treturn &tls.Config{Certificates: []tls.Certificate{c}}, err\n}\n",
    "proxy/grpc_proxy_test.go": "package proxy\n\nimport \"testing\"\n\nfunc TestNewGrpcProxy(t *testing.T) {\n\tif _, err := NewGrpcProxy(\"a\", \"b\"); err == nil {\n\t\tt.Fatal(\"want error\")\n\t}\n}\n",
    "README.md": "# Demo\nA gRPC proxy.\n",
  };
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(join(ws, p, ".."), { recursive: true });
    writeFileSync(join(ws, p), text);
  }
  return { ws, index: join(root, "index") };
}

test("delphi/context, delphi/health and code lens through the real server", { timeout: 180000 }, async () => {
  const { ws, index } = fixture();
  const cfg = { get: (k) => ({ indexDir: index, "server.pythonPath": python })[k], isSet: (k) => k === "indexDir" };
  const { command, args } = logic.serverCommand(cfg);
  const proc = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
  conn.listen();
  try {
    const wsUri = pathToFileURL(ws).toString();
    await conn.sendRequest("initialize", { processId: process.pid, rootUri: wsUri, capabilities: {},
      workspaceFolders: [{ uri: wsUri, name: "ws" }], initializationOptions: logic.initializationOptions(cfg) });
    await conn.sendNotification("initialized", {});
    let health;
    for (let i = 0; i < 600; i++) {
      health = await conn.sendRequest("delphi/health", {});
      const w = health.workspaces[0];
      if (w.counts.files >= 3 && w.counts.vectors === w.counts.chunks && w.branches.vector === "ready") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(health.workspaces[0].indexDir, index);
    const answer = await conn.sendRequest("delphi/context", { query: "where is TLS set up for the gRPC proxy?", limit: 3 });
    assert.equal(answer.results[0].path, "proxy/grpc_proxy.go");
    const items = logic.quickPickItems(answer);
    assert.equal(items[0].label, "1. proxy/grpc_proxy.go");
    const lenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri: pathToFileURL(join(ws, "proxy/grpc_proxy.go")).toString() } });
    assert.equal(lenses[0].command.title, "1 related test");
    assert.equal(lenses[0].command.command, "delphi.openTests");
    await assert.rejects(conn.sendRequest("delphi/context", { query: "" }), /query/);
    await conn.sendRequest("shutdown");
    await conn.sendNotification("exit");
  } finally {
    conn.dispose();
    proc.kill();
  }
});
