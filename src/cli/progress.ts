import type { OutputStream } from './command.js'

/**
 * A one-line progress display for long work (import, seed): rewritten in place with `\r` on a
 * terminal, at most every `intervalMs`; nothing at all when the stream is not a terminal (piped
 * or redirected), so logs and scripts never see it.
 */
export class Progress {
  readonly enabled: boolean
  private readonly stream: OutputStream
  private readonly intervalMs: number
  private readonly now: () => number
  private lastWrite = -Infinity
  private shown = false

  constructor(stream: OutputStream = process.stderr, options: { intervalMs?: number; now?: () => number } = {}) {
    this.stream = stream
    this.enabled = stream.isTTY === true
    this.intervalMs = options.intervalMs ?? 200
    this.now = options.now ?? Date.now
  }

  /** Shows `text` unless the last update was less than the interval ago (`force` shows it anyway). */
  update(text: string, force = false): void {
    if (!this.enabled) return
    const now = this.now()
    if (!force && now - this.lastWrite < this.intervalMs) return
    this.lastWrite = now
    const columns = this.stream.columns ?? 0
    const width = columns > 20 ? columns - 1 : 79 // a pseudo-terminal may report 0 columns
    const line = text.length > width ? `${text.slice(0, width - 1)}…` : text
    this.stream.write(`\r\x1b[2K${line}`)
    this.shown = true
  }

  /** Removes the line, leaving the cursor where it was before the first update. */
  clear(): void {
    if (!this.enabled || !this.shown) return
    this.stream.write('\r\x1b[2K')
    this.shown = false
  }
}

/** 1234567 → "1,234,567" (progress is for people). */
export function formatCount(count: number): string {
  return count.toLocaleString('en-US')
}

const BAR_WIDTH = 24

/** `[#######.................] 29%` of `done` out of `total`, or "" when the total is unknown. */
export function percent(done: number, total: number | undefined): string {
  if (total === undefined || total <= 0) return ''
  const share = Math.min(1, Math.max(0, done / total))
  const filled = Math.floor(share * BAR_WIDTH)
  return `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${Math.floor(share * 100)}%`
}
