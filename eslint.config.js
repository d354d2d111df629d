// Lint: ESLint's and typescript-eslint's recommended rules, without type information (fast: no program to build).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'bench/out/', 'test/fixtures/', '.care-etl/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // `const { id: _id, ...rest } = x` drops a field on purpose: a leading `_` marks a name as unused by design.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Matching control characters is the job of the CSV, text and report sanitisers (spreadsheet-safe cells, NUL checks).
      'no-control-regex': 'off',
      // An async generator method cannot capture `this` lexically; `const self = this` is the one way in.
      '@typescript-eslint/no-this-alias': ['error', { allowedNames: ['self'] }],
    },
  },
  {
    files: ['test/**'],
    // Tests navigate parsed JSON answers freely; typing every fixture shape would add noise, not safety.
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
