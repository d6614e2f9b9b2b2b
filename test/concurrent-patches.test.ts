import assert from 'node:assert/strict'
import { it } from 'node:test'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { UpdateResult } from '../src/domain/order-patch.js'
import { forEachStore, order, records, storeForSuite, type StoreKind } from './support/harness.js'

// A stream of patches, one sent at every turn of the event loop whatever is still unanswered: batches
// follow one another without a pause, each with patches of orders the one before changes. No patch
// is lost: each adds a key of its own, and every order ends with all of its keys, one version and
// one event per patch, its events in the order of its versions.

const ORDERS = 6
const PATCHES = 150 // 25 an order, within the 50 keys an order may hold

forEachStore('a stream of patches of a few orders', (kind: StoreKind) => {
  const suite = storeForSuite(kind)

  it('all land: every key, one version and one event per patch, the events in version order', async () => {
    const { store } = suite
    await store.orders.import(records(Array.from({ length: ORDERS }, (_, i) => order({ id: BigInt(i + 1) }))))
    const answers: Promise<UpdateResult>[] = []
    for (let i = 0; i < PATCHES; i++) {
      answers.push(store.orders.update({ id: BigInt((i % ORDERS) + 1), patch: { metadata: new Map([[`p${i}`, 'x']]) } }))
      await nextTurn()
    }
    const results = await Promise.all(answers)
    results.forEach((result, i) => {
      if (result.outcome !== 'updated') return assert.fail(`patch ${i}: ${result.outcome}`)
      assert.equal(result.order.metadata?.[`p${i}`], 'x', `patch ${i}: the answer is the order as the patch left it`)
    })
    const perOrder = PATCHES / ORDERS
    for (let id = 1; id <= ORDERS; id++) {
      const mine = results.filter((_, i) => (i % ORDERS) + 1 === id).map((result) => (result.outcome === 'updated' ? result.order.version : 0))
      assert.deepEqual([...mine].sort((a, b) => a - b), Array.from({ length: perOrder }, (_, i) => i + 2), `order ${id}: each patch its own version`)
      const stored = await store.orders.find(BigInt(id))
      assert.equal(stored?.version, perOrder + 1)
      const keys = Array.from({ length: perOrder }, (_, n) => `p${n * ORDERS + id - 1}`)
      assert.deepEqual(Object.keys(stored?.metadata ?? {}).sort(), keys.sort(), `order ${id}: no patch lost`)
    }
    const page = await store.events.read(undefined, 1000)
    const events = (JSON.parse(page.json.toString()) as { type: string; order: { id: number; version: number } }[]).filter((event) => event.type === 'order.updated')
    assert.equal(events.length, PATCHES)
    for (let id = 1; id <= ORDERS; id++) {
      const versions = events.filter((event) => event.order.id === id).map((event) => event.order.version)
      assert.deepEqual(versions, Array.from({ length: perOrder }, (_, i) => i + 2), `order ${id}: its events in version order`)
    }
  })
})
