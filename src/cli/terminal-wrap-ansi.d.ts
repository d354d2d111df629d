// wrap-ansi 7 (the version oclif installs) ships no types; this is the one call the terminal display makes.
declare module 'wrap-ansi' {
  export default function wrapAnsi(input: string, columns: number, options?: { hard?: boolean; trim?: boolean; wordWrap?: boolean }): string;
}
