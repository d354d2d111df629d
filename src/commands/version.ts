import { Command } from '@oclif/core';
import { JSON_FORMAT_VERSION } from '../cli/render.js';

export interface VersionInfo {
  /** care-etl's version (package.json). */
  version: string;
  /** Node.js version, without the `v`. */
  node: string;
  /** `<os>-<arch>`, e.g. `linux-x64`. */
  platform: string;
  exitCode: 0;
  /** The `--json` format version (every command's documents carry it). */
  formatVersion: number;
}

export default class Version extends Command {
  static override summary = 'Print the version of care-etl (and of Node.js, and the platform).';
  static override description =
    'Prints `care-etl/<version> <os>-<arch> node-v<version>`, as `--version` does; `--json` prints `{ version, node, platform, exitCode, formatVersion }`.';
  static override examples = ['<%= config.bin %> version', '<%= config.bin %> version --json'];
  static override enableJsonFlag = true;

  async run(): Promise<VersionInfo> {
    await this.parse(Version);
    const info: VersionInfo = {
      version: this.config.version,
      node: process.versions.node,
      platform: `${this.config.platform}-${this.config.arch}`,
      exitCode: 0,
      formatVersion: JSON_FORMAT_VERSION,
    };
    this.log(this.config.userAgent);
    return info;
  }
}
