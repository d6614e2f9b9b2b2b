import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { gzip as gzipCallback } from 'node:zlib'
import { Negotiator } from '@fastify/accept-negotiator'
import { errorBody } from '../../errors.js'
import type { Config } from '../../config.js'
import type { ApiApp } from '../api-app.js'

/**
 * `GET /docs`: an interactive API reference (Swagger UI) rendered from `/v1/openapi.json` or, picked
 * in the page's version selector, `/v2/openapi.json`. Public, like the documents, and hidden from them.
 *
 * Why Swagger UI, and why these few routes rather than a plugin's:
 * - Swagger UI renders everything a reader needs from the document alone (operations with their
 *   summaries and operationIds, deprecation, schemas, the bearer scheme, per-status examples) and
 *   ships as two static files: no framework, no peer dependencies, no fonts or scripts from a CDN.
 * - The files come from swagger-ui-dist, pinned to an exact version and served by these routes (its
 *   four files named in ASSETS, nothing else of the package). Its install-time analytics dependency
 *   (@scarf/scarf) is denied its install script in package.json (`allowScripts`, and
 *   `scarfSettings` for npm versions without `allowScripts`). Not @fastify/swagger-ui: its plugin
 *   routes were never used (a `/docs/` variant that escapes the onRoute hook building the 405
 *   handlers, a second copy of the document at `/docs/json`), and its current major pulls a
 *   dependency that refuses Node 20. The page here loads the canonical `/v1/openapi.json` and
 *   `/v2/openapi.json`.
 * - The version selector is a plain `<select>` of this page rather than Swagger UI's `urls` with the
 *   standalone preset's top bar: the preset is a further 268 KB, and its top bar also offers a box to
 *   load any URL and reads `urls.primaryName` from the page's query string. The selector does what
 *   the top bar does on a change (`updateUrl`, then `download`), with the two documents only.
 * - Every path is relative to the page, so the reference also works behind a path prefix; the CSP
 *   lets the page load nothing that this server does not serve. "Try it out" calls this server
 *   first (see PAGE_SCRIPT) and may call the two servers the document names (and nothing else).
 */
export function docsRoutes(app: ApiApp, config: Config): void {
  const serverOrigins = [config.publicBaseUrl, config.stagingBaseUrl].map((url) => new URL(url).origin)
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'", // the UI sets inline style attributes
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src 'self' ${[...new Set(serverOrigins)].join(' ')}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
  const page = { 'content-security-policy': csp, 'referrer-policy': 'no-referrer' }

  app.get('/docs', { schema: { hide: true } }, async (_request, reply) =>
    reply.headers(page).type('text/html; charset=utf-8').send(INDEX_HTML),
  )
  // A common way to type it; relative, so that it also works behind a path prefix.
  app.get('/docs/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('../docs', 301))
  app.get('/docs/init.js', { schema: { hide: true } }, async (_request, reply) =>
    reply.headers(page).type('text/javascript; charset=utf-8').send(PAGE_SCRIPT),
  )
  app.get<{ Params: { file: string } }>('/docs/assets/:file', { schema: { hide: true } }, async (request, reply) => {
    const asset = ASSETS.get(request.params.file) // a Map: no name reaches an inherited property
    if (asset === undefined) return reply.code(404).send(errorBody('not_found'))
    const { identity, gzip } = await loadAsset(request.params.file, asset)
    // The files change only with the package version, which the server's own version pins.
    reply.headers({ ...page, 'cache-control': 'public, max-age=86400', vary: 'Accept-Encoding' }).type(asset.type)
    if (gzip !== undefined && negotiator.negotiate(request.headers['accept-encoding'] ?? '') === 'gzip') {
      return reply.header('content-encoding', 'gzip').send(gzip)
    }
    return reply.send(identity)
  })
}

const INDEX_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Petstore Orders — API reference</title>
<link rel="stylesheet" href="docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" sizes="32x32" href="docs/assets/favicon-32x32.png">
<link rel="icon" type="image/png" sizes="16x16" href="docs/assets/favicon-16x16.png">
</head>
<body>
<noscript>This reference needs JavaScript. The documents it renders are <a href="v1/openapi.json">/v1/openapi.json</a> and <a href="v2/openapi.json">/v2/openapi.json</a>.</noscript>
<div style="max-width: 1460px; margin: 16px auto 0; padding: 0 20px; font-family: sans-serif">
<label for="api-version" style="font-weight: bold; margin-right: 8px">API version</label>
<select id="api-version" autocomplete="off" style="font-size: 14px; padding: 4px">
<option value="v1/openapi.json" selected>v1 (stable)</option>
<option value="v2/openapi.json">v2 (beta)</option>
</select>
</div>
<div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
`

/**
 * The page's own script (src/http/assets/docs-page.js, linted as browser code), read once when the
 * server loads this module. From src/http/routes/ (tsx) and dist/http/routes/ (built) alike, the
 * package root is three levels up, and the package publishes src/http/assets (`files`).
 */
const PAGE_SCRIPT = readFileSync(new URL('../../../src/http/assets/docs-page.js', import.meta.url))

interface Asset {
  type: string
  compress: boolean
}

const ASSETS = new Map<string, Asset>([
  ['swagger-ui-bundle.js', { type: 'text/javascript; charset=utf-8', compress: true }],
  ['swagger-ui.css', { type: 'text/css; charset=utf-8', compress: true }],
  ['favicon-32x32.png', { type: 'image/png', compress: false }],
  ['favicon-16x16.png', { type: 'image/png', compress: false }],
])

const gzip = promisify(gzipCallback)
const negotiator = new Negotiator<'gzip' | 'identity'>({ supportedValues: ['gzip', 'identity'] })
// The package's directory, whose files its README says to serve. Found from its main entry's path:
// calling that entry's getAbsoluteFSPath() would first load the 1.4 MB browser bundle into Node
// (0.9 s and 40 MiB measured).
const STATIC_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist'))
// The package ships source maps beside its files; the page serves none, so it names none.
const SOURCE_MAP_COMMENT = /\n?\/[*/]# sourceMappingURL=[^\n]*\s*$/
// Read (and compressed) on first use, once per process: most apps built in tests never serve them.
const loaded = new Map<string, Promise<{ identity: Buffer; gzip: Buffer | undefined }>>()

function loadAsset(file: string, asset: Asset): Promise<{ identity: Buffer; gzip: Buffer | undefined }> {
  let entry = loaded.get(file)
  if (entry === undefined) {
    entry = readFile(join(STATIC_DIR, file)).then(async (read) => {
      const identity = asset.compress ? Buffer.from(read.toString('utf8').replace(SOURCE_MAP_COMMENT, '\n')) : read
      return { identity, gzip: asset.compress ? await gzip(identity, { level: 9 }) : undefined }
    })
    entry.catch(() => loaded.delete(file)) // a failed read is retried by the next request
    loaded.set(file, entry)
  }
  return entry
}
