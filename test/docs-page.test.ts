import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { chromium, type Browser, type Page } from 'playwright-core'
import { startTestServer, type TestServer } from './support/harness.js'

// Debian's chromium (apt-get install chromium), driven by playwright-core: no browser download.
const CHROMIUM = '/usr/bin/chromium'
const browserSkipReason = existsSync(CHROMIUM)
  ? undefined
  : `${CHROMIUM} is missing (apt-get install -y --no-install-recommends chromium); REQUIRE_BROWSER=1 makes this a failure`

describe('/docs over HTTP', () => {
  let server: TestServer

  before(async () => {
    server = await startTestServer('sqlite')
  })

  it('is public, HTML, with a CSP that keeps the page on this server, and not in the OpenAPI document', async () => {
    const response = await fetch(`${server.origin}/docs`) // no key
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type') ?? '', /^text\/html/)
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff')
    const csp = response.headers.get('content-security-policy') ?? ''
    assert.match(csp, /default-src 'none'/)
    assert.match(csp, /script-src 'self'(;|$)/)
    const html = await response.text()
    assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//, 'no asset from another host')
    const doc = (await (await fetch(`${server.origin}/v1/openapi.json`)).json()) as { paths: Record<string, unknown> }
    assert.ok(!Object.keys(doc.paths).some((path) => path.includes('docs')))
  })

  it('serves its assets compressed when asked, redirects /docs/ and refuses other methods and files', async () => {
    const bundle = await fetch(`${server.origin}/docs/assets/swagger-ui-bundle.js`, { headers: { 'accept-encoding': 'gzip' } })
    assert.equal(bundle.status, 200)
    assert.match(bundle.headers.get('content-type') ?? '', /^text\/javascript/)
    assert.equal(bundle.headers.get('content-encoding'), 'gzip')
    assert.ok((await bundle.text()).includes('SwaggerUIBundle'))
    const css = await (await fetch(`${server.origin}/docs/assets/swagger-ui.css`)).text()
    assert.ok(css.includes('.swagger-ui'))
    assert.doesNotMatch(css, /sourceMappingURL/, 'no reference to a source map the server does not serve')
    const slash = await fetch(`${server.origin}/docs/`, { redirect: 'manual' })
    assert.equal(slash.status, 301)
    assert.equal(new URL(slash.headers.get('location')!, `${server.origin}/docs/`).href, `${server.origin}/docs`)
    const post = await fetch(`${server.origin}/docs`, { method: 'POST' })
    assert.equal(post.status, 405)
    assert.match(post.headers.get('allow') ?? '', /GET/)
    const names = ['index.html', '..%2Fpackage.json', 'swagger-ui.js.map', 'swagger-ui.css.map', 'swagger-initializer.js']
    // Names of properties every object inherits: not files either.
    names.push('constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__')
    for (const path of names.map((name) => `/docs/assets/${name}`)) {
      const response = await fetch(`${server.origin}${path}`)
      assert.equal(response.status, 404, path)
      assert.equal(((await response.json()) as { code: string }).code, 'not_found')
    }
  })
})

const EXACT_ID = '9223372036854775806' // a double would show 9223372036854776000

