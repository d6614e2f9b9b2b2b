import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist/', 'packages/*/dist/', 'node_modules/', 'data/', '.bench/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: 'error',
    },
  },
  { files: ['bin/**/*.js'], languageOptions: { globals: { process: 'readonly' } } },
  // Scripts the server sends to browsers: classic scripts (no modules) with the page's globals only.
  {
    files: ['src/http/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: { window: 'readonly', document: 'readonly', URL: 'readonly', crypto: 'readonly', SwaggerUIBundle: 'readonly' },
    },
  },
)
