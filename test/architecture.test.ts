/**
 * The shape of the house (docs/architecture.md), checked on the sources: what each folder may import (static and
 * dynamic imports, every folder), no SQL in route files or reconcilers (each table's SQL lives in its module under
 * core/), and no source file longer than 400 lines unless its header says why.
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

/** SQL statements, in capitals as this code base writes them. */
const sql = /\bSELECT\s[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b/;

test('no SQL in api/routes/ or operator/: each table has its module under core/', (t) => {
  const holding: string[] = [];
  for (const file of [...sources('api/routes'), ...sources('operator')]) {
    const lines: number[] = [];
    for (const node of nodes(parse(file))) {
      const text =
        ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)
          ? node.text
          : ts.isTemplateExpression(node)
            ? [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join(' ')
            : undefined;
      if (text === undefined || !sql.test(text)) continue;
      lines.push(node.getSourceFile().getLineAndCharacterOfPosition(node.getStart()).line + 1);
    }
    if (lines.length > 0) holding.push(`${file} (lines ${lines.join(', ')})`);
  }
  t.deepEqual(holding, [], `SQL in route files or reconcilers:\n${holding.join('\n')}`);
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
