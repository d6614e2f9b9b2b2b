/** Why a file could not be read, in a few words, for a one-line error that names the file. */
export function fileProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ENOENT') return 'no such file'
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied'
  if (code === 'EISDIR') return 'it is a directory'
  return (error instanceof Error ? error.message : String(error)).replace(/\s*[\r\n]+\s*/g, ' ').trim()
}
