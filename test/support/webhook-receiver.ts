import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

export interface Delivery {
  id: string
  body: string
  headers: Record<string, string>
  /** When it arrived (performance.now()). */
  at: number
}

export type Answer = (delivery: Delivery, req: IncomingMessage, res: ServerResponse) => void

export interface Receiver {
  url: string
  deliveries: Delivery[]
  answer: Answer
  /** Requests that arrived while another to this receiver was still open. */
  overlaps: number
  close(): Promise<void>
}

/** A receiver on 127.0.0.1: records every request and answers as `answer` says (200 by default). */
export async function receiver(): Promise<Receiver> {
  const sockets = new Set<Socket>()
  let open = 0
  const state = {
    url: '',
    deliveries: [] as Delivery[],
    answer: ((_delivery, _req, res) => res.end()) as Answer,
    overlaps: 0,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
  const server = createServer((req, res) => {
    if (++open > 1) state.overlaps++
    res.on('close', () => open--)
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => (body += chunk))
    req.on('end', () => {
      const delivery = { id: String(req.headers['webhook-id']), body, headers: req.headers as Record<string, string>, at: performance.now() }
      state.deliveries.push(delivery)
      state.answer(delivery, req, res)
    })
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  return state
}

