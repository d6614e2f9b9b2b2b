import { Child } from './processes.js'
import type { DownloadRequest, DownloadResult, WalkRequest, WalkResult } from './downloader.js'

/** The bench's side of the downloader child (bench/lib/downloader.ts). */
export class Downloader {
  private nextId = 1

  private constructor(private readonly child: Child) {}

  static async start(): Promise<Downloader> {
    const child = new Child('downloader', 'lib/downloader.ts')
    await child.next('ready', 60_000)
    return new Downloader(child)
  }

  /** One request, read to its end; throws unless the status is `expect`. */
  async request(url: string, options: Omit<DownloadRequest, 'type' | 'id' | 'url'> & { expect?: number } = {}): Promise<DownloadResult> {
    const { expect = 200, ...rest } = options
    const id = this.nextId++
    const response = this.child.next<DownloadResult & Record<string, unknown>>('response', 300_000)
    this.child.send({ type: 'request', id, url, ...rest })
    const result = await response
    if (result.error !== undefined) throw new Error(`${rest.method ?? 'GET'} ${url}: ${result.error}`)
    if (result.status !== expect) throw new Error(`${rest.method ?? 'GET'} ${url}: status ${result.status}, expected ${expect}`)
    return result
  }

  /** Every page of a feed, in the downloader process (see WalkRequest); throws on any other status than 200. */
  async walk(url: string, options: Omit<WalkRequest, 'type' | 'id' | 'url'>, timeoutMs = 600_000): Promise<WalkResult> {
    const id = this.nextId++
    const response = this.child.next<WalkResult & Record<string, unknown>>('walked', timeoutMs)
    this.child.send({ type: 'walk', id, url, ...options })
    const result = await response
    if (result.error !== undefined) throw new Error(`walking ${url}: ${result.error} (after ${result.pages} pages)`)
    return result
  }

  close(): Promise<void> {
    return this.child.stop()
  }
}

export function bearer(secret: string): Record<string, string> {
  return { authorization: `Bearer ${secret}` }
}
