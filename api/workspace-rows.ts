/** Kept for api/routes/calls.ts until its reads move to core/calls/: the function lives in core/rows.ts. */
export { workspaceRow } from '../core/rows.ts';
