import type { Socket } from 'node:net'

/** A page read ahead is answered only this soon after its read began: later, it is read again. */
export const READ_AHEAD_TTL_MS = 1000

/** A page read ahead for a connection. */
export interface HeldPage {
  key: string
  page: Promise<unknown>
  startedAt: number
  /** Drops the page if it is not asked for in time; cleared when it is claimed (it holds the page). */
  expiry?: NodeJS.Timeout
}

/**
 * Reading ahead for clients that walk pages over a keep-alive connection (a drain of the event feed,
 * a walk over the v2 list). Once a route has answered a page of a walk (a request with a cursor)
 * that has a next one, it starts reading that next page, held for that connection alone. When the
 * connection's next request asks for exactly that page within READ_AHEAD_TTL_MS, it is answered from
 * the read already under way: the database works on the next page while this one travels and the
 * client handles it, instead of after. Every request takes what its connection held (`claim`), so
 * any other request in between (a cancel, say) drops it, as does the time running out.
 *
 * At most `max` reads run at once, and at most `max` pages are held (READ_AHEAD_PAGES, below the
 * PostgreSQL pool's size, so that reads ahead never take every connection); past either, none is
 * read ahead. Behind a balancer that spreads one client's requests over several instances most pages
 * read ahead are never used: the metrics count both (started, used).
 */
export class ReadAhead {
  private readonly held = new Map<Socket, HeldPage>()
  private reading = 0

  constructor(
    /** How many reads may run, and how many pages may be held, at once; 0: no read-ahead. */
    private readonly max: number,
    private readonly counted: { started(): void; used(): void } = { started() {}, used() {} },
    private readonly ttlMs = READ_AHEAD_TTL_MS,
  ) {}

  /** For every request: what its connection held, which the connection no longer holds. */
  claim(socket: Socket): HeldPage | undefined {
    const held = this.held.get(socket)
    if (held !== undefined) {
      this.held.delete(socket)
      clearTimeout(held.expiry)
    }
    return held
  }

  /**
   * The page `key`, when `claimed` is that page, read ahead less than the time allowed ago, read
   * without error, and `usable` (the route's own check) accepts it; else undefined: read it again.
   */
  async use<T>(claimed: HeldPage | undefined, key: string, usable: (page: T) => boolean | Promise<boolean> = () => true): Promise<T | undefined> {
    if (claimed === undefined || claimed.key !== key || performance.now() - claimed.startedAt > this.ttlMs) return undefined
    const page = await (claimed.page as Promise<T>).catch(() => undefined)
    if (page === undefined || !(await usable(page))) return undefined
    this.counted.used()
    return page
  }

  /** Starts reading page `key` for the next request on `socket`, if there is room. */
  start(socket: Socket, key: string, read: () => Promise<unknown>): void {
    if (this.max === 0 || socket.destroyed || this.reading >= this.max || this.held.size >= this.max) return
    this.reading++
    let page: Promise<unknown>
    try {
      page = read()
    } catch (error) {
      page = Promise.reject(error)
    }
    // A failed read ahead is read again by the request, which reports the failure.
    page.then(
      () => this.reading--,
      () => this.reading--,
    )
    const held: HeldPage = { key, page, startedAt: performance.now() }
    this.held.set(socket, held)
    this.counted.started()
    // Not asked for in time (the walk ended, the connection closed): no longer held.
    held.expiry = setTimeout(() => this.held.get(socket) === held && this.held.delete(socket), this.ttlMs).unref()
  }

  /** Pages held and reads running: for tests. */
  get size(): { held: number; reading: number } {
    return { held: this.held.size, reading: this.reading }
  }
}
