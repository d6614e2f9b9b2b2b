import { Redis } from 'ioredis'

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

/**
 * The reason Redis tests are skipped, printed at run time, or undefined to run them. With
 * REQUIRE_REDIS=1 (CI) an unreachable server is an error, never a skip.
 */
export async function redisSkipReason(): Promise<string | undefined> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null })
  redis.on('error', () => {})
  let reason: string | undefined
  try {
    await redis.connect()
    await redis.ping()
  } catch (error) {
    reason = `Redis is not reachable at ${REDIS_URL}: ${(error as Error).message}`
  } finally {
    redis.disconnect()
  }
  if (reason !== undefined && process.env.REQUIRE_REDIS === '1') throw new Error(`REQUIRE_REDIS=1 but ${reason}`)
  if (reason !== undefined) console.log(`# skipping Redis tests: ${reason}`)
  return reason
}
