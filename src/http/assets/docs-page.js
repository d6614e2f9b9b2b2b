// The /docs page's own script (served at /docs/init.js), run in the browser after Swagger UI's
// bundle. Plain ES5 in an IIFE, no modules: the page loads it with a classic <script>.
//
// validatorUrl: null keeps the page from calling the public validator; queryConfigEnabled: false
// keeps it from taking a document or a configuration from its own query string (`/docs?url=…`),
// which would let a link show any document under this server's name.
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
(function () {
  'use strict'
  var DOCUMENT = /(?:^|\/)(v[0-9]+)\/openapi\.json$/

  // This server, under the version of the document at `specUrl`; null for any other document.
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
    } catch {
      return text
    }
  }

  // JSON.stringify(JSON.parse(text), null, '  '), but with every number, string and key copied as
  // it is in the text. Returns null for anything that is not JSON.
  function indentExactly(text) {
    try {
      JSON.parse(text)
    } catch {
      return null
    }
    var out = ''
    var depth = 0
    var newline = function () { return '\n' + '  '.repeat(depth) }
    for (var i = 0; i < text.length; i++) {
      var c = text[i]
      if (c === '"') {
        var end = i + 1
        while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1
        out += text.slice(i, end + 1)
        i = end
      } else if (c === '{' || c === '[') {
        var next = i + 1
        while (' \t\r\n'.indexOf(text[next]) !== -1) next++
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
      } else if (' \t\r\n'.indexOf(c) === -1) {
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
    if (!/\/store\/orders$/.test(new URL(request.url, document.baseURI).pathname)) return request
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
    // What Swagger UI's top bar does when another of its `urls` is picked.
    version.addEventListener('change', function () {
      var url = new URL(version.value, document.baseURI).href
      window.ui.specActions.updateUrl(url)
      window.ui.specActions.download(url)
    })
  })
})()
