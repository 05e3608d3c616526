/**
 * Address lists of settings (proxy.trustedproxies): IPv4 and IPv6 addresses and CIDR ranges,
 * comma- or space-separated, and a matcher for a connection's remote address (node:net's
 * BlockList, which also matches IPv4-mapped IPv6 addresses against IPv4 ranges).
 */
import { BlockList, isIP } from 'node:net';

/** Parses "a, b/24, c::/64" into a BlockList: throws an Error naming the first entry that is not one. */
export function parseAddressList(text: string): { list: BlockList; size: number } {
  const list = new BlockList();
  let size = 0;
  for (const entry of text.split(/[\s,]+/)) {
    if (entry === '') continue;
    const slash = entry.indexOf('/');
    const addr = (slash < 0 ? entry : entry.slice(0, slash)).replace(/^\[(.*)\]$/, '$1');
    const family = isIP(addr);
    if (family === 0) throw new Error(`expected an IP address or CIDR range, got ${JSON.stringify(entry)}`);
    const max = family === 4 ? 32 : 128;
    const prefixText = slash < 0 ? String(max) : entry.slice(slash + 1);
    if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max)
      throw new Error(`expected a prefix length of 0 to ${max} in ${JSON.stringify(entry)}`);
    list.addSubnet(addr, Number(prefixText), family === 4 ? 'ipv4' : 'ipv6');
    size++;
  }
  return { list, size };
}

/**
 * A matcher for remote addresses against a list: answers are remembered per address (a front
 * proxy connects from a handful of addresses; the memo is bounded).
 */
export class AddressMatcher {
  private readonly list: BlockList;
  private readonly empty: boolean;
  private readonly memo = new Map<string, boolean>();

  constructor(readonly text: string) {
    const { list, size } = parseAddressList(text);
    this.list = list;
    this.empty = size === 0;
  }

  matches(address: string | undefined): boolean {
    if (address === undefined || this.empty) return false;
    let hit = this.memo.get(address);
    if (hit === undefined) {
      const a = address.replace(/%.*$/, '');
      const family = isIP(a);
      hit = family !== 0 && this.list.check(a, family === 4 ? 'ipv4' : 'ipv6');
      if (this.memo.size >= 1024) this.memo.clear();
      this.memo.set(address, hit);
    }
    return hit;
  }
}
