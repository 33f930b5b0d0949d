// Lint rules that catch what the type checker does not: promises nobody awaits, and import
// cycles (arrows point inward: http → actors → runtime/store, never back).
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.wheelhouse/', 'coverage/'] },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'examples/**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
    },
  },
);
