/**
 * `npm run crds`: writes the CustomResourceDefinitions (core/resources/crds.ts) to this folder, and removes CRD
 * files no kind makes any more. test/crds.test.ts fails when the files here are not what this would write.
 */
import { readdir, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { crdFiles } from '../core/resources/crds.ts';

const folder = fileURLToPath(new URL('./', import.meta.url));
const files = crdFiles();
for (const [name, text] of files) await writeFile(`${folder}${name}`, text);
for (const name of await readdir(folder)) {
  if (name.endsWith('.yaml') && !files.has(name)) await rm(`${folder}${name}`);
}
process.stdout.write(`wrote ${[...files.keys()].join(', ')} to crds/\n`);
