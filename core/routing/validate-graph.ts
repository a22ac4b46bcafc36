/**
 * The graph of a routing plan definition (validate.ts): the steps each step leads to, and the loops among them.
 */
import type { StepType } from './definition.ts';
import { isObject, type Json, own } from './validate-schema.ts';

export interface Edge {
  field: string;
  target: string;
}

/** The steps a step leads to, from whichever of its fields can be read (even when others are invalid). */
export function edgesOf(type: StepType, step: Json): Edge[] {
  const edges: Edge[] = [];
  const add = (field: string, target: unknown) => {
    if (typeof target === 'string') edges.push({ field, target });
  };
  switch (type) {
    case 'hours':
      add('open', own(step, 'open'));
      add('closed', own(step, 'closed'));
      break;
    case 'menu': {
      const options = own(step, 'options');
      if (isObject(options)) for (const key of Object.keys(options)) add(`options.${key}`, options[key]);
      add('noInput', own(step, 'noInput'));
      break;
    }
    case 'ring':
    case 'forward':
      add('next', own(step, 'next'));
      break;
    case 'queue':
      add('overflow', own(step, 'overflow'));
      break;
    case 'ai_answer':
      add('onCap', own(step, 'onCap'));
      add('next', own(step, 'next'));
      break;
    case 'split':
      add('a', own(step, 'a'));
      add('b', own(step, 'b'));
      break;
    case 'voicemail':
    case 'hangup':
      break;
  }
  return edges;
}

/** Strongly connected components (Tarjan's algorithm, iterative so that long chains cannot exhaust the stack). */
export function components(adjacency: number[][]): number[][] {
  const count = adjacency.length;
  const order = new Array<number>(count).fill(-1);
  const low = new Array<number>(count).fill(0);
  const onStack = new Array<boolean>(count).fill(false);
  const stack: number[] = [];
  const found: number[][] = [];
  let counter = 0;
  for (let root = 0; root < count; root += 1) {
    if (order[root] !== -1) continue;
    const path = [root];
    const nextEdge = [0];
    order[root] = low[root] = counter++;
    stack.push(root);
    onStack[root] = true;
    while (path.length > 0) {
      const depth = path.length - 1;
      const node = path[depth] as number;
      const edges = adjacency[node] as number[];
      const edgeIndex = nextEdge[depth] as number;
      if (edgeIndex < edges.length) {
        nextEdge[depth] = edgeIndex + 1;
        const to = edges[edgeIndex] as number;
        if (order[to] === -1) {
          order[to] = low[to] = counter++;
          stack.push(to);
          onStack[to] = true;
          path.push(to);
          nextEdge.push(0);
        } else if (onStack[to]) {
          low[node] = Math.min(low[node] as number, order[to] as number);
        }
        continue;
      }
      path.pop();
      nextEdge.pop();
      const parent = path[path.length - 1];
      if (parent !== undefined) low[parent] = Math.min(low[parent] as number, low[node] as number);
      if (low[node] === order[node]) {
        const component: number[] = [];
        for (;;) {
          const member = stack.pop() as number;
          onStack[member] = false;
          component.push(member);
          if (member === node) break;
        }
        found.push(component);
      }
    }
  }
  return found;
}

/** The shortest loop from `start` back to itself through the steps of `within`, as step indices. */
export function loopThrough(start: number, within: ReadonlySet<number>, adjacency: number[][]): number[] {
  const cameFrom = new Map<number, number>();
  const queue = [start];
  for (let head = 0; head < queue.length; head += 1) {
    const node = queue[head] as number;
    for (const to of adjacency[node] as number[]) {
      if (to === start) {
        const loop = [start];
        for (let at = node; at !== start; at = cameFrom.get(at) as number) loop.splice(1, 0, at);
        return [...loop, start];
      }
      if (!within.has(to) || cameFrom.has(to)) continue;
      cameFrom.set(to, node);
      queue.push(to);
    }
  }
  return [start, start];
}