describe('/docs in headless Chromium', { skip: process.env.REQUIRE_BROWSER === '1' ? false : browserSkipReason }, () => {
  let server: TestServer
  let key: string
  let browser: Browser
  let page: Page
  const requests: string[] = []
  const failures: string[] = []

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `REQUIRE_BROWSER=1 but ${browserSkipReason}`)
    server = await startTestServer('sqlite')
    key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: BigInt(EXACT_ID) }])
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    })
    const context = await browser.newContext({ serviceWorkers: 'block' })
    // Every request is recorded; one to another origin would also be refused, so that the test
    // proves the page works offline rather than waiting on a network that is not there.
    await context.route('**/*', (route) =>
      new URL(route.request().url()).origin === server.origin ? route.continue() : route.abort('blockedbyclient'),
    )
    page = await context.newPage()
    page.on('request', (request) => requests.push(request.url()))
    page.on('response', (response) => {
      if (response.status() >= 400) failures.push(`${response.status()} ${response.url()}`)
    })
    page.on('pageerror', (error) => failures.push(`page error: ${error.message}`))
    page.on('console', (message) => {
      if (message.type() === 'error') failures.push(`console error: ${message.text()}`)
    })
    await page.goto(`${server.origin}/docs`, { waitUntil: 'load' })
    await page.locator('.opblock').nth(2).waitFor({ timeout: 30_000 })
  })

  after(async () => {
    await browser?.close()
  })

  it('loads everything from the server itself, the document from /v1/openapi.json, with no error', () => {
    const network = requests.filter((url) => !url.startsWith('data:'))
    assert.ok(network.length > 0)
    for (const url of network) assert.equal(new URL(url).origin, server.origin, `request left the server: ${url}`)
    assert.ok(network.includes(`${server.origin}/v1/openapi.json`), network.join('\n'))
    assert.deepEqual(failures, [])
  })

  it('shows both order operations, with their operationIds and summaries', async () => {
    const list = page.locator('.opblock', { hasText: '/store/orders' }).filter({ hasText: 'listOrders' })
    await list.waitFor()
    assert.match(await list.innerText(), /GET[\s\S]*\/store\/orders[\s\S]*List all orders[\s\S]*listOrders/)
    const cancel = page.locator('.opblock', { hasText: 'cancelOrder' })
    assert.match(await cancel.innerText(), /DELETE[\s\S]*\/store\/orders\/\{orderId\}[\s\S]*Cancel an order[\s\S]*cancelOrder/)
    // Opened, an operation shows its description and every error status with its code.
    await cancel.locator('.opblock-summary').first().click()
    await cancel.getByText('order_already_shipped').first().waitFor()
    const opened = await cancel.innerText()
    for (const text of ['Cancels a pending order', '204', '400', '401', '403', '404', '409', 'order_not_found']) {
      assert.ok(opened.includes(text), text)
    }
  })

  it('marks showPetById as deprecated', async () => {
    const pet = page.locator('.opblock.opblock-deprecated')
    assert.equal(await pet.count(), 1)
    assert.match(await pet.innerText(), /\/pets\/\{petId\}[\s\S]*showPetById/)
    await pet.locator('.opblock-summary').first().click()
    await pet.getByText('Warning: Deprecated').waitFor()
  })

  it('shows the Error model with its three fields and its example', async () => {
    const model = page.locator('.models [id="model-Error"]')
    await model.waitFor()
    await model.locator('.model-box-control').first().click()
    await model.getByText('example').first().waitFor()
    const text = await model.innerText()
    for (const field of ['code', 'message', 'status']) assert.match(text, new RegExp(`\\b${field}\\*`), field)
    assert.ok(text.includes('order_not_found'), text)
  })

  it('shows the bearer authentication', async () => {
    await page.locator('.auth-wrapper .authorize').click()
    const dialog = page.locator('.dialog-ux .modal-ux')
    await dialog.getByText('bearerAuth').first().waitFor()
    assert.match(await dialog.innerText(), /bearerAuth\s*\(http, Bearer\)/)
    await dialog.locator('.close-modal').click()
  })

  it('tries operations out on the server that serves the page first, and shows int64 ids exactly', async () => {
    const servers = page.locator('.servers select')
    const options = await servers.locator('option').allTextContents()
    assert.match(options[0]!, /^\/v1\b/, options.join(' | '))
    assert.ok(options.some((text) => text.includes('https://api.petstore.example/v1')), options.join(' | '))
    assert.equal(await servers.inputValue(), '/v1')

    await page.locator('.auth-wrapper .authorize').click()
    const dialog = page.locator('.dialog-ux .modal-ux')
    await dialog.locator('input').first().fill(key)
    await dialog.locator('.auth-btn-wrapper .authorize').click()
    await dialog.locator('.close-modal').click()

    const list = page.locator('.opblock', { hasText: 'listOrders' })
    await list.locator('.opblock-summary').first().click()
    await list.locator('.try-out__btn').click()
    const answered = page.waitForResponse((response) => response.url() === `${server.origin}/v1/store/orders`)
    await list.locator('.btn.execute').click()
    assert.equal((await answered).status(), 200)
    const body = list.locator('.live-responses-table .response-col_description .microlight').first()
    await body.waitFor()
    const text = await body.innerText()
    assert.ok(text.includes(`"id": ${EXACT_ID}`), text)
    assert.ok(!text.includes('9223372036854776000'), text)
  })

  it('switches to v2 in its version selector, tries v2 operations out on this server under /v2, and shows int64 ids exactly', async () => {
    const version = page.locator('#api-version')
    assert.deepEqual(await version.locator('option').allTextContents(), ['v1 (stable)', 'v2 (beta)'])
    const loaded = page.waitForResponse((response) => response.url() === `${server.origin}/v2/openapi.json`)
    await version.selectOption({ label: 'v2 (beta)' })
    assert.equal((await loaded).status(), 200)
    await page.locator('.info .version', { hasText: '2.0.0-beta.1' }).waitFor()
    const list = page.locator('.opblock', { hasText: 'listOrders' })
    await list.waitFor()
    assert.match(await list.innerText(), /GET[\s\S]*\/store\/orders[\s\S]*List orders, a page at a time[\s\S]*listOrders/)
    // v1's DELETE /store/orders/{orderId} is gone; v2's one DELETE is deleteWebhookEndpoint.
    assert.equal(await page.locator('.opblock', { hasText: 'DELETE' }).filter({ hasText: '/store/orders' }).count(), 0, 'no v1 operation left on the page')
    for (const [id, path, summary] of [
      ['placeOrder', '/store/orders', 'Place an order'],
      ['shipOrder', '/store/orders/{orderId}/ship', 'Ship an order'],
      ['completeOrder', '/store/orders/{orderId}/complete', 'Complete an order'],
    ] as const) {
      // By the operation id its summary shows: an open block's text (listOrders') may name other operations.
      const block = page.locator('.opblock').filter({ has: page.locator('.opblock-summary-operation-id').getByText(id, { exact: true }) })
      await block.waitFor()
      const text = await block.innerText()
      assert.ok(text.startsWith('POST') && text.includes(path) && text.includes(summary), `${id}: ${text}`)
    }

    const servers = page.locator('.servers select')
    const options = await servers.locator('option').allTextContents()
    assert.match(options[0]!, /^\/v2\b/, options.join(' | '))
    assert.ok(options.some((text) => text.includes('https://api.petstore.example/v2')), options.join(' | '))
    assert.ok(!options.some((text) => /\/v1\b/.test(text)), options.join(' | '))
    assert.equal(await servers.inputValue(), '/v2')

    // The key given on v1 may or may not be kept across documents: give it when it is asked for.
    await page.locator('.auth-wrapper .authorize').click()
    const dialog = page.locator('.dialog-ux .modal-ux')
    await dialog.getByText('bearerAuth').first().waitFor()
    const input = dialog.locator('input')
    if ((await input.count()) > 0) {
      await input.first().fill(key)
      await dialog.locator('.auth-btn-wrapper .authorize').click()
    }
    await dialog.locator('.close-modal').click()

    // Swagger UI keeps an operation open, and in "Try it out", across documents when its tag and
    // operationId match.
    if (!/\bis-open\b/.test((await list.getAttribute('class')) ?? '')) await list.locator('.opblock-summary').first().click()
    const tryOut = list.locator('.try-out__btn')
    await tryOut.waitFor()
    if ((await tryOut.innerText()).trim() === 'Try it out') await tryOut.click()
    // Swagger UI fills each parameter with its example: the ship date range is cleared, as a reader
    // who wants every order would (the imported orders have no ship date).
    for (const name of ['shipDateFrom', 'shipDateTo']) await list.locator(`tr[data-param-name="${name}"] input`).fill('')
    const answered = page.waitForResponse((response) => {
      const url = new URL(response.url())
      return url.origin === server.origin && url.pathname === '/v2/store/orders'
    })
    await list.locator('.btn.execute').click()
    const response = await answered
    assert.equal(response.status(), 200)
    const body = list.locator('.live-responses-table .response-col_description .microlight').first()
    await body.waitFor()
    const text = await body.innerText()
    assert.ok(text.includes('"data": ['), `${response.url()}: ${text}`)
    assert.ok(text.includes(`"id": ${EXACT_ID}`), `${response.url()}: ${text}`)
    assert.ok(text.includes('"status": "pending"'), text)
    assert.ok(!text.includes('9223372036854776000'), text)
    assert.deepEqual(failures, [])

    // And back: v1 again, under /v1.
    await version.selectOption({ label: 'v1 (stable)' })
    await page.locator('.opblock', { hasText: 'DELETE' }).first().waitFor()
    assert.equal(await page.locator('.servers select').inputValue(), '/v1')
  })

  it("places a new order at each Execute of placeOrder, a fresh Idempotency-Key sent for each; a key typed in is sent as typed", async () => {
    // A server of its own: the suite's holds the greatest int64 id, above which no order is placed.
    const own = await startTestServer('sqlite')
    const ownKey = await own.createKey()
    const context = await browser.newContext({ serviceWorkers: 'block' })
    const other = await context.newPage()
    const errors: string[] = []
    other.on('pageerror', (error) => errors.push(`page error: ${error.message}`))
    try {
      await other.goto(`${own.origin}/docs`, { waitUntil: 'load' })
      await other.locator('.opblock').nth(2).waitFor({ timeout: 30_000 })
      await other.locator('#api-version').selectOption({ label: 'v2 (beta)' })
      const place = other.locator('.opblock').filter({ has: other.locator('.opblock-summary-operation-id').getByText('placeOrder', { exact: true }) })
      await place.waitFor()
      await other.locator('.auth-wrapper .authorize').click()
      const dialog = other.locator('.dialog-ux .modal-ux')
      await dialog.locator('input').first().fill(ownKey)
      await dialog.locator('.auth-btn-wrapper .authorize').click()
      await dialog.locator('.close-modal').click()
      await place.locator('.opblock-summary').first().click()
      await place.locator('.try-out__btn').click()
      const keyField = place.locator('tr[data-param-name="Idempotency-Key"] input')
      assert.equal(await keyField.inputValue(), '', 'the Idempotency-Key field is not pre-filled')

      /** Execute with `body`; the key sent, and the answer's status and text. */
      const execute = async (body: string): Promise<{ sent: string | undefined; status: number; text: string }> => {
        await place.locator('textarea.body-param__text').fill(body)
        const answered = other.waitForResponse((response) => response.request().method() === 'POST' && new URL(response.url()).pathname === '/v2/store/orders')
        await place.locator('.btn.execute').click()
        const response = await answered
        return { sent: (await response.request().allHeaders())['idempotency-key'], status: response.status(), text: await response.text() }
      }
      const idOf = (text: string): string => /^\{"id":(\d+),/.exec(text)?.[1] ?? assert.fail(text)

      const first = await execute('{"petId": 7, "quantity": 2}')
      const second = await execute('{"petId": 8, "quantity": 3}')
      for (const { sent, status, text } of [first, second]) {
        assert.equal(status, 201, text)
        assert.match(sent ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a UUIDv7 is sent')
      }
      assert.notEqual(first.sent, second.sent)
      assert.notEqual(idOf(first.text), idOf(second.text), 'two orders')
      assert.match(second.text, /"petId":8,"quantity":3/)
      // The curl shown is the request as sent, its key included.
      assert.ok((await place.locator('.curl-command').innerText()).includes(`Idempotency-Key: ${second.sent}`))

      // A key typed in is the user's: sent as it is, so a replay or a reuse shows as the API answers it.
      await keyField.fill('docs-page-typed-key')
      const typed = await execute('{"petId": 9, "quantity": 1}')
      assert.deepEqual([typed.sent, typed.status], ['docs-page-typed-key', 201], typed.text)
      const reused = await execute('{"petId": 9, "quantity": 4}')
      assert.deepEqual([reused.sent, reused.status], ['docs-page-typed-key', 422], reused.text)
      assert.match(reused.text, /"code":"idempotency_key_reused"/)
      assert.deepEqual(errors, [])
    } finally {
      await context.close()
      await own.close()
    }
  })

  it('leaves the served documents with their two configured servers', async () => {
    const doc = (await (await fetch(`${server.origin}/v1/openapi.json`)).json()) as { servers: { url: string }[] }
    assert.deepEqual(doc.servers.map((s) => s.url), ['https://api.petstore.example/v1', 'https://staging.api.petstore.example/v1'])
    const v2 = (await (await fetch(`${server.origin}/v2/openapi.json`)).json()) as { servers: { url: string }[] }
    assert.deepEqual(v2.servers.map((s) => s.url), ['https://api.petstore.example/v2', 'https://staging.api.petstore.example/v2'])
  })

  it('takes no document or configuration from its query string', async () => {
    const other = await page.context().newPage()
    const seen: string[] = []
    other.on('request', (request) => seen.push(request.url()))
    await other.goto(`${server.origin}/docs?url=/v1/store/orders&configUrl=/healthz&urls.primaryName=v2`, { waitUntil: 'load' })
    await other.locator('.opblock').nth(2).waitFor({ timeout: 30_000 })
    assert.ok(seen.includes(`${server.origin}/v1/openapi.json`), seen.join('\n'))
    assert.ok(!seen.includes(`${server.origin}/v2/openapi.json`), 'the version comes from the selector, not from the query string')
    for (const url of seen.filter((u) => !u.startsWith(`${server.origin}/docs`))) assert.ok(!/\/v1\/store\/orders|\/healthz/.test(url), `the page followed its query string: ${url}`)
    await other.close()
  })
})
