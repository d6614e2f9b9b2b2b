import type { WebhookLease } from '../domain/webhooks.js'
import type { DeliverySlots, Turn } from './delivery-slots.js'

/** One endpoint's delivery loop; its lease (what it holds, until when) is the WebhookLease, kept by the store's writes. */
export interface EndpointLoop extends Turn {
  /** Set when the endpoint was found due again while its loop ran: read the feed again before releasing. */
  woken: boolean
  /** Set when its lease is being ended (released, or ended by a failure or a disable): a lease taken since is a new loop's. */
  finishing: boolean
  done: Promise<void>
}

/** Serves a leased endpoint until its loop ends; `recheck`: a relaunched loop, which renews its lease before anything else. */
type Serve = (lease: WebhookLease, loop: EndpointLoop, recheck: boolean) => Promise<void>

/** An instance's delivery loops, at most one per endpoint, each launched with a slot (DeliverySlots). */
export class EndpointLoops {
  private readonly running = new Map<bigint, EndpointLoop>()

  constructor(
    private readonly slots: DeliverySlots,
    private readonly serve: Serve,
  ) {}

  /** Loops running now, parked attempts included. */
  get size(): number {
    return this.running.size
  }

  /**
   * The relaunch rule, for an endpoint a lease pass took. A pass leases only endpoints no owner
   * holds: released, ended by a failure or a disable, or expired. With no loop of its own running,
   * the endpoint gets a new loop. A loop still running whose lease is not ending (it expired under
   * it) goes on under the new one, which has its owner, and reads the feed again before it
   * releases. A loop ending its lease is followed, once done, by a new loop (unless another was
   * launched), which renews the lease it got before anything else (the ending loop's release may
   * have ended it), and, when stopping, releases it at once.
   */
  leased(lease: WebhookLease): void {
    const id = lease.endpoint.id
    const current = this.running.get(id)
    if (current === undefined) this.launch(lease, false)
    else if (!current.finishing) current.woken = true
    else void current.done.then(() => this.running.has(id) || this.launch(lease, true))
  }

  /** Resolves once no loop runs, loops launched meanwhile included. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((loop) => loop.done))
  }

  private launch(lease: WebhookLease, recheck: boolean): void {
    const loop: EndpointLoop = { ...this.slots.take(), woken: false, finishing: false, done: Promise.resolve() }
    this.running.set(lease.endpoint.id, loop)
    loop.done = this.serve(lease, loop, recheck).finally(() => {
      this.running.delete(lease.endpoint.id)
      this.slots.giveBack(loop)
    })
  }
}
