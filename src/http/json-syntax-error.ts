import { ApiError } from '../errors.js'

// lossless-json's messages end with where the text broke: `… at position 34` (a string index).
const AT_POSITION = /^(.*) at position (\d+)$/s

/**
 * 400 `invalid_body` for a body that is not valid JSON, saying why and where, as a line and a column
 * (both from 1, the column in characters): `… comma ',' expected after value but got '"' at line 3,
 * column 3.` A message of another form (a parser changed) gets the code's own message.
 */
export function invalidJson(error: unknown, text: string): ApiError {
  // The parser descends once per level: a text nested deeper than the stack is valid JSON no one needs.
  if (error instanceof RangeError) return new ApiError('invalid_body', 'The request body nests arrays or objects too deeply to be read.')
  const match = error instanceof SyntaxError ? AT_POSITION.exec(error.message) : null
  if (match === null) return new ApiError('invalid_body')
  const position = Math.min(Number(match[2]), text.length)
  const before = text.slice(0, position)
  const line = before.split('\n').length
  const column = [...before.slice(before.lastIndexOf('\n') + 1)].length + 1
  const reason = match[1]!.charAt(0).toLowerCase() + match[1]!.slice(1)
  return new ApiError('invalid_body', `The request body is not valid JSON: ${reason} at line ${line}, column ${column}.`)
}
