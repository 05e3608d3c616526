import { randomInt } from 'node:crypto';

/**
 * Magic words for vouch recordings: short, common, easy to say and to tell apart on a video, with
 * no homophones among them. Over 256 words, so each word drawn adds more than 8 bits: the four of a
 * request are one of about 2^32 phrases, which a recording made earlier (or for another request)
 * will not match.
 */
export const WORDS: readonly string[] = (
  'apple anchor arrow autumn badge bakery banjo barrel basket beacon beetle bicycle blanket ' +
  'bottle bracket branch breeze bridge bucket buffalo button cabin cactus camera candle canyon ' +
  'carpet castle cattle cellar chapel cherry chimney circus clover cobweb compass copper cotton ' +
  'cricket crystal cushion dagger daisy dolphin donkey dragon drum eagle elbow engine falcon ' +
  'feather fiddle forest fossil fountain garden garlic giraffe glacier goblet granite guitar ' +
  'hammer harbor harvest helmet hermit hollow honey hornet island ivory jacket jasmine jelly ' +
  'jungle kettle kitten ladder lantern lemon lizard lobster magnet mango marble meadow melon ' +
  'mirror monkey mountain muffin mustard napkin needle nickel noodle nutmeg oasis ocean olive ' +
  'onion orange orchard otter oyster paddle palace panda parrot peanut pebble pelican pencil ' +
  'pepper piano pickle pigeon pillow pirate planet pocket potato pumpkin puzzle quarry quilt ' +
  'rabbit radish raven ribbon river rocket saddle salmon sandal saucer scarf shovel silver ' +
  'skillet sparrow spider spinach sponge squirrel stable statue summer sunset tablet teapot ' +
  'temple thimble thunder ticket tiger timber tomato torch tractor trumpet tulip tunnel turtle ' +
  'umbrella valley velvet violin volcano wagon walnut walrus whistle willow window winter ' +
  'wizard yogurt zebra acorn almond beaver biscuit blossom bramble cabbage canoe caravan ' +
  'carrot cedar cinnamon coconut comet coral cupboard dune emerald ferry fjord gazelle ginger ' +
  'gravel hazel heron iceberg igloo jigsaw kayak koala lagoon lilac llama locket lotus maple ' +
  'mitten moose mosaic nectar orbit pasta peacock penguin pretzel raisin reindeer saffron ' +
  'sapphire seagull sherbet snail spruce teacup thistle toffee topaz trolley tundra turnip ' +
  'vanilla vessel waffle wheat yacht zipper bagel bison cobalt dingo fable gondola harp ' +
  'hippo kiwi meteor nomad pinecone rhubarb sequoia tambourine'
).split(' ');

/** `n` distinct words, drawn uniformly with the crypto generator. */
export function magicWords(n = 4): string[] {
  const out = new Set<string>();
  while (out.size < n) out.add(WORDS[randomInt(WORDS.length)] as string);
  return [...out];
}

/**
 * The X-Magic-Words header of a reference video: comma-separated words (letters, digits, spaces,
 * hyphens and apostrophes inside a word), 1 to 12 of them, each at most 40 characters. Returns
 * the words trimmed, or a message saying what is wrong.
 */
export function parseMagicWords(raw: string | string[] | undefined): string[] | string {
  if (raw === undefined || raw === '') return 'X-Magic-Words is required: the words said in the video';
  if (Array.isArray(raw)) return 'X-Magic-Words may be given only once';
  if (raw.length > 600) return 'X-Magic-Words is too long';
  const words = raw.split(',').map((w) => w.trim());
  if (words.length > 12) return 'X-Magic-Words holds at most 12 words';
  for (const w of words)
    if (!/^[A-Za-z0-9][A-Za-z0-9 '-]{0,39}$/.test(w))
      return 'each magic word is 1 to 40 letters, digits, spaces, hyphens or apostrophes';
  return words;
}
