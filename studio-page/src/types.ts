// The studio's HTTP contract (docs/studio.md) is declared once, beside the server: the page takes it from there
// (type-only: esbuild erases the import, nothing of the server is bundled).
export type {
  Diag,
  EvaluateRequest,
  EvaluateResponse as Evaluation,
  MappingDoc as MappingFile,
  RefInfo as RowRef,
  ResourceInfo,
  RowResult,
  RowStatus,
  Totals,
} from '../../src/studio/types.js';
