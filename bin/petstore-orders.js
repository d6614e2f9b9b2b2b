#!/usr/bin/env node
// The operator CLI. The TypeScript sources are compiled to dist/ by `npm ci` (the prepare script).
import '../dist/cli/main.js'
