/**
 * The shape of the house (docs/architecture.md), checked on the sources: what each folder may import (static and
 * dynamic imports, every folder), no SQL in route files or reconcilers (each table's SQL lives in its module under
 * core/), one writer of each table, and no source file longer than 400 lines unless its header says why.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import ts from 'typescript';

const root = path.resolve(import.meta.dirname, '..');
const sourceFolders = ['app', 'api', 'core', 'engine', 'operator', 'client'];

/** What each folder may import besides packages ("What may import what"). */
const mayImport: Record<string, readonly string[]> = {
  core: ['core'],
  api: ['api', 'core'],
  engine: ['engine', 'core'],
  operator: ['operator', 'core'],
  app: ['app', 'api', 'core', 'engine', 'operator'],
  client: ['client'],
};

/** Every .ts file under `folder`, relative to the repository. */
function sources(folder: string): string[] {
  return readdirSync(path.join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.join(folder, file).split(path.sep).join('/'))
    .sort();
}

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
}

/** Every node of the file, depth first. */
function* nodes(node: ts.Node): Generator<ts.Node> {
  yield node;
  for (const child of node.getChildren()) yield* nodes(child);
}

test('each folder imports only what docs/architecture.md allows', (t) => {
  const refused: string[] = [];
  for (const folder of sourceFolders) {
    for (const file of sources(folder)) {
      for (const node of nodes(parse(file))) {
        const specifier =
          (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
          node.moduleSpecifier !== undefined &&
          ts.isStringLiteral(node.moduleSpecifier)
            ? node.moduleSpecifier.text
            : ts.isCallExpression(node) &&
                node.expression.kind === ts.SyntaxKind.ImportKeyword &&
                node.arguments[0] !== undefined &&
                ts.isStringLiteral(node.arguments[0])
              ? node.arguments[0].text
              : undefined;
        if (specifier === undefined || !specifier.startsWith('.')) continue;
        const target = path.relative(root, path.resolve(root, path.dirname(file), specifier)).split(path.sep)[0];
        if (!(mayImport[folder] ?? []).includes(target ?? '')) refused.push(`${file} imports ${specifier}`);
      }
    }
  }
  t.deepEqual(refused, [], `imports across the folders' rules:\n${refused.join('\n')}`);
});

/** The text of a string or template literal (a template's parts joined by spaces); undefined for any other node. */
function literalText(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) {
    return [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join(' ');
  }
  return undefined;
}

/** SQL statements, in capitals as this code base writes them. */
const sql = /\bSELECT\s[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b/;

test('no SQL in api/routes/ or operator/: each table has its module under core/', (t) => {
  const holding: string[] = [];
  for (const file of [...sources('api/routes'), ...sources('operator')]) {
    const lines: number[] = [];
    for (const node of nodes(parse(file))) {
      const text = literalText(node);
      if (text === undefined || !sql.test(text)) continue;
      lines.push(node.getSourceFile().getLineAndCharacterOfPosition(node.getStart()).line + 1);
    }
    if (lines.length > 0) holding.push(`${file} (lines ${lines.join(', ')})`);
  }
  t.deepEqual(holding, [], `SQL in route files or reconcilers:\n${holding.join('\n')}`);
});

/**
 * Each table's one writer ("One home for each table"): the only module that INSERTs into, UPDATEs or DELETEs from it,
 * anywhere in the sources. A new table gets its line here.
 */
const writerOf: Record<string, string> = {
  agent_states: 'core/agents/agent-states.ts',
  ai_agents: 'core/routing/ai-agents.ts',
  api_keys: 'core/identity/applications.ts',
  app_users: 'core/identity/users.ts',
  applications: 'core/identity/applications.ts',
  call_legs: 'core/calls/calls.ts',
  calls: 'core/calls/calls.ts',
  carriers: 'core/carriers/carriers.ts',
  devices: 'core/devices/devices.ts',
  event_streams: 'core/events/outbox.ts',
  events: 'core/events/outbox.ts',
  idempotency_counts: 'core/idempotency/records.ts',
  idempotency_records: 'core/idempotency/records.ts',
  members: 'core/identity/members.ts',
  message_dedupe: 'core/messages/dedupe.ts',
  message_events: 'core/messages/messages.ts',
  message_parts: 'core/messages/parts.ts',
  message_receipts: 'core/messages/receipts.ts',
  messages: 'core/messages/messages.ts',
  offers: 'core/devices/offers.ts',
  opt_outs: 'core/messages/opt-outs.ts',
  phone_numbers: 'core/numbers/numbers.ts',
  queue_entries: 'core/queues/entries.ts',
  queues: 'core/queues/queues.ts',
  recordings: 'core/calls/recordings.ts',
  resource_compactions: 'core/resources/postgres-store.ts',
  resource_writes: 'core/resources/writes.ts',
  resources: 'core/resources/postgres-store.ts',
  routing_plan_versions: 'core/routing/plans.ts',
  routing_plans: 'core/routing/plans.ts',
  schedules: 'core/routing/schedules.ts',
  service_secrets: 'core/identity/service-secrets.ts',
  sip_bindings: 'core/devices/sip-bindings.ts',
  sip_credentials: 'core/devices/sip-credentials.ts',
  verifications: 'core/verifications/verifications.ts',
  webhook_deliveries: 'core/webhooks/deliveries.ts',
  webhook_dispatchers: 'core/webhooks/dispatchers.ts',
  webhook_endpoints: 'core/webhooks/endpoints.ts',
  webhook_lanes: 'core/webhooks/deliveries.ts',
  workspaces: 'core/identity/workspaces.ts',
};

/**
 * Tables whose columns are shared between two modules, each writing only its own (docs/architecture.md): the call
 * commands' columns of `calls` are core/calls/commands.ts's, the rest of the call is core/calls/calls.ts's.
 */
const columnWriters: Record<string, { file: string; columns: readonly string[] }> = {
  calls: {
    file: 'core/calls/commands.ts',
    columns: ['hangup_requested_at', 'hold_requested', 'transfer_request', 'transfer_consulting', 'supervise_requests'],
  },
};

/** Writes outside a table's module, and why. */
const otherWriters: Record<string, string> = {
  'webhook_deliveries in core/events/outbox.ts': "an event's append queues its deliveries in the same statement",
  'webhook_lanes in core/events/outbox.ts': "an event's append wakes its lanes in the same statement",
};

/** The columns an UPDATE statement sets (each `column =` at the top of its SET list). */
function setColumns(statement: string): string[] {
  const list = /\bSET\s+([\s\S]*?)(?:\bFROM\b|\bWHERE\b|\bRETURNING\b|$)/.exec(statement)?.[1] ?? '';
  return [...list.matchAll(/(?:^|,)\s*([a-z_]+)\s*=/g)].map((match) => match[1] ?? '');
}

test('each table is written by its own module under core/ only', (t) => {
  const writes = /\b(?:INSERT\s+INTO|DELETE\s+FROM)\s+([a-z_]+)|\bUPDATE\s+([a-z_]+)(?:\s+\w+)?\s+SET\b/g;
  const found: string[] = [];
  for (const folder of sourceFolders) {
    for (const file of sources(folder)) {
      for (const node of nodes(parse(file))) {
        const text = literalText(node);
        if (text === undefined) continue;
        for (const match of text.matchAll(writes)) {
          const table = match[1] ?? match[2] ?? '';
          if (writerOf[table] === file || otherWriters[`${table} in ${file}`] !== undefined) continue;
          const shared = columnWriters[table];
          if (shared?.file === file && match[2] !== undefined) {
            const columns = setColumns(text.slice(match.index));
            const foreign = columns.filter((column) => !shared.columns.includes(column));
            if (columns.length > 0 && foreign.length === 0) continue;
            found.push(`${table} (${foreign.join(', ')}) in ${file}`);
            continue;
          }
          found.push(`${table} in ${file}${writerOf[table] === undefined ? ' (a table with no module named)' : ''}`);
        }
      }
    }
  }
  t.deepEqual([...new Set(found)], [], `tables written outside their module:\n${[...new Set(found)].join('\n')}`);
});

const maxLines = 400;
const reasonGiven = 'Longer than 400 lines because';

test(`no source file is longer than ${maxLines} lines unless its header says why`, (t) => {
  const long: string[] = [];
  for (const folder of sourceFolders) {
    for (const file of sources(folder)) {
      const text = readFileSync(path.join(root, file), 'utf8');
      const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      if (lines <= maxLines) continue;
      const header = (ts.getLeadingCommentRanges(text, 0) ?? []).map((range) => text.slice(range.pos, range.end));
      if (
        !header
          .join('\n')
          .replace(/\s*\n\s*\*?\s*/g, ' ')
          .includes(reasonGiven)
      )
        long.push(`${file} (${lines})`);
    }
  }
  t.deepEqual(long, [], `longer than ${maxLines} lines without "${reasonGiven} …" in the header:\n${long.join('\n')}`);
});

/**
 * Modules whose use is a wait on the network (a connection, a request, a lookup): any value imported from them. Of
 * node:http and node:net only their client calls count (a server is no wait); dgram sends are not waited on.
 */
const networkModules = new Set([
  'dns',
  'dns/promises',
  'https',
  'tls',
  'smpp',
  '@kubernetes/client-node',
  'werift',
  '@roamhq/wrtc',
]);
const clientCalls = new Map([
  ['http', new Set(['request', 'get'])],
  ['net', new Set(['connect', 'createConnection'])],
]);

/**
 * Files that use a network module without waiting on it themselves: their waits go through a function that checks
 * (`assertNotHoldingConnection`), named here.
 */
const waitsElsewhere: Record<string, string> = {
  'core/messages/encoding.ts': 'encodes and decodes SMPP PDUs; sends nothing',
  'core/resources/cluster.ts':
    "makes the Kubernetes clients; their calls are kubernetes-store.ts' and kubernetes-watch.ts'",
  'engine/media/webrtc.ts': "its waits are the offer's ICE gathering, checked in webrtc-endpoint.ts (createOffer)",
  'engine/media/webrtc-g711.ts': "its waits are the offer's ICE gathering, checked in webrtc-endpoint.ts (createOffer)",
  'engine/messaging/inbound.ts': "reads SMPP PDUs a session received; answers through session.ts's request, checked",
  'engine/messaging/link.ts': 'binds, enquires and unbinds through session.ts (connect, request), checked',
  'engine/messaging/sender.ts': "submits through session.ts's request, checked",
};

/** How `file` starts a wait on the network, if it does: the module or call, for the failure's message. */
function networkUse(file: string): string | undefined {
  const source = parse(file);
  const clients = new Map<string, Set<string> | 'all'>();
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
    const clause = statement.importClause;
    if (clause === undefined || clause.isTypeOnly) continue;
    const module = statement.moduleSpecifier.text.replace(/^node:/, '');
    const calls = clientCalls.get(module);
    if (networkModules.has(module)) {
      const named = clause.namedBindings;
      const values =
        clause.name !== undefined ||
        (named !== undefined && ts.isNamespaceImport(named)) ||
        (named !== undefined && ts.isNamedImports(named) && named.elements.some((element) => !element.isTypeOnly));
      if (values) return module;
      continue;
    }
    if (calls === undefined) continue;
    if (clause.name !== undefined) clients.set(clause.name.text, calls);
    const named = clause.namedBindings;
    if (named !== undefined && ts.isNamespaceImport(named)) clients.set(named.name.text, calls);
    if (named !== undefined && ts.isNamedImports(named)) {
      for (const element of named.elements) {
        if (calls.has((element.propertyName ?? element.name).text)) clients.set(element.name.text, 'all');
      }
    }
  }
  for (const node of nodes(source)) {
    if (!ts.isCallExpression(node)) continue;
    const callee = node.expression;
    if (ts.isIdentifier(callee) && (callee.text === 'fetch' || clients.get(callee.text) === 'all')) return callee.text;
    if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) {
      const calls = clients.get(callee.expression.text);
      if (calls !== undefined && calls !== 'all' && calls.has(callee.name.text)) return callee.getText();
    }
  }
  return undefined;
}

test('every wait on the network checks that no database connection is held (core/held-connections.ts)', (t) => {
  const unchecked: string[] = [];
  for (const folder of sourceFolders.filter((name) => name !== 'client')) {
    for (const file of sources(folder)) {
      const use = networkUse(file);
      if (use === undefined || waitsElsewhere[file] !== undefined) continue;
      if (!readFileSync(path.join(root, file), 'utf8').includes('assertNotHoldingConnection(')) {
        unchecked.push(`${file} (${use})`);
      }
    }
  }
  const stale = Object.keys(waitsElsewhere).filter((file) => networkUse(file) === undefined);
  t.deepEqual(unchecked, [], `network waits without assertNotHoldingConnection:\n${unchecked.join('\n')}`);
  t.deepEqual(stale, [], `listed in waitsElsewhere but using no network module: ${stale.join(', ')}`);
});
