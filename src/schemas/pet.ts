import Type from 'typebox'
import { Int64 } from './primitives.js'

/** Pet, as in the OpenAPI petstore example this API grew from. Only the deprecated showPetById uses it. */
export const Pet = Type.Object(
  {
    id: Int64({ description: 'Unique pet identifier' }),
    name: Type.String({ description: 'Name of the pet' }),
    tag: Type.Optional(Type.String({ description: 'Free-form tag' })),
  },
  { $id: 'Pet', additionalProperties: false, examples: [{ id: 198772, name: 'Rex', tag: 'dog' }] },
)
export type Pet = Type.Static<typeof Pet>

export const PetRef = Type.Unsafe<Pet>({ $ref: 'Pet#' })

export const PetIdParams = Type.Object({
  petId: Int64({ description: 'The identifier of the pet to show' }),
})
