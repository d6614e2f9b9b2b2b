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
 *   first (see INIT_JS) and may call the two servers the document names (and nothing else).
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
    reply.headers(page).type('text/javascript; charset=utf-8').send(INIT_JS),
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

// Runs in the browser. validatorUrl: null keeps the page from calling the public validator;
// queryConfigEnabled: false keeps it from taking a document or a configuration from its own query
// string (`/docs?url=…`), which would let a link show any document under this server's name.
//
// Two plugins:
// - The page's copy of a document lists this server first, as a relative URL of the document's
//   version (`/v1` for /v1/openapi.json, `/v2` for /v2/openapi.json): "Try it out" then calls the
//   server that serves the page, and a key pasted here stays on it; the production and staging
//   servers follow. The served documents are unchanged: clients and generators read them.
// - JSON response bodies are shown as received, re-indented without being parsed into numbers:
//   Swagger UI's own rendering (JSON.parse, then JSON.stringify) would show the id
//   9223372036854775806 as 9223372036854776000.
//
// And a request interceptor: a placeOrder sent with its Idempotency-Key field left empty gets a fresh
// key (a UUIDv7, as the TypeScript client makes), so each Execute places its own order, safe to
// retry, as a client would send it; a key typed in the field is sent as typed (to see a replay, or the
// 422 of a key reused with another body). The key sent shows in the request's curl. getRandomValues,
// not randomUUID: the page may be served over plain http from a host other than localhost, which is
// not a secure context.
const INIT_JS = `(function () {
  'use strict'
  var DOCUMENT = /(?:^|\\/)(v[0-9]+)\\/openapi\\.json$/

  // This server, under the version of the document at \`specUrl\`; null for any other document.
  function thisServerFor(specUrl) {
    var match = DOCUMENT.exec(new URL(specUrl || '', document.baseURI).pathname)
    if (match === null) return null
    return { url: new URL(match[1], document.baseURI).pathname, description: 'This server (the one serving this page)' }
  }

  function withThisServer(text, specUrl) {
    var thisServer = thisServerFor(specUrl)
    if (typeof text !== 'string' || thisServer === null) return text
    try {
      // Swagger UI parses the document into plain numbers itself, so nothing is lost here.
      var doc = JSON.parse(text)
      var servers = Array.isArray(doc.servers) ? doc.servers : []
      if (servers.some(function (server) { return server.url === thisServer.url })) return text
      doc.servers = [thisServer].concat(servers)
      return JSON.stringify(doc)
    } catch (error) {
      return text
    }
  }

  // JSON.stringify(JSON.parse(text), null, '  '), but with every number, string and key copied as
  // it is in the text. Returns null for anything that is not JSON.
  function indentExactly(text) {
    try {
      JSON.parse(text)
    } catch (error) {
      return null
    }
    var out = ''
    var depth = 0
    var newline = function () { return '\\n' + '  '.repeat(depth) }
    for (var i = 0; i < text.length; i++) {
      var c = text[i]
      if (c === '"') {
        var end = i + 1
        while (text[end] !== '"') end += text[end] === '\\\\' ? 2 : 1
        out += text.slice(i, end + 1)
        i = end
      } else if (c === '{' || c === '[') {
        var next = i + 1
        while (' \\t\\r\\n'.indexOf(text[next]) !== -1) next++
        if (text[next] === (c === '{' ? '}' : ']')) {
          out += c + text[next]
          i = next
        } else {
          depth++
          out += c + newline()
        }
      } else if (c === '}' || c === ']') {
        depth--
        out += newline() + c
      } else if (c === ',') {
        out += ',' + newline()
      } else if (c === ':') {
        out += ': '
      } else if (' \\t\\r\\n'.indexOf(c) === -1) {
        out += c
      }
    }
    return out
  }

  // A UUIDv7: the time in milliseconds, then random bits.
  function uuidV7() {
    var bytes = new Uint8Array(16)
    crypto.getRandomValues(bytes)
    var time = Date.now()
    for (var i = 5; i >= 0; i--) {
      bytes[i] = time % 256
      time = Math.floor(time / 256)
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x70
    bytes[8] = (bytes[8] & 0x3f) | 0x80
    var hex = Array.prototype.map.call(bytes, function (byte) { return (byte + 0x100).toString(16).slice(1) }).join('')
    return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-')
  }

  // placeOrder (POST …/store/orders; v1 has no such operation) without an Idempotency-Key gets one.
  function withIdempotencyKey(request) {
    if (request.loadSpec || String(request.method).toUpperCase() !== 'POST') return request
    if (!/\\/store\\/orders$/.test(new URL(request.url, document.baseURI).pathname)) return request
    var headers = request.headers || {}
    var given = false
    Object.keys(headers).forEach(function (name) {
      if (name.toLowerCase() !== 'idempotency-key') return
      if (String(headers[name]) === '') delete headers[name]
      else given = true
    })
    if (!given) headers['Idempotency-Key'] = uuidV7()
    request.headers = headers
    return request
  }

  var ThisServerFirst = function () {
    return {
      statePlugins: {
        spec: {
          wrapActions: {
            updateSpec: function (update, system) {
              return function (text) { return update(withThisServer(text, system.specSelectors.url())) }
            },
          },
        },
      },
    }
  }

  var ExactJsonBodies = function (system) {
    var h = system.React.createElement
    return {
      wrapComponents: {
        responseBody: function (Original) {
          return function (props) {
            var exact = typeof props.content === 'string' && /json/i.test(props.contentType || '') ? indentExactly(props.content) : null
            if (exact === null) return h(Original, props)
            var HighlightCode = props.getComponent('HighlightCode', true)
            return h('div', null,
              h('h5', null, 'Response body'),
              h(HighlightCode, { language: 'json', downloadable: true, fileName: 'response_' + Date.now() + '.json', canCopy: true }, exact))
          }
        },
      },
    }
  }

  window.addEventListener('load', function () {
    var version = document.getElementById('api-version')
    version.value = 'v1/openapi.json'
    window.ui = SwaggerUIBundle({
      url: new URL(version.value, document.baseURI).href,
      dom_id: '#swagger-ui',
      layout: 'BaseLayout',
      presets: [SwaggerUIBundle.presets.apis],
      plugins: [ThisServerFirst, ExactJsonBodies],
      deepLinking: true,
      displayOperationId: true,
      defaultModelsExpandDepth: 1,
      defaultModelExpandDepth: 2,
      docExpansion: 'list',
      validatorUrl: null,
      queryConfigEnabled: false,
      requestInterceptor: withIdempotencyKey,
    })
    // What Swagger UI's top bar does when another of its \`urls\` is picked.
    version.addEventListener('change', function () {
      var url = new URL(version.value, document.baseURI).href
      window.ui.specActions.updateUrl(url)
      window.ui.specActions.download(url)
    })
  })
})()
`

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
const STATIC_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
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
