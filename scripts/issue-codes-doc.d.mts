/** Types of what test/architecture/issue-codes-doc.test.ts uses of the issue-codes page script. */
export const PAGE: string;
export const REFRESH_COMMAND: string;
export function issueCodesPage(): string;
