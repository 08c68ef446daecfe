// The listening socket: node:http with the timeouts the body timeout needs, bound before anything
// in the state is opened (what Node would answer by itself without our JSON body is answered in
// runtime/http/protocol.ts); and the stop: no new connections, idle ones closed, the rest
// closed when the grace runs out.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { BundleConfig } from '../bundle/format.js'

export function createListener(config: BundleConfig): Server {
  return createServer({
    // Node's own timers answer without our JSON body, so they sit behind the body timeout.
    requestTimeout: config.server.bodyTimeoutMs + 5000,
    headersTimeout: Math.min(config.server.bodyTimeoutMs + 2000, 60_000),
    keepAliveTimeout: 5000,
    // Node checks the two timeouts above only this often (30 s by default): a client dripping its
    // headers would hold its connection far past headersTimeout.
    connectionsCheckingInterval: 1000,
  })
}

export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((ok, fail) => {
    server.once('error', fail)
    server.listen(port, host, () => { server.off('error', fail); ok() })
  })
}

/** The URL the server is reached at (an IPv6 address in brackets). */
export function listeningUrl(server: Server): { url: string; port: number } {
  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return { url: `http://${shownHost}:${address.port}`, port: address.port }
}

/** Stops accepting: idle connections close now, busy ones when they finish or the grace runs out. */
export async function stopListening(server: Server, graceMs: number): Promise<void> {
  const stopped = new Promise<void>((ok) => server.close(() => ok()))
  server.closeIdleConnections()
  const timer = setTimeout(() => server.closeAllConnections(), graceMs)
  await stopped
  clearTimeout(timer)
}
