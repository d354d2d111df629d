/**
 * care-etl's help (package.json → oclif.helpClass): a command's help is its summary, usage, examples, then its flags
 * with their short summaries, grouped. The long description and each flag's details are in docs/commands.md
 * (generated from the same metadata by scripts/commands-doc.mjs), which the last line points to.
 */
import { CommandHelp, Help } from '@oclif/core';
import type { Command, Config } from '@oclif/core';
import type { HelpOptions } from '@oclif/core/interfaces';

/** Where the full reference of a command is: the page and its anchor (the heading `care-etl run`). */
export function referenceLink(id: string): string {
  return `docs/commands.md#care-etl-${id.replace(/:/g, '-')}`;
}

class ShortCommandHelp extends CommandHelp {
  protected override sections(): ReturnType<CommandHelp['sections']> {
    const all = super.sections();
    const pick = (header: string) => all.filter((s) => s.header === header);
    const more = { header: 'MORE', generate: () => `Every detail and exit code: ${referenceLink(this.command.id)}` };
    return [...pick('USAGE'), ...pick('ARGUMENTS'), ...pick('EXAMPLES'), ...pick('FLAGS'), more];
  }
}

export default class CareHelp extends Help {
  /** The usage line without every flag (docopts): the flags are listed right below it. */
  constructor(config: Config, opts: Partial<HelpOptions> = {}) {
    super(config, { docopts: false, ...opts });
  }

  /** The root help: the package's description wrapped to the terminal too. */
  override formatRoot(): string {
    return super
      .formatRoot()
      .split('\n')
      .map((line) => (line.length > this.opts.maxWidth ? this.wrap(line) : line))
      .join('\n');
  }

  /** The summary above a command's help, wrapped to the terminal like the rest. */
  protected override summary(c: Command.Loadable): string | undefined {
    const text = super.summary(c);
    return text && this.wrap(text);
  }

  protected override getCommandHelpClass(command: Command.Loadable): CommandHelp {
    return new ShortCommandHelp(command, this.config, this.opts);
  }
}
