/**
 * What to say about a command name care-etl does not have (`care-etl runn`, `care-etl state chek`,
 * `care-etl help runn`): plain text on stderr — no colours, no prompt — or the project's error envelope with
 * `--json`. Used by the `command_not_found` hook and by `care-etl help`.
 */
import type { Interfaces } from '@oclif/core';
import { closest } from '../mapping/closest.js';
import { JSON_FORMAT_VERSION, type ErrorJson } from './render.js';

export interface UnknownCommand {
  /** What the user typed as the command, words joined with spaces (`state chek`). */
  typed: string;
  /** The closest command (or topic), as typed on the command line (`state check`). */
  suggestion?: string;
  message: string;
  hint: string;
}

interface Catalogue {
  bin: string;
  /** Visible command ids and aliases, words joined with spaces (`state check`). */
  commands: string[];
  /** Visible topics (`state`). */
  topics: string[];
}

export function catalogue(config: Interfaces.Config): Catalogue {
  const words = (id: string) => id.split(':').join(' ');
  const commands = config.commands.filter((c) => !c.hidden).flatMap((c) => [c.id, ...(c.aliases ?? [])].map(words));
  const topics = config.topics.filter((t) => !t.hidden).map((t) => words(t.name));
  return { bin: config.bin, commands: [...new Set(commands)].sort(), topics: [...new Set(topics)].sort() };
}

/**
 * `words`: the command words as typed (oclif hands over `runn`, or `state:chek:mapping.yaml` — every word before
 * the first flag — as the id). The typed command is the first word, or the first two when the first is a topic.
 */
export function describeUnknownCommand(words: string[], cat: Catalogue): UnknownCommand {
  const topic = cat.topics.includes(words[0] ?? '');
  let typedWords = words.slice(0, topic && words.length > 1 ? 2 : 1);
  let suggestion = closest(typedWords.join(' '), [...cat.commands, ...cat.topics]);
  if (suggestion && cat.topics.includes(suggestion) && words.length > 1 && !topic) {
    // `stat check`: the topic is misspelt; the word after it may name (or nearly name) one of its commands.
    const sub = cat.commands.filter((c) => c.startsWith(`${suggestion} `)).map((c) => c.slice(suggestion!.length + 1));
    const next = sub.includes(words[1]!) ? words[1] : closest(words[1]!, sub);
    if (next) {
      suggestion = `${suggestion} ${next}`;
      typedWords = words.slice(0, 2);
    }
  }
  const typed = typedWords.join(' ');
  const message = `"${typed}" is not a ${cat.bin} command.${suggestion ? ` Did you mean "${suggestion}"?` : ''}`;
  return { typed, suggestion, message, hint: `Run "${cat.bin} help" for a list of commands.` };
}

/** `--json` among the arguments (before a `--`). */
export function wantsJson(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false;
    if (a === '--json') return true;
  }
  return false;
}

/** Prints the report (stderr, or the JSON envelope on stdout) and sets exit code 2. */
export function reportUnknownCommand(u: UnknownCommand, json: boolean): ErrorJson {
  const body: ErrorJson = { error: { name: 'CommandNotFound', message: u.message, hint: u.hint, issues: [] }, exitCode: 2, formatVersion: JSON_FORMAT_VERSION };
  if (json) process.stdout.write(`${JSON.stringify(body)}\n`);
  else process.stderr.write(`${u.message}\n${u.hint}\n`);
  process.exitCode = body.exitCode;
  return body;
}
