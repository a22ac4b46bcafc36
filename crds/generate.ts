/**
 * `npm run crds`: writes the CustomResourceDefinitions (core/resources/crds.ts) to this folder and the same files to
 * the Helm chart (`charts/switchboard/files/crds/`, rendered by its `crds.yaml` template), and removes CRD files no
 * kind makes any more from both. test/core/crds.test.ts fails when either folder is not what this would write.
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { crdFiles } from '../core/resources/crds.ts';

const folders = [
  { path: fileURLToPath(new URL('./', import.meta.url)), label: 'crds/' },
  {
    path: fileURLToPath(new URL('../charts/switchboard/files/crds/', import.meta.url)),
    label: 'charts/switchboard/files/crds/',
  },
];
const files = crdFiles();
for (const folder of folders) {
  await mkdir(folder.path, { recursive: true });
  for (const [name, text] of files) await writeFile(`${folder.path}${name}`, text);
  for (const name of await readdir(folder.path)) {
    if (name.endsWith('.yaml') && !files.has(name)) await rm(`${folder.path}${name}`);
  }
}
process.stdout.write(
  `wrote ${[...files.keys()].join(', ')} to ${folders.map((folder) => folder.label).join(' and ')}\n`,
);
