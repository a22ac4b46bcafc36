import { readFile } from 'node:fs/promises';
import test from 'ava';
import { settings } from '../core/config.ts';

test('the README starts with the install-and-run command and the test command', async (t) => {
  const readme = await readFile('README.md', 'utf8');
  const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
  const lines = firstBlock.split('\n').filter((line) => line.trim() !== '');
  t.regex(lines[0] ?? '', /^npm ci && npm start\b/);
  t.regex(lines[1] ?? '', /^npm test\b/);
});

test('the README configuration table lists every setting with its default and meaning, as core/config.ts says them', async (t) => {
  const readme = await readFile('README.md', 'utf8');
  for (const setting of settings) {
    const row = readme.split('\n').find((line) => line.split('|')[1]?.trim() === `\`${setting.name}\``);
    t.truthy(row, `${setting.name} is missing from the README`);
    t.is(
      row
        ?.split('|')[2]
        ?.trim()
        .replace(/^`(.*)`$/, '$1'),
      setting.default,
      `${setting.name}'s default in the README`,
    );
    t.is(row?.split('|')[3]?.trim(), setting.meaning, `${setting.name}'s meaning in the README`);
  }
});
