import { writeFileSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'

export type Verdict = 'PASS' | 'MISS' | 'info' | 'ERROR'

export interface Row {
  measure: string
  project: string
  baseline?: string
  ratio?: string
  target?: string
  result: Verdict
}

export interface Section {
  title: string
  store: string
  baselineName: string
  notes: string[]
  rows: Row[]
}

const HEADER = ['measure', 'project', 'baseline', 'ratio', 'target', 'result']

function table(rows: string[][]): string {
  const widths = HEADER.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)))
  const line = (row: string[]): string => `| ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n')
}

/** The figures of one run: printed as each comparison finishes, then summarized and saved. */
export class Report {
  readonly sections: Section[] = []

  /** Starts a comparison's table; `print()` it when its rows are in. */
  section(title: string, store: string, baselineName: string): Section {
    const section: Section = { title, store, baselineName, notes: [], rows: [] }
    this.sections.push(section)
    return section
  }

  render(section: Section): string {
    const head = [...HEADER]
    head[2] = section.baselineName
    const rows = section.rows.map((row) => [row.measure, row.project, row.baseline ?? '', row.ratio ?? '', row.target ?? '', row.result])
    const notes = section.notes.map((note) => `\n- ${note}`).join('')
    return `### ${section.title} — ${section.store}\n\n${table([head, ...rows])}\n${notes}\n`
  }

  print(section: Section): void {
    console.log(`\n${this.render(section)}`)
  }

  /** Every row with a target, across comparisons and stores. */
  summary(): string {
    const rows = [['store', 'comparison', 'measure', 'value', 'ratio', 'target', 'result']]
    for (const section of this.sections) {
      for (const row of section.rows) {
        if (row.result === 'info') continue
        rows.push([section.store, section.title, row.measure, row.project, row.ratio ?? '', row.target ?? '', row.result])
      }
    }
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)))
    const line = (row: string[]): string => `| ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`
    return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n')
  }

  verdicts(): Verdict[] {
    return this.sections.flatMap((section) => section.rows.map((row) => row.result))
  }

  save(path: string, header: string): void {
    mkdirSync(dirname(path), { recursive: true })
    const body = this.sections.map((section) => this.render(section)).join('\n')
    writeFileSync(path, `${header}\n\n## Summary\n\n${this.summary()}\n\n## Tables\n\n${body}`)
    writeFileSync(path.replace(/\.md$/, '.json'), JSON.stringify(this.sections, null, 2))
  }
}

export function verdict(pass: boolean): Verdict {
  return pass ? 'PASS' : 'MISS'
}

function number3(value: number): string {
  return value >= 100 ? value.toFixed(0) : value.toPrecision(3)
}

// Formats. Memory in MiB (what /proc reports is KiB); sizes of responses in MB (10^6 bytes).
export const fmt = {
  ms: (ms: number): string => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 10 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`),
  seconds: (s: number): string => `${s.toFixed(1)} s`,
  mib: (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MiB`,
  mb: (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`,
  rate: (perSecond: number, unit = 'req/s'): string => `${Math.round(perSecond).toLocaleString('en-US')} ${unit}`,
  ratio: (ratio: number): string => `${number3(ratio)}×`,
  /** The median of paired rounds and their range: `0.84× (0.71–0.97)`. */
  rounds: (r: RoundRatios, suffix = ''): string => `${number3(r.median)}×${suffix} (${number3(r.min)}–${number3(r.max)})`,
  /** Every round's ratio, for the notes. */
  roundList: (r: RoundRatios): string => r.ratios.map((ratio) => number3(ratio)).join(', '),
  count: (n: number): string => n.toLocaleString('en-US'),
}

/**
 * Runs `rounds` pairs of measurements, baseline and project back to back: the baseline first in even
 * rounds, the project first in odd ones, so that neither always meets the machine the other left.
 */
export async function pairedRounds<B, P>(
  rounds: number,
  baseline: (round: number) => Promise<B>,
  project: (round: number) => Promise<P>,
): Promise<{ baseline: B[]; project: P[] }> {
  const result: { baseline: B[]; project: P[] } = { baseline: [], project: [] }
  await interleavedRounds(rounds, [
    async (round) => void result.baseline.push(await baseline(round)),
    async (round) => void result.project.push(await project(round)),
  ])
  return result
}

/**
 * Pairing for more than two: each round runs every measurement back to back, in the given order in
 * even rounds and in reverse in odd ones.
 */
export async function interleavedRounds(rounds: number, measurements: ((round: number) => Promise<void>)[]): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    for (const measure of round % 2 === 0 ? measurements : measurements.toReversed()) await measure(round)
  }
}

/** The ratio of each paired round: a target is judged on their median; their range is shown beside it. */
export interface RoundRatios {
  ratios: number[]
  median: number
  min: number
  max: number
}

/** `of(project, baseline)` for each round: project / baseline unless told otherwise (a speedup: baseline / project). */
export function roundRatios(project: number[], baseline: number[], of = (p: number, b: number): number => p / b): RoundRatios {
  if (project.length !== baseline.length || project.length === 0) throw new Error('paired rounds need as many project as baseline figures, at least one')
  const ratios = project.map((value, round) => of(value, baseline[round]!))
  return { ratios, median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
