// package.json against the code: the contributed tools, MCP provider, settings and activation events.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(import.meta.url);
const tools = require("../out/tools.js");
const mcp = require("../out/mcp.js");
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url)));
const lock = JSON.parse(readFileSync(new URL("../package-lock.json", import.meta.url)));
const extension = readFileSync(new URL("../src/extension.ts", import.meta.url), "utf8");

test("languageModelTools: the names and input schemas the code registers and validates", () => {
  const contributed = pkg.contributes.languageModelTools;
  assert.deepEqual(contributed.map((t) => t.name), [...tools.TOOL_NAMES]);
  const schemas = { [tools.CONTEXT_TOOL]: tools.CONTEXT_SCHEMA, [tools.RELATED_TESTS_TOOL]: tools.RELATED_TESTS_SCHEMA };
  for (const t of contributed) {
    assert.deepEqual(t.inputSchema, JSON.parse(JSON.stringify(schemas[t.name])), t.name);
    // When to use it, and when grep is the better tool.
    assert.match(t.modelDescription, /grep/, t.name);
    assert.ok(t.modelDescription.length > 200, t.name);
    assert.ok(t.displayName && t.userDescription && t.toolReferenceName, t.name);
    assert.equal(t.when, "config.delphi.agentTools.enabled", t.name);
  }
  assert.deepEqual(tools.CONTEXT_SCHEMA.required, ["query"]);
  assert.deepEqual(tools.RELATED_TESTS_SCHEMA.required, ["path"]);
  assert.equal(tools.CONTEXT_SCHEMA.properties.budgetTokens.default, 6000);
  assert.equal(tools.CONTEXT_SCHEMA.properties.budgetTokens.maximum, 24000);
  // extension.ts registers each contributed tool under its constant.
  for (const c of ["CONTEXT_TOOL", "RELATED_TESTS_TOOL"]) assert.match(extension, new RegExp(`lm\\.registerTool\\(${c},`));
});

test("mcpServerDefinitionProviders: the id the code registers, with a label", () => {
  assert.deepEqual(pkg.contributes.mcpServerDefinitionProviders.map((p) => p.id), [mcp.MCP_PROVIDER_ID]);
  assert.ok(pkg.contributes.mcpServerDefinitionProviders[0].label);
  assert.match(extension, /lm\.registerMcpServerDefinitionProvider\(MCP_PROVIDER_ID,/);
});

test("settings to turn the tools and the MCP server off, read by the code", () => {
  const props = pkg.contributes.configuration.properties;
  for (const key of ["agentTools.enabled", "mcpServer.enabled"]) {
    assert.equal(props[`delphi.${key}`].type, "boolean");
    assert.equal(props[`delphi.${key}`].default, true);
    assert.ok(extension.includes(`"${key}"`) || extension.includes(`"delphi.${key}"`), key);
  }
});

test("activation: source files of the supported languages, the commands and the tools; never every window", () => {
  const events = pkg.activationEvents;
  assert.ok(!events.includes("onStartupFinished") && !events.includes("*"));
  for (const ext of ["py", "js", "ts", "tsx", "go", "rs", "java"]) assert.ok(events.includes(`workspaceContains:**/*.${ext}`), ext);
  for (const c of pkg.contributes.commands) assert.ok(events.includes(`onCommand:${c.command}`), c.command);
  for (const t of tools.TOOL_NAMES) assert.ok(events.includes(`onLanguageModelTool:${t}`), t);
});

test("engine and @types/vscode have the lm tool and MCP APIs (1.101+), and vsce's rule types <= engine holds", () => {
  const ver = (s) => s.replace(/^[\^~]/, "").split(".").map(Number);
  const engine = ver(pkg.engines.vscode);
  const types = ver(lock.packages["node_modules/@types/vscode"].version);
  const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
  assert.ok(cmp(engine, [1, 101, 0]) >= 0, pkg.engines.vscode);
  assert.ok(cmp(types, [1, 101, 0]) >= 0 && cmp(types, engine) <= 0, String(types));
});

test("no placeholder repository URL", () => {
  assert.ok(!pkg.repository || !/example\.(invalid|com)/.test(JSON.stringify(pkg.repository)));
});

test("a cloned folder's .vscode/settings.json cannot start programs, reach the network or choose where files are written", () => {
  // Workspace settings come with the repository: a hostile clone could otherwise set the server command
  // (code execution on open), a Chroma URL (uploading every chunk) or the index and trace paths.
  const props = pkg.contributes.configuration.properties;
  for (const key of ["delphi.server.command", "delphi.server.pythonPath", "delphi.mcpServer.command", "delphi.indexDir",
                     "delphi.chromaUrl", "delphi.traceFile"]) {
    assert.equal(props[key].scope, "machine", `${key} must be a user (machine) setting`);
  }
  const untrusted = pkg.capabilities.untrustedWorkspaces;
  assert.equal(untrusted.supported, "limited");
  assert.deepEqual(untrusted.restrictedConfigurations.sort(), ["delphi.embedder", "delphi.reranker"]);
});
