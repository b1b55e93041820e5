// Starts the real delphi-ls of this checkout over stdio for the Node tests, the way the extension starts it.
// Not under test/ so `node --test test/` does not run it as a test file.
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const rpc = require("vscode-jsonrpc/node");
export const logic = require("../out/logic.js");

const repoPython = resolve(new URL("../../.venv/bin/python", import.meta.url).pathname);
/** The Python that has this checkout's Delphi: DELPHI_PYTHON, else the checkout's .venv, else python3. */
export const python = process.env.DELPHI_PYTHON || (existsSync(repoPython) ? repoPython : "python3");

/** A small real workspace written as files, and an index folder beside it. */
export function writeWorkspace(files, prefix = "delphi-vsc-") {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const ws = join(root, "ws");
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(join(ws, p, ".."), { recursive: true });
    writeFileSync(join(ws, p), text);
  }
  return { ws, index: join(root, "index") };
}

/** Starts the server on `ws` with the extension's own serverCommand/initializationOptions; resolves once initialized. */
export async function startServer(ws, index, extraInit = {}) {
  const cfg = { get: (k) => ({ indexDir: index, "server.pythonPath": python })[k], isSet: (k) => k === "indexDir" };
  const { command, args } = logic.serverCommand(cfg);
  const proc = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
  conn.listen();
  const wsUri = pathToFileURL(ws).toString();
  await conn.sendRequest("initialize", { processId: process.pid, rootUri: wsUri, capabilities: {},
    workspaceFolders: [{ uri: wsUri, name: "ws" }], initializationOptions: { ...logic.initializationOptions(cfg), ...extraInit } });
  await conn.sendNotification("initialized", {});
  const stop = async () => {
    try {
      await conn.sendRequest("shutdown");
      await conn.sendNotification("exit");
    } finally {
      conn.dispose();
      proc.kill();
    }
  };
  return { conn, proc, stop };
}

/** Polls delphi/health until every file is indexed and embedded (the vector branch ready). */
export async function waitIndexed(conn, files) {
  let health;
  for (let i = 0; i < 600; i++) {
    health = await conn.sendRequest("delphi/health", {});
    const w = health.workspaces[0];
    if (w.counts.files >= files && w.counts.vectors === w.counts.chunks && w.branches.vector === "ready") return health;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the index never got ready: ${JSON.stringify(health)}`);
}

/**
 * A minimal MCP client over stdio (newline-delimited JSON-RPC), for the server definition the extension hands to
 * VS Code: spawns `spec.command spec.args` in `spec.cwd` with `spec.env` over this process's environment.
 */
export function mcpStdio(spec) {
  const proc = spawn(spec.command, spec.args, { cwd: spec.cwd, env: { ...process.env, ...spec.env }, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  let buf = "";
  let next = 1;
  const pending = new Map();
  const exited = new Promise((r) => proc.on("exit", (code) => r(code)));
  proc.stderr.on("data", (d) => { stderr += d; });
  proc.stdout.on("data", (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      const p = msg.id !== undefined && pending.get(msg.id);
      if (p) { pending.delete(msg.id); msg.error ? p.reject(Object.assign(new Error(msg.error.message), msg.error)) : p.resolve(msg.result); }
    }
  });
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = next++;
    pending.set(id, { resolve, reject });
    proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    // A process that dies answers nothing: fail the request with what it said.
    exited.then((code) => reject(new Error(`the MCP server exited (${code}): ${stderr}`)));
  });
  const notify = (method, params) => proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", method, params }) + "\n");
  const close = async () => { proc.stdin.end(); const t = setTimeout(() => proc.kill(), 5000); await exited; clearTimeout(t); };
  return { request, notify, close, stderr: () => stderr, exited };
}
