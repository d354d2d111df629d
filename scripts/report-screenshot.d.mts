/** Types of the functions test/report/run-report-browser.test.ts shares with the screenshot script. */
export function findChromium(env?: NodeJS.ProcessEnv): string | undefined;
export function runChromium(chromium: string, file: string, extra: string[], opts?: { proxyPort?: number; timeoutMs?: number }): Promise<string>;
