import type { DeliveryResult } from './delivery.js'

/** A loop's hold on a slot. */
export interface Turn {
  /** Whether it holds one of the instance's slots: not once its turn ended with an attempt in flight. */
  slot: boolean
  /** When its turn ends (Date.now() time). */
  turnEnds: number
}

export interface DeliverySlotsOptions {
  /** Endpoints served at once. */
  max: number
  /** How long a loop serves its endpoint before it gives its slot back (a turn). */
  turnMs: number
  /** Whether endpoints may be waiting for a slot: the last lease pass was full, or one was handed back. */
  waiting: () => boolean
  /** A slot was given back. */
  freed: () => void
}

/**
 * An instance's delivery slots: it serves at most `max` endpoints at once, each for turns of
 * `turnMs`. When a turn ends while endpoints may be waiting for a slot (every slot is taken, or the
 * last lease pass filled them all), the loop hands its endpoint back; else it goes on. An attempt
 * still in flight when its turn ends so is parked: it keeps its lease (one delivery per endpoint)
 * but gives its slot back, and finishes without it. So a receiver that hangs holds a slot for at
 * most a turn once another endpoint needs it, never for its timeout, and a healthy endpoint waits
 * about a turn for a slot at most.
 */
export class DeliverySlots {
  private taken = 0

  constructor(private readonly options: DeliverySlotsOptions) {}

  /** Slots taken now (parked attempts hold none). */
  get inUse(): number {
    return this.taken
  }

  get free(): number {
    return this.options.max - this.taken
  }

  /** A slot for a new loop, its first turn starting now. */
  take(): Turn {
    this.taken++
    return { slot: true, turnEnds: Date.now() + this.options.turnMs }
  }

  giveBack(turn: Turn): void {
    if (!turn.slot) return
    turn.slot = false
    this.taken--
    this.options.freed()
  }

  /**
   * Whether the turn is over. A turn that ends goes on for another while a slot is free and no
   * endpoint waits: then it keeps nobody from a slot, and handing its endpoint back would only cost
   * two writes.
   */
  turnOver(turn: Turn): boolean {
    if (Date.now() < turn.turnEnds) return false
    if (!turn.slot || this.taken >= this.options.max || this.options.waiting()) return true
    turn.turnEnds = Date.now() + this.options.turnMs
    return false
  }

  /** Waits for an attempt; when the turn is over before the attempt is, the attempt is parked: its slot is given back at once. */
  async attempt(turn: Turn, delivery: Promise<DeliveryResult>): Promise<DeliveryResult> {
    while (turn.slot) {
      let timer: NodeJS.Timeout | undefined
      const turnEnd = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, turn.turnEnds - Date.now()))))
      const first = await Promise.race([delivery, turnEnd]).finally(() => clearTimeout(timer))
      if (first !== undefined) return first
      if (this.turnOver(turn)) this.giveBack(turn)
    }
    return delivery
  }
}
