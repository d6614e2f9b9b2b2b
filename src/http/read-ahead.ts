/** A page read ahead is dropped when it has not been asked for this soon after it became the next page of its walk. */
export const READ_AHEAD_TTL_MS = 1000

/** Pages one read ahead reads at once (one statement on PostgreSQL), when READ_AHEAD_PAGES allows. */
export const READ_AHEAD_RUN = 4

/** A page read ahead, under the key its request will name. */
export interface AheadPage {
  key: string
  page: unknown
}

/** Pages read ahead at once, in the order of the walk, and how to read the run after them (none: the walk ends). */
export interface Run {
  pages: AheadPage[]
  readNext?: () => Promise<Run>
}

/** Runs read ahead for one walk, the first page of the first one next. */
export type HeldRuns = readonly HeldRun[]

interface HeldRun {
  read: Promise<Run>
  /** When its first page became the next page of the walk (or its read began). */
  since: number
  /** The pages it holds once read; until then, the pages it may hold. */
  pageCount: number
}

/**
 * Reading ahead for clients that walk pages (a drain of the event feed, a walk over the v2 list).
 * Once a route has answered a page of a walk (a request with a cursor) that has a next one, it
 * starts reading the next pages — a run of several, in one read — held for that API key under the
 * key of the next page (its cursor and limit). When the API key's next request asks for exactly that
 * page within READ_AHEAD_TTL_MS, on any connection (fetch, for one, alternates between two for
 * requests made one after the other), it is answered from the read; the route holds the rest again
 * for the request after it, and the run after those is read meanwhile. So the database works on the
 * next pages while these travel and the client handles them, instead of after, and pays its cost per
 * statement once a run. Each route decides whether a page read ahead may still be answered (a list
 * page only at the data version it was read at; an event page if it holds events).
 *
 * At most `limits.pages` pages are held or being read (READ_AHEAD_PAGES: memory), and at most
 * `limits.reads` reads run at once (below the PostgreSQL pool's size, so that reads ahead never take
 * every connection); past either, nothing more is read ahead. A page taken by a request counts again
 * once the route holds what follows it. Pages nobody asks for in time are dropped; the metrics count
 * pages read ahead and used.
 */
export class ReadAhead {
  private readonly held = new Map<string, { runs: HeldRuns; expiry: NodeJS.Timeout }>()
  private reading = 0
  /** Pages a read ahead reads at once: READ_AHEAD_RUN, or fewer so that a walk can hold one run while the next is read. */
  readonly pagesPerRun: number

  constructor(
    /** Pages that may be held or being read, and reads that may run, at once; 0: no read-ahead. */
    private readonly limits: { pages: number; reads: number },
    private readonly counted: { started(pages: number): void; used(): void } = { started() {}, used() {} },
    private readonly ttlMs = READ_AHEAD_TTL_MS,
  ) {
    this.pagesPerRun = Math.max(1, Math.min(READ_AHEAD_RUN, Math.floor(limits.pages / 2)))
  }

  /**
   * The page `key` read ahead for `holder`, if it became next less than the time allowed ago, was
   * read without error, and `usable` (the route's own check) accepts it, with the runs held after it
   * (to hold again by `start`); else undefined: read it again. Either way it is no longer held.
   */
  async take<T>(holder: string, key: string, usable: (page: T) => boolean | Promise<boolean> = () => true): Promise<{ page: T; after: HeldRuns } | undefined> {
    const held = this.held.get(heldKey(holder, key))
    if (held === undefined) return undefined
    this.held.delete(heldKey(holder, key))
    clearTimeout(held.expiry)
    const [first, ...later] = held.runs
    if (first === undefined || performance.now() - first.since > this.ttlMs) return undefined
    const run = await first.read.catch(() => undefined)
    const [page, ...rest] = run?.pages ?? []
    if (page === undefined || page.key !== key || !(await usable(page.page as T))) return undefined
    this.counted.used()
    // The page after this one becomes next now: its time counts from here.
    const after = rest.length > 0 ? [{ read: Promise.resolve({ pages: rest, readNext: run!.readNext }), since: performance.now(), pageCount: rest.length }, ...later] : later
    return { page: page.page as T, after }
  }

  /**
   * Holds the pages of the walk after the page just answered, whose key is `key`, for `holder`'s next
   * request: `after` (what `take` left), and, if there is room, a run read after those or, when
   * there are none, by `read`. At most two runs: one being answered from, one being read.
   */
  start(holder: string, key: string, read: () => Promise<Run>, after: HeldRuns = []): void {
    if (this.limits.pages === 0 || this.held.has(heldKey(holder, key))) return
    const runs = [...after]
    const handedBack = runs.reduce((pages, run) => pages + run.pageCount, 0)
    if (runs.length < 2 && this.reading < this.limits.reads && this.heldPages() + handedBack + this.pagesPerRun <= this.limits.pages) {
      runs.push(this.read(runs.at(-1), read))
    }
    if (runs.length === 0) return
    const entry = {
      runs,
      // Not asked for in time (the walk ended or moved on): no longer held.
      expiry: setTimeout(
        () => this.held.get(heldKey(holder, key)) === entry && this.held.delete(heldKey(holder, key)),
        Math.max(0, runs[0]!.since + this.ttlMs - performance.now()),
      ).unref(),
    }
    this.held.set(heldKey(holder, key), entry)
  }

  /** Pages held and reads running: for tests. */
  get size(): { held: number; reading: number } {
    return { held: this.heldPages(), reading: this.reading }
  }

  /** A run read after `previous`, or by `read` when there is none. A failed one is read again by the request, which reports the failure. */
  private read(previous: HeldRun | undefined, read: () => Promise<Run>): HeldRun {
    const next = previous === undefined ? read : async (): Promise<Run> => (await previous.read).readNext?.() ?? { pages: [] }
    this.reading++
    let pages: Promise<Run>
    try {
      pages = next()
    } catch (error) {
      pages = Promise.reject(error)
    }
    const held: HeldRun = { read: pages, since: performance.now(), pageCount: this.pagesPerRun }
    pages.then(
      (run) => {
        held.pageCount = run.pages.length
        this.counted.started(run.pages.length)
      },
      () => (held.pageCount = 0),
    )
    pages.finally(() => this.reading--).catch(() => {})
    return held
  }

  private heldPages(): number {
    let pages = 0
    for (const { runs } of this.held.values()) for (const run of runs) pages += run.pageCount
    return pages
  }
}

const heldKey = (holder: string, key: string): string => `${holder}\n${key}`
