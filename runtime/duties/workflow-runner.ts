// The workflow runner as a duty: started, it takes workflow runs (the engine hands each to it);
// stopped, it ends its retry waits and leaves the steps it has not begun to the next start's resume.
import type { BundleWorkflow } from '../bundle/format.js'
import type { WorkflowRunner } from '../workflows/runner.js'
import { HEALTHY, type Duty } from './duty.js'

export function workflowRunnerDuty(runner: WorkflowRunner, workflows: () => ReadonlyMap<string, BundleWorkflow>): Duty {
  return {
    name: 'workflow runner',
    start: () => runner.start(workflows()),
    stop: () => runner.stop(),
    health: () => HEALTHY,
  }
}
