// Lint rules: ESLint's and typescript-eslint's recommended sets (formatting is Prettier's job), and what each folder
// may import (docs/architecture.md, "What may import what"; test/architecture.test.ts checks the same).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** A relative import that leaves the folder for one of `folders` (at the top of the repository). */
const into = (folders) => ({
  regex: `^(\\.\\./)+(${folders.join('|')})/`,
  message: 'docs/architecture.md, "What may import what": core/ imports no role, and no role imports another.',
});
/** What each folder may not import: core/ no role, a role no other role, none of them app/. */
const importRules = [
  { files: ['core/**/*.ts'], banned: ['api', 'engine', 'operator', 'app'] },
  { files: ['api/**/*.ts'], banned: ['engine', 'operator', 'app'] },
  { files: ['engine/**/*.ts'], banned: ['api', 'operator', 'app'] },
  { files: ['operator/**/*.ts'], banned: ['api', 'engine', 'app'] },
].map(({ files, banned }) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [into(banned)] }] },
}));

export default defineConfig(
  { ignores: ['node_modules/', '.switchboard/', 'dist/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
  ...importRules,
);
