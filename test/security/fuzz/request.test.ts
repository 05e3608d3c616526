import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../../helpers.js';
import { startWorld, type World } from '../../proxy/harness.js';
import { checkRequest, type Harness, startAnonymousHarness } from './request.js';
import { type RequestCase, requestCase } from './request-gen.js';
import { fuzz, fuzzSettings, readCorpus, report, wants } from './run.js';
import { Oracle, Upstream } from './sides.js';

const settings = fuzzSettings();
/** npm test: a few seconds per run; npm run fuzz: the time asked for, split over the runs. */
const seconds = (share: number, short: number) =>
  settings.long ? (settings.seconds * share) / (settings.target === 'all' ? 2 : 1) : short;

async function replay(h: Harness) {
  const corpus = readCorpus<RequestCase>('request');
  expect(corpus.length).toBeGreaterThan(0);
  const findings: { file: string; finding: string }[] = [];
  for (const entry of corpus) {
    const v = await checkRequest(h, entry.input);
    if (v.finding) findings.push({ file: entry.file, finding: v.finding });
  }
  expect(findings).toEqual([]);
}

describe.skipIf(!wants(settings, 'request'))('proxy request handling: differential against llhttp', () => {
  describe('mode none', () => {
    let h: Awaited<ReturnType<typeof startAnonymousHarness>>;
    beforeAll(async () => {
      h = await startAnonymousHarness();
    });
    afterAll(async () => h?.close());

    it('replays the corpus: the upstream sees what llhttp reads, nothing more', async () => {
      await replay(h);
    });

    it(
      'generated request streams: the upstream sees exactly the requests llhttp reads',
      async () => {
        const result = await fuzz({
          target: 'request',
          label: 'request (mode none)',
          arb: requestCase,
          check: (c) => checkRequest(h, c),
          fixedRuns: 60,
          seconds: seconds(0.6, 4),
          seed: settings.seed,
          collect: settings.long,
        });
        report(result);
        expect(result.failure).toBeUndefined();
      },
      (settings.seconds + 120) * 1000,
    );
  });

  describe.each(backends())('mode required, a valid API key in every request, service on %s', (backend) => {
    let w: World;
    let h: Harness;
    let oracle: Oracle;
    let upstream: Upstream;
    beforeAll(async () => {
      w = await startWorld(backend);
      oracle = await Oracle.start();
      upstream = await Upstream.start();
      const proxy = await w.proxy({ env: { SVC_PROXY_UPSTREAM: upstream.url, SVC_PROXY_AUTH: 'required' } });
      h = {
        proxy,
        oracle,
        upstream,
        who: {
          key: w.userKey,
          id: w.user.id,
          email: w.user.email,
          userName: w.user.userName,
          fullName: w.user.fullName,
        },
      };
    });
    afterAll(async () => {
      await w?.close();
      await upstream?.close();
      await oracle?.close();
    });

    it(
      "generated request streams: the same, and no identity header but the proxy's",
      async () => {
        await replay(h);
        const result = await fuzz({
          target: 'request',
          label: `request (mode required, ${backend})`,
          arb: requestCase,
          check: (c) => checkRequest(h, c),
          fixedRuns: 20,
          seconds: seconds(0.4 / backends().length, 2),
          seed: settings.seed,
          collect: settings.long,
        });
        report(result);
        expect(result.failure).toBeUndefined();
      },
      (settings.seconds + 120) * 1000,
    );
  });
});
