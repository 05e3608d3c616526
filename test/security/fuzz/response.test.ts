import { describe, expect, it } from 'vitest';
import { checkResponse, type ResponseCase, responseCase } from './response.js';
import { fuzz, fuzzSettings, readCorpus, report, wants } from './run.js';

const settings = fuzzSettings();

describe.skipIf(!wants(settings, 'response'))('upstream response parser: differential against llhttp', () => {
  it('replays the corpus: no input the proxy accepts differently from llhttp', () => {
    const corpus = readCorpus<ResponseCase>('response');
    expect(corpus.length).toBeGreaterThan(0);
    const findings: { file: string; finding: string }[] = [];
    for (const entry of corpus) {
      const v = checkResponse(entry.input);
      if (v.finding) findings.push({ file: entry.file, finding: v.finding });
    }
    expect(findings).toEqual([]);
  });

  it(
    'generated responses: the proxy accepts only what llhttp accepts, with the same framing',
    async () => {
      const share = settings.target === 'all' ? settings.seconds / 2 : settings.seconds;
      const result = await fuzz({
        target: 'response',
        arb: responseCase,
        check: checkResponse,
        fixedRuns: 2000,
        seconds: settings.long ? share : 3,
        seed: settings.seed,
        collect: settings.long,
      });
      report(result);
      expect(result.failure).toBeUndefined();
    },
    (settings.seconds + 120) * 1000,
  );
});
