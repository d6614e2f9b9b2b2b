import { INT64_MAX } from '../../domain/int64.js'
import { PROGRAM, type Command } from '../command.js'

export const petsImport: Command = {
  name: ['pets', 'import'],
  synopsis: 'pets import FILE',
  summary: 'import pets from a JSON array or NDJSON file (all or nothing)',
  positionals: [{ name: 'FILE', describe: 'a JSON array or NDJSON file of pets' }],
  help: `Usage: ${PROGRAM} pets import FILE

Imports the pets of FILE in one transaction, inserting each or replacing the pet with its id (the
same id twice: the last one wins); at the first bad record nothing is imported and the error names
the record ("record N" in a JSON array, "line N" in NDJSON) and the problem. The file is streamed;
one record may take at most 1 MiB. A file with no records imports nothing and warns on stderr.
FILE is a JSON array (first character "[") or NDJSON, one pet a line.

A pet record:
  id     required; an integer from 1 to ${INT64_MAX} (JSON integer or decimal string)
  name   required; 1 to 200 characters, not blank
  tag    optional; 1 to 200 characters
null is the same as leaving a field out; any other field is refused.

Shows progress on stderr when stderr is a terminal.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} pets import pets.json
  ${PROGRAM} pets import pets.ndjson

  pets.json:    [{"id": 198772, "name": "Rex", "tag": "dog"}, {"id": 2, "name": "Tom"}]`,
  async run({ positionals }, io) {
    const [{ importFile }, { readPetRecords }] = await Promise.all([import('./import-file.js'), import('../import-records.js')])
    await importFile(io, positionals[0]!, 'pets', (source) => readPetRecords(source), (store, records, onProgress) =>
      store.pets.import(records, onProgress),
    )
  },
}
