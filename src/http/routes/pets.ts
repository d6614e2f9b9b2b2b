import { ApiError } from '../../errors.js'
import { errorResponses } from '../../schemas/error.js'
import { PetIdParams, PetRef } from '../../schemas/pet.js'
import type { ApiApp } from '../api-app.js'
import { operation } from './operation.js'

/** The deprecated showPetById: RFC 9745 Deprecation, RFC 8594 Sunset, then 410 after the sunset. */
export function petsRoutes(app: ApiApp): void {
  const { store } = app
  const { deprecatedAt, sunsetAt, deprecationLink } = app.config.pets
  const deprecation = `@${Math.floor(deprecatedAt.getTime() / 1000)}`
  const sunset = sunsetAt.toUTCString() // an IMF-fixdate
  const link = `<${deprecationLink}>; rel="deprecation"; type="text/html"`
  const requireScope = app.requireScope('pets:read')

  app.get(
    '/pets/:petId',
    {
      // Every response of the operation carries the headers, errors included; after the sunset it is
      // gone for everyone, so 410 comes before authentication.
      onRequest: [
        (_request, reply, done) => {
          reply.header('deprecation', deprecation).header('sunset', sunset).header('link', link)
          done(Date.now() >= sunsetAt.getTime() ? new ApiError('gone') : undefined)
        },
        requireScope,
      ],
      schema: {
        operationId: 'showPetById',
        ...operation('pets', 'stable'),
        summary: 'Info for a specific pet (deprecated)',
        description:
          `Deprecated: responses carry \`Deprecation\`, \`Sunset\` and a \`Link\` with rel="deprecation". ` +
          `After the sunset date (${sunsetAt.toISOString()}) the operation answers 410 \`gone\`. ` +
          'Requires the `pets:read` scope.',
        deprecated: true,
        params: PetIdParams,
        response: {
          200: { ...PetRef, description: 'The pet' },
          ...errorResponses({
            400: '`petId` is not a decimal integer in the int64 range (`invalid_pet_id`)',
            403: 'The API key lacks the `pets:read` scope (`insufficient_scope`)',
            404: 'No pet has this id (`pet_not_found`)',
            410: 'The operation is past its sunset date (`gone`)',
          }),
        },
      },
    },
    async (request) => {
      const pet = await store.pets.find(request.params.petId)
      if (pet === undefined) throw new ApiError('pet_not_found')
      return pet
    },
  )
}
