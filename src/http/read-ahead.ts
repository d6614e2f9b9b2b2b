import type { Socket } from 'node:net'

/** A page read ahead is answered only this soon after its read began: later, it is read again. */
export const READ_AHEAD_TTL_MS = 1000

/** A page read ahead for a connection. */
export interface HeldPage {
  key: string
  page: Promise<unknown>
  startedAt: number
}

/**
 * Reading ahead for clients that walk pages over a keep-alive connection (a drain of the event feed,
 * a walk over the v2 list). Once a route has answered a page that has a next one, it starts reading
 * that next page, held for that connection alone. When the connection's next request asks for
 * exactly that page within READ_AHEAD_TTL_MS, it is answered from the read already under way: the
 * database works on the next page while this one travels and the client handles it, instead of
 * after. Every request takes what its connection held (`claim`), so any other request in between (a
 * cancel, say) drops it, as does the time running out. At most `max` pages are held per instance;
 * past that, none is read ahead.
 *
 * A page read ahead is the same read made a moment earlier, after the page before it was read: what
 * a walk guarantees (keyset pages; events in commit order) holds for it as for any read, and it is
 * at most READ_AHEAD_TTL_MS old. Behind a balancer that spreads one client's requests over several
 * instances most pages read ahead are never used: the metrics count both (started, used).
 */
export class ReadAhead {
  private readonly held = new Map<Socket, HeldPage>()

  constructor(
    /** How many pages may be held at once (READ_AHEAD_PAGES); 0: no read-ahead. */
    private readonly max: number,
    private readonly counted: { started(): void; used(): void } = { started() {}, used() {} },
    private readonly ttlMs = READ_AHEAD_TTL_MS,
  ) {}

  /** For every request: what its connection held, which the connection no longer holds. */
  claim(socket: Socket): HeldPage | undefined {
    const held = this.held.get(socket)
    if (held !== undefined) this.held.delete(socket)
    return held
  }

  /** The page `key` when `claimed` is that page, read ahead less than READ_AHEAD_TTL_MS ago. */
  use<T>(claimed: HeldPage | undefined, key: string): Promise<T> | undefined {
    if (claimed === undefined || claimed.key !== key || performance.now() - claimed.startedAt > this.ttlMs) return undefined
    this.counted.used()
    return claimed.page as Promise<T>
  }

  /** Starts reading page `key` for the next request on `socket`, if there is room. */
  start(socket: Socket, key: string, read: () => Promise<unknown>): void {
    if (this.max === 0 || socket.destroyed) return
    if (this.held.size >= this.max) this.dropExpired()
    if (this.held.size >= this.max) return
    const page = read()
    page.catch(() => {}) // a failed read ahead is read again by the request, which reports it
    this.held.set(socket, { key, page, startedAt: performance.now() })
    this.counted.started()
  }

  private dropExpired(): void {
    const now = performance.now()
    for (const [socket, held] of this.held) {
      if (socket.destroyed || now - held.startedAt > this.ttlMs) this.held.delete(socket)
    }
  }
}
