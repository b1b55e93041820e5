import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions, State, TransportKind } from "vscode-languageclient/node";
import {
  anchorsOf, ContextAnswer, HealthSummary, initializationOptions, OpenDetail, openTestItems, packedMarkdown, quickPickItems,
  ServerSettingKey, serverCommand, startFailureMessage, statusText,
} from "./logic";
import { frontOptions, MCP_PROVIDER_ID, mcpCommand, mcpServerSpecs, settingsEnv } from "./mcp";
import {
  CONTEXT_TOOL, invocationMessage, RELATED_TESTS_TOOL, runContextTool, runRelatedTestsTool, Send, ToolError, toolFailure,
} from "./tools";

let client: LanguageClient | undefined;
// Settles when the current start attempt ends (client set, or startError saying why not); the agent tools wait on it.
let starting: Promise<void> = Promise.resolve();
let startError: string | undefined;
let status: vscode.StatusBarItem;
let indexing: { message?: string; percentage?: number } | undefined;

function reader(): { get<T>(k: string): T | undefined; isSet(k: string): boolean } {
  const cfg = vscode.workspace.getConfiguration("delphi");
  return {
    get: <T>(k: string) => cfg.get<T>(k),
    isSet: (k: string) => {
      const i = cfg.inspect(k as ServerSettingKey);
      return !!i && (i.globalValue !== undefined || i.workspaceValue !== undefined || i.workspaceFolderValue !== undefined);
    },
  };
}

function start(context: vscode.ExtensionContext): Promise<void> {
  starting = startClient(context);
  return starting;
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  startError = undefined;
  const cfg = reader();
  const { command, args } = serverCommand(cfg);
  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file" }],
    initializationOptions: { ...initializationOptions(cfg), ...frontOptions(cfg) },
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*") },
  };
  const c = new LanguageClient("delphi", "Delphi", serverOptions, clientOptions);
  client = c;
  c.onDidChangeState((e) => { if (e.newState === State.Stopped) refreshStatus("the server stopped"); });
  try {
    await c.start();
  } catch (err) {
    const msg = startFailureMessage(command, args, err);
    client = undefined;
    startError = msg;
    refreshStatus(msg);
    // Not awaited: the notification waits for the user, the agent tools waiting on `starting` must not.
    void offerFix(msg);
    return;
  }
  c.onNotification("$/progress", (p: { value?: { kind: string; message?: string; percentage?: number } }) => {
    if (!p.value) return;
    indexing = p.value.kind === "end" ? undefined : { message: p.value.message, percentage: p.value.percentage };
    if (p.value.kind === "end") void pollHealth(); else refreshStatus();
  });
  void pollHealth();
  context.subscriptions.push({ dispose: () => void client?.stop() });
}

async function offerFix(msg: string): Promise<void> {
  const pick = await vscode.window.showErrorMessage(msg, "Open settings", "Restart");
  if (pick === "Open settings") await vscode.commands.executeCommand("workbench.action.openSettings", "delphi.server");
  if (pick === "Restart") await vscode.commands.executeCommand("delphi.restart");
}

async function offerRestart(why: string): Promise<void> {
  const pick = await vscode.window.showInformationMessage(`Delphi: ${why}; restart the language server to apply it.`, "Restart");
  if (pick === "Restart") await vscode.commands.executeCommand("delphi.restart");
}

async function pollHealth(): Promise<HealthSummary | undefined> {
  if (!client) return undefined;
  try {
    const h = await client.sendRequest<HealthSummary>("delphi/health", {});
    refreshStatus(undefined, h);
    return h;
  } catch (err) {
    refreshStatus(String(err));
    return undefined;
  }
}

function refreshStatus(error?: string, health?: HealthSummary): void {
  const s = statusText({ indexing, health, error });
  status.text = s.text;
  status.tooltip = s.tooltip;
  status.backgroundColor = s.ok ? undefined : new vscode.ThemeColor("statusBarItem.warningBackground");
  status.show();
}

