import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ErrorCodes } from '../core/errors.js';
import { NOT_AN_OPERATION, type RouteSchema, ref } from '../core/routeschema.js';
import { Script } from '../objects/script.js';
import { access } from '../policy/grants.js';
import { normalize } from '../schema/fields.js';
import { scheduleScriptLogPruning } from '../scripts/logs.js';
import { runTests, type TestCase } from '../scripts/testing.js';
import type { ServiceContext } from '../store/service.js';
import { writeBodySchema } from './objectschemas.js';
import { heldBackRefusal } from './validation.js';

/**
 * Scripts over HTTP: POST /scripts/test (the user-write and group-membership hooks run inside the
 * one write path, src/writes/hooks.ts). Registered after the object routes; the literal path
 * /scripts/test wins over /scripts/:id in the router whatever the order.
 */
export function registerScriptRoutes(app: FastifyInstance, ctx: ServiceContext) {
  scheduleScriptLogPruning(app, ctx);
  // Validated by its schema, the refusal answered after the 403 (as for the object writes).
  app.post('/scripts/test', { schema: POST_SCRIPTS_TEST, attachValidation: true }, async (req, reply) =>
    testScript(req, reply, ctx),
  );
  app.route({
    method: ['GET', 'PUT', 'DELETE', 'PATCH'],
    url: '/scripts/test',
    schema: NOT_AN_OPERATION,
    handler: () => {
      throw new ApiError(
        'MethodNotAllowed',
        'POST /scripts/test runs a script; other methods are not served',
        {
          headers: { Allow: 'POST' },
        },
      );
    },
  });
}

async function testScript(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const p = req.principal;
  if (!p) throw new ApiError('Unauthenticated', 'authentication required');
  if (!access(p, Script.kind, 'create'))
    throw new ApiError('Forbidden', 'your credentials may not run scripts');
  const refusal = heldBackRefusal(req);
  if (refusal) throw refusal;
  const script = normalize(Script.fields, req.body ?? {}, undefined);
  const text = String(script.Tests ?? '').trim();
  const cases = (text === '' ? [] : JSON.parse(text)) as TestCase[];
  const report = await runTests(ctx, script, cases);
  const lines = report.logs.map((l) => `${JSON.stringify(l)}\n`).join('');
  if (report.verdict === 'passed' && !report.output) return reply.code(204).send();
  reply.type('application/x-json-lines');
  if (report.verdict === 'passed') return reply.code(200).send(lines);
  const kind = report.verdict === 'compile-failed' ? 'ScriptCompileFailed' : 'ScriptTestsFailed';
  reply.header('X-Error-Code', ErrorCodes[kind].code);
  return reply.code(ErrorCodes[kind].status).send(lines);
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const POST_SCRIPTS_TEST: RouteSchema = {
  tags: ['Script'],
  summary: "Run an unsaved Script's tests (docs/scripts.md)",
  body: { content: { 'application/json': { schema: writeBodySchema(Script.fields) } } },
  response: {
    '200': {
      description: 'Every test passed; one ScriptLog per line',
      content: { 'application/x-json-lines': { schema: ref('ScriptLog') } },
    },
    '204': { description: 'Every test passed and nothing was logged' },
    '400': { description: 'Invalid Script (e.g. Tests is not a list of test cases)' },
    '403': { description: 'The credentials may not create scripts' },
    '422': {
      description: 'Script Tests Failed: one ScriptLog per line, Passed false on the failing ones',
      content: { 'application/x-json-lines': { schema: ref('ScriptLog') } },
    },
    '500': {
      description: 'Script Compile Failed: the ScriptLog with the compile error',
      content: { 'application/x-json-lines': { schema: ref('ScriptLog') } },
    },
  },
  validatedBy: 'schema',
};
