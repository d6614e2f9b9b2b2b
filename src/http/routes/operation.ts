import type { FastifySchema } from 'fastify'

/**
 * What every operation's schema holds besides its own: the tag it is listed under, the bearer key
 * it needs, and how far it may still change (`x-stability`).
 */
export function operation(tag: 'orders' | 'pets' | 'webhooks', stability: NonNullable<FastifySchema['x-stability']>) {
  return { tags: [tag], security: [{ bearerAuth: [] }], 'x-stability': stability }
}
