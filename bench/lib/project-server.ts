/**
 * Child process: the project's own server, exactly as `petstore-orders serve` runs it — startServer()
 * with the Config that loadConfig() reads from the environment (PORT=0, DATABASE_URL, …). Tells the
 * bench its URL once it listens; SIGTERM closes it gracefully.
 */
import { loadConfig } from '../../src/config.js'
import { startServer } from '../../src/server.js'
import { failed, onShutdown, tell } from './child-side.js'

try {
  const server = await startServer(loadConfig())
  onShutdown(() => server.close())
  tell({ type: 'ready', url: server.url })
} catch (error) {
  failed(error)
}
