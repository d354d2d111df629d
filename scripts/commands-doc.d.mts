/** Types of what test/cli/commands-doc.e2e.test.ts uses of the command-reference script. */
export const PAGE: string;
export const REFRESH_COMMAND: string;
export function commandsPage(): Promise<string>;