async function ask(extra: Record<string, unknown>): Promise<{ question: string; answer: ContextAnswer } | undefined> {
  if (!client) { void vscode.window.showErrorMessage("Delphi's server is not running."); return undefined; }
  const editor = vscode.window.activeTextEditor;
  const selected = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : "";
  const question = await vscode.window.showInputBox({ prompt: "Ask Delphi", value: selected.slice(0, 500),
    placeHolder: "where is TLS set up for the gRPC proxy?" });
  if (!question) return undefined;
  const doc = editor?.document.uri;
  const anchors = anchorsOf(doc?.toString(), doc?.scheme, doc !== undefined && vscode.workspace.getWorkspaceFolder(doc) !== undefined);
  try {
    const answer = await client.sendRequest<ContextAnswer>("delphi/context", { query: question, anchors, ...extra });
    return { question, answer };
  } catch (e) {  // a refused request (its message names the field) is said, not left as a failed command
    void vscode.window.showErrorMessage(`Delphi: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

/** The running client for an agent tool, waiting out a start under way; an error the model can act on if none. */
async function serverForTools(): Promise<LanguageClient> {
  await starting;
  if (client) return client;
  throw new Error(startError ?? "Delphi's language server is not running");
}

function agentTool(name: string, run: (send: Send, input: unknown) => Promise<string>): vscode.LanguageModelTool<unknown> {
  return {
    prepareInvocation: (options) => ({ invocationMessage: invocationMessage(name, options.input) }),
    invoke: async (options, token) => {
      try {
        const c = await serverForTools();
        const text = await run((method, params) => c.sendRequest(method, params, token), options.input);
        return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(text)]);
      } catch (err) {
        // Thrown errors reach the model as the tool's answer: a bad input says what to fix, anything else says
        // to fall back on text search.
        throw new Error(err instanceof ToolError ? `${name}: ${err.message}` : toolFailure(name, err));
      }
    },
  };
}

/** Registers the agent tools while delphi.agentTools.enabled is on (the manifest's `when` hides them when off). */
function agentTools(context: vscode.ExtensionContext): void {
  let registered: vscode.Disposable[] = [];
  const sync = () => {
    const on = vscode.workspace.getConfiguration("delphi").get<boolean>("agentTools.enabled", true);
    if (on && registered.length === 0) {
      registered = [
        vscode.lm.registerTool(CONTEXT_TOOL, agentTool(CONTEXT_TOOL, runContextTool)),
        vscode.lm.registerTool(RELATED_TESTS_TOOL, agentTool(RELATED_TESTS_TOOL, runRelatedTestsTool)),
      ];
    } else if (!on) {
      registered.forEach((d) => d.dispose());
      registered = [];
    }
  };
  sync();
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => { if (e.affectsConfiguration("delphi.agentTools.enabled")) sync(); }),
    { dispose: () => registered.forEach((d) => d.dispose()) },
  );
}

/** Offers `delphi mcp <folder>` for each workspace folder to VS Code's MCP support, while delphi.mcpServer.enabled. */
function mcpProvider(context: vscode.ExtensionContext): void {
  const changed = new vscode.EventEmitter<void>();
  let warned = "";
  context.subscriptions.push(
    changed,
    vscode.lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, {
      onDidChangeMcpServerDefinitions: changed.event,
      provideMcpServerDefinitions: () => {
        const cfg = vscode.workspace.getConfiguration("delphi");
        if (!cfg.get<boolean>("mcpServer.enabled", true)) return [];
        const start = mcpCommand(reader());
        const problems = [...settingsEnv(reader()).problems, ...(typeof start === "string" ? [start] : [])].join("; ");
        if (problems && problems !== warned) void vscode.window.showWarningMessage(`Delphi MCP server: ${problems}`);
        warned = problems;
        const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => ({ name: f.name, fsPath: f.uri.fsPath, scheme: f.uri.scheme }));
        return mcpServerSpecs(folders, reader(), String(context.extension.packageJSON.version)).map((s) => {
          const d = new vscode.McpStdioServerDefinition(s.label, s.command, s.args, s.env, s.version);
          d.cwd = vscode.Uri.file(s.cwd);
          return d;
        });
      },
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("delphi")) changed.fire();
      // The language server's loopback MCP daemon starts with the server; switching it needs a restart.
      if (e.affectsConfiguration("delphi.mcpServer.enabled")) void offerRestart("the MCP server setting changed");
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => changed.fire()),
  );
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  status.command = "delphi.showHealth";
  context.subscriptions.push(status);
  context.subscriptions.push(
    vscode.commands.registerCommand("delphi.findContext", async () => {
      const got = await ask({ limit: 20 });
      if (!got) return;
      const item = await vscode.window.showQuickPick(quickPickItems(got.answer), { matchOnDescription: true, matchOnDetail: true });
      if (!item) return;
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(item.uri));
      const pos = new vscode.Position(item.line, 0);
      await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, pos) });
    }),
    vscode.commands.registerCommand("delphi.copyContext", async () => {
      const budget = Number(await vscode.window.showInputBox({ prompt: "Token budget", value: "4000" })) || 4000;
      const got = await ask({ budgetTokens: budget });
      if (!got) return;
      await vscode.env.clipboard.writeText(packedMarkdown(got.question, got.answer));
      void vscode.window.showInformationMessage(`Delphi: copied ${got.answer.packedTokens ?? 0} tokens of context.`);
    }),
    vscode.commands.registerCommand("delphi.showHealth", async () => {
      const h = await pollHealth();
      const doc = await vscode.workspace.openTextDocument({ language: "json", content: JSON.stringify(h ?? {}, null, 2) });
      await vscode.window.showTextDocument(doc);
    }),
    vscode.commands.registerCommand("delphi.reindex", async () => {
      await client?.sendRequest("workspace/executeCommand", { command: "delphi.reindex", arguments: [] });
    }),
    vscode.commands.registerCommand("delphi.restart", async () => {
      await client?.stop().catch(() => undefined);
      client = undefined;
      await start(context);
    }),
    // Also opens the source a test exercises (the lens on a test file passes its own placeholder).
    vscode.commands.registerCommand("delphi.openTests", async (uris: string[], placeHolder?: string, details?: OpenDetail[]) => {
      if (!uris || uris.length === 0) return;
      const items = openTestItems(uris, details);
      const pick = items.length === 1 ? items[0] : await vscode.window.showQuickPick(items, { placeHolder: placeHolder ?? "Related tests", matchOnDetail: true });
      if (pick) {
        const at = new vscode.Position(pick.line, 0);
        await vscode.window.showTextDocument(vscode.Uri.parse(pick.uri), { selection: new vscode.Range(at, at) });
      }
    }),
  );
  refreshStatus();
  // Before the server starts: a tool call that activated the extension waits on `starting` rather than failing.
  agentTools(context);
  mcpProvider(context);
  await start(context);
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
