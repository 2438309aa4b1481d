import path from 'node:path';

/** Node's arguments for a child that runs the project's TypeScript (see register-ts.js): `node ...tsChild() -e code`. */
export function tsChild(): string[] {
  return ['--require', path.join(__dirname, 'register-ts.js')];
}
