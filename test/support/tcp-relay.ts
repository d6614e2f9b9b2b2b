import { connect, createServer, type Server, type Socket } from 'node:net'

/**
 * A TCP relay on 127.0.0.1:`port` to `upstream` (a database's URL), that can be taken down (its
 * connections cut, nothing listening: connections are refused) and brought up again on the same port.
 */
export class TcpRelay {
  private server: Server | undefined
  private readonly sockets = new Set<Socket>()

  constructor(
    readonly port: number,
    private readonly upstream: URL,
  ) {}

  /** `upstream`'s URL through the relay. */
  get url(): string {
    const url = new URL(this.upstream)
    url.host = `127.0.0.1:${this.port}`
    return url.href
  }

  async up(): Promise<void> {
    const server = createServer((client) => {
      const backend = connect({ port: Number(this.upstream.port || 5432), host: this.upstream.hostname })
      for (const socket of [client, backend]) {
        this.sockets.add(socket)
        socket.on('error', () => {})
        socket.on('close', () => this.sockets.delete(socket))
      }
      client.pipe(backend).pipe(client)
    })
    this.server = server
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve))
  }

  async down(): Promise<void> {
    for (const socket of this.sockets) socket.destroy()
    const server = this.server
    this.server = undefined
    if (server !== undefined) await new Promise((resolve) => server.close(resolve))
  }
}
