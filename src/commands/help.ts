import { Args, Command, loadHelpClass } from '@oclif/core';
import { standardizeIDFromArgv } from '@oclif/core/help';
import { catalogue, describeUnknownCommand, reportUnknownCommand } from '../cli/unknown-command.js';

export default class Help extends Command {
  static override summary = 'Show the help of care-etl or of one of its commands.';
  static override description =
    'Same as --help: `care-etl help` lists the commands, `care-etl help run` (or `care-etl run --help`) shows one command, `care-etl help state` a topic. An unknown command name is an error (exit 2) with the closest command suggested.';
  static override examples = ['<%= config.bin %> help', '<%= config.bin %> help run', '<%= config.bin %> help state check'];
  static override strict = false;
  static override args = {
    command: Args.string({ description: 'command (or topic) to show the help of, e.g. `run` or `state check`', required: false }),
  };

  async run(): Promise<void> {
    const { argv } = await this.parse(Help);
    const words = argv as string[];
    const subject = words.filter((w) => !w.startsWith('-'));
    if (subject.length) {
      const [id] = standardizeIDFromArgv([...subject], this.config);
      if (id && !this.config.findCommand(id) && !this.config.findTopic(id)) {
        reportUnknownCommand(describeUnknownCommand(id.split(':'), catalogue(this.config)), false);
        return;
      }
    }
    const HelpClass = await loadHelpClass(this.config);
    const help = new HelpClass(this.config, this.config.pjson.oclif.helpOptions ?? this.config.pjson.helpOptions);
    await help.showHelp(words);
  }
}
