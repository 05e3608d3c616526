import { createPrivateKey, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';

/**
 * An ECDSA P-256 private key from a setting: PEM text, or the path of a file holding it. Throws an
 * Error saying what is wrong (the caller names the setting).
 */
export function readP256PrivateKey(setting: string): KeyObject {
  let pem = setting;
  if (!setting.includes('-----BEGIN')) {
    if (!existsSync(setting))
      throw new Error('is neither a PEM private key nor the path of a file holding one');
    pem = readFileSync(setting, 'utf8');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw new Error('is not a readable PEM private key');
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw new Error('must be an ECDSA private key on curve P-256');
  return key;
}
