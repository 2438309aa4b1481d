import type { EnvironmentContext, JestEnvironmentConfig } from '@jest/environment';
import { TestEnvironment } from 'jest-environment-node';
import { integrationBackends, LENDER_KEY } from './harness';
import { lenderFor, processPool } from './pool';

/**
 * The integration project's test environment. Jest loads it once per worker process, outside the test files'
 * module registries, which makes it the one place a server can outlive a test file: it hands each file a lender
 * over the worker's pool (integration/pool.ts) and, once every hook of the file has run, checks each server the
 * file borrowed. A server handed back dirty fails this file, by name, and is never lent again.
 */
export default class IntegrationEnvironment extends TestEnvironment {
  readonly #testPath: string;

  constructor(config: JestEnvironmentConfig, context: EnvironmentContext) {
    super(config, context);
    this.#testPath = context.testPath;
  }

  override async setup(): Promise<void> {
    await super.setup();
    (this.global as unknown as Record<symbol, unknown>)[LENDER_KEY] = lenderFor(processPool(), this.#testPath, integrationBackends());
  }

  override async teardown(): Promise<void> {
    let problems: string[] = [];
    try {
      problems = await processPool().checkInAll(this.#testPath);
    } finally {
      await super.teardown();
    }
    if (problems.length > 0) throw new Error(problems.join('\n'));
  }
}
