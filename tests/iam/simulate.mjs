// Evaluates IAM requests against identity policies with @cloud-copilot/iam-simulate (AWS's evaluation logic): reads a
// JSON array of {simulation, checked} on stdin and writes a JSON array of results (Allowed, ImplicitlyDenied,
// ExplicitlyDenied, or error with the engine's reasons) on stdout. A `checked` simulation runs through runSimulation,
// which validates the policies, the action, the resource and the context keys first; the others, of the same
// policies, through runUnsafeSimulation, the same evaluation without the validation (tenfold faster).
// Driven by tests/iam_engine.py.
import { runSimulation, runUnsafeSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const items = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const results = []
for (const { simulation, checked } of items) {
  if (!checked) {
    results.push({ result: runUnsafeSimulation(simulation, {}), ignoredContextKeys: [] })
    continue
  }
  const result = await runSimulation(simulation, {})
  if (result.resultType === 'error') {
    results.push({ result: 'error', errors: result.errors })
  } else {
    results.push({ result: result.overallResult, ignoredContextKeys: result.result?.ignoredContextKeys ?? [] })
  }
}
process.stdout.write(JSON.stringify(results))
