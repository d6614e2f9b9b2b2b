#!/usr/bin/env node
// The operator CLI. The TypeScript sources are compiled to dist/ by `npm ci` (the prepare script).
// Checked before anything loads: on an older Node, better-sqlite3's Node-API 10 binary crashes the
// process without a word (Node-API 10 came with Node 22.14).
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 14)) {
  process.stderr.write(`petstore-orders: Node.js ${process.version} is too old: it needs Node.js 22.14 or later (24 recommended)\n`)
  process.exit(1)
}
await import('../dist/cli/main.js')
