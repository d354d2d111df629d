import { createRequire } from 'node:module';
import type StreamJsonParserType from 'stream-json/Parser.js';
import type PickType from 'stream-json/filters/Pick.js';
import type StreamArrayType from 'stream-json/streamers/StreamArray.js';

/**
 * stream-json's classes through `require`, not `import`, for the reason jsonata-package.ts gives (Node 20's ESM loader
 * lexes an imported CommonJS file in JavaScript on every start): the same module instances an `import` would give.
 */
const require = createRequire(import.meta.url);
export const StreamJsonParser = require('stream-json/Parser.js') as typeof StreamJsonParserType;
export const Pick = require('stream-json/filters/Pick.js') as typeof PickType;
export const StreamArray = require('stream-json/streamers/StreamArray.js') as typeof StreamArrayType;
