// Starts the real delphi-ls over stdio from Node, with the initialization options the extension sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { logic, startServer, waitIndexed, writeWorkspace } from "../testlib/server.mjs";

const FILES = {
  "proxy/grpc_proxy.go": "package proxy\n\nimport \"crypto/tls\"\n\n// NewGrpcProxy sets up TLS for the gRPC proxy.\nfunc NewGrpcProxy(cert, key string) (*tls.Config, error) {\n\tc, err := tls.LoadX509KeyPair(cert, key)\n\treturn &tls.Config{Certificates: []tls.Certificate{c}}, err\n}\n",
  "proxy/grpc_proxy_test.go": "package proxy\n\nimport \"testing\"\n\nfunc TestNewGrpcProxy(t *testing.T) {\n\tif _, err := NewGrpcProxy(\"a\", \"b\"); err == nil {\n\t\tt.Fatal(\"want error\")\n\t}\n}\n",
  "README.md": "# Demo\nA gRPC proxy.\n",
};

test("delphi/context, delphi/health and code lens through the real server", { timeout: 180000 }, async () => {
  const { ws, index } = writeWorkspace(FILES);
  const { conn, stop } = await startServer(ws, index);
  try {
    const health = await waitIndexed(conn, 3);
    assert.equal(health.workspaces[0].indexDir, index);
    const answer = await conn.sendRequest("delphi/context", { query: "where is TLS set up for the gRPC proxy?", limit: 3 });
    assert.equal(answer.results[0].path, "proxy/grpc_proxy.go");
    const items = logic.quickPickItems(answer);
    assert.equal(items[0].label, "1. proxy/grpc_proxy.go");
    const lenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri: pathToFileURL(join(ws, "proxy/grpc_proxy.go")).toString() } });
    assert.equal(lenses[0].command.title, "1 related test");
    assert.equal(lenses[0].command.command, "delphi.openTests");
    await assert.rejects(conn.sendRequest("delphi/context", { query: "" }), /query/);
  } finally {
    await stop();
  }
});
