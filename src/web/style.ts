/** The sign-in pages' stylesheet (served as /signin/assets/style.css). */
export const STYLE_CSS = `
:root {
  --bg: #f4f5f9; --card: #ffffff; --ink: #1d2330; --muted: #5b6475; --line: #d9dde7;
  --brand: #3754d6; --brand-ink: #ffffff; --brand-dark: #2740ad; --bad: #b3261e; --bad-bg: #fdecea;
  --good: #1e7d32; --good-bg: #e8f5e9; --radius: 12px;
  --field: #ffffff; --warn: #7a4b00; --warn-bg: #fff4d6; --shadow: rgba(20, 30, 60, .06);
  color-scheme: light dark;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); line-height: 1.5; min-height: 100vh; }
a { color: var(--brand); }
header.top { display: flex; align-items: center; gap: .6rem; padding: 1rem 1.5rem; }
header.top .logo { width: 28px; height: 28px; border-radius: 8px; background: linear-gradient(135deg, #3754d6, #7b5cf0); }
header.top .name { font-weight: 650; letter-spacing: .01em; }
header.top nav { margin-left: auto; display: flex; gap: 1rem; font-size: .95rem; }
header.top { flex-wrap: wrap; }
header.top nav { flex-wrap: wrap; row-gap: .25rem; }
header.top nav a { white-space: nowrap; }
header.top nav a[aria-current="page"] { font-weight: 650; text-decoration-thickness: 2px; }
main { max-width: 440px; margin: 4vh auto 2rem; padding: 0 1rem; }
main.wide { max-width: 960px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: var(--radius);
  box-shadow: 0 1px 2px var(--shadow), 0 8px 24px var(--shadow); padding: 2rem; margin-bottom: 1.25rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.1rem; margin: 0 0 .75rem; }
p.lead { color: var(--muted); margin: 0 0 1.5rem; }
label { display: block; font-weight: 600; font-size: .92rem; margin: 1rem 0 .35rem; }
input, select, textarea { width: 100%; font: inherit; padding: .65rem .8rem; border: 1px solid var(--line);
  border-radius: 8px; background: var(--field); color: var(--ink); }
textarea { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .88rem; }
input:focus-visible, select:focus-visible, textarea:focus-visible, button:focus-visible, a:focus-visible {
  outline: 3px solid rgba(55, 84, 214, .35); outline-offset: 1px; border-color: var(--brand); }
button { font: inherit; font-weight: 600; cursor: pointer; border-radius: 8px; padding: .65rem 1.1rem;
  border: 1px solid var(--brand); background: var(--brand); color: var(--brand-ink); margin-top: 1.1rem; }
button:hover { background: var(--brand-dark); }
button.secondary { background: transparent; color: var(--brand); }
button.secondary:hover { background: rgba(55, 84, 214, .08); }
button.danger { background: transparent; color: var(--bad); border-color: var(--bad); }
button.block { width: 100%; }
.row { display: flex; gap: .75rem; align-items: flex-end; flex-wrap: wrap; }
.row > * { flex: 1; }
.muted { color: var(--muted); font-size: .92rem; }
.who { display: flex; justify-content: space-between; align-items: center; background: var(--bg);
  border-radius: 8px; padding: .5rem .8rem; margin-bottom: .5rem; font-size: .95rem; }
.who button { margin: 0; padding: .25rem .6rem; font-size: .85rem; }
.who { gap: .75rem; }
.who { flex-wrap: wrap; row-gap: .4rem; }
.who > span { min-width: 0; flex: 1 1 12rem; overflow-wrap: break-word; }
.who button { margin-left: auto; }
@media (max-width: 480px) { .card { padding: 1.25rem; } header.top { padding: 1rem; } }
.who button { white-space: nowrap; flex: none; }
.alert { border-radius: 8px; padding: .7rem .9rem; margin: 0 0 1rem; font-size: .95rem; }
.alert.error { background: var(--bad-bg); color: var(--bad); }
.alert.ok { background: var(--good-bg); color: var(--good); }
.alert.warn { background: var(--warn-bg); color: var(--warn); }
.alert.warn a { color: inherit; font-weight: 600; }
.row > .narrow { flex: 0 0 8rem; }
#other-ways { margin-top: .25rem; }
#other-ways button { flex: 0 1 auto; font-size: .9rem; padding: .45rem .8rem; }
.badge { display: inline-block; font-size: .78rem; padding: .1rem .5rem; border-radius: 99px;
  background: var(--bg); border: 1px solid var(--line); color: var(--muted); }
.badge.on { background: var(--good-bg); color: var(--good); border-color: transparent; }
.qr { display: block; margin: 1rem auto; width: 200px; height: 200px; image-rendering: pixelated; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9rem; }
ul.keys { list-style: none; padding: 0; margin: 0 0 .75rem; }
ul.keys li { display: flex; justify-content: space-between; align-items: center; gap: .5rem;
  border-bottom: 1px solid var(--line); padding: .35rem 0; font-size: .92rem; }
ul.keys li button { margin: 0; padding: .25rem .6rem; font-size: .85rem; }
#passkey-signin { margin-top: .75rem; }
ol.codes { columns: 2; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; padding-left: 1.5rem; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 1.25rem; }
@media (max-width: 760px) { .grid { grid-template-columns: 1fr; } }
pre.out { background: #0f1522; color: #e6e9f2; border-radius: 8px; padding: 1rem; overflow: auto;
  max-height: 480px; font-size: .85rem; white-space: pre-wrap; word-break: break-word; }
.status { font-weight: 700; }
.status.s2 { color: var(--good); } .status.s4, .status.s5 { color: var(--bad); }
[hidden] { display: none !important; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
/* Dark mode: follows the system setting; the same contrast as the light colours (axe-checked). */
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #11151d; --card: #1a202b; --ink: #e7eaf1; --muted: #a9b1c1; --line: #343c4c;
    --brand: #8fa4ff; --brand-ink: #0e1424; --brand-dark: #b3c1ff; --bad: #ffb4ab; --bad-bg: #3b1714;
    --good: #9ad8a0; --good-bg: #16301a; --field: #121722; --warn: #ffd58a; --warn-bg: #3a2a08;
    --shadow: rgba(0, 0, 0, .35);
  }
  button.secondary:hover { background: rgba(143, 164, 255, .12); }
  input:focus-visible, select:focus-visible, textarea:focus-visible, button:focus-visible, a:focus-visible {
    outline-color: rgba(143, 164, 255, .5); }
  pre.out { background: #0b0f16; border: 1px solid var(--line); }
  .qr { background: #fff; padding: 8px; }
}
footer { text-align: center; color: var(--muted); font-size: .85rem; padding: 1rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: 1rem 0; }
ul.plain { list-style: none; padding: 0; } ul.plain li { display: flex; align-items: center; justify-content: space-between; gap: .5rem; padding: .25rem 0; }
.match { font-size: 3rem; font-weight: 750; letter-spacing: .1em; text-align: center; margin: .5rem 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
.or { display: flex; align-items: center; gap: .75rem; color: var(--muted); font-size: .9rem; margin: 1.25rem 0 0; }
.or::before, .or::after { content: ''; flex: 1; border-top: 1px solid var(--line); }
button.provider { border-color: var(--line); color: var(--ink); margin-top: .6rem; }
.alert.info { background: var(--bg); color: var(--ink); border: 1px solid var(--line); }
.card.flush { padding: 0; overflow-x: auto; }
table.requests { width: 100%; border-collapse: collapse; font-size: .95rem; }
table.requests th { text-align: left; font-size: .85rem; color: var(--muted); font-weight: 600; padding: .8rem 1rem; border-bottom: 1px solid var(--line); }
table.requests td { padding: .8rem 1rem; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
table.requests tr:last-child td { border-bottom: 0; }
form.decide { min-width: 14rem; }
form.decide .row { gap: .5rem; }
form.decide button { margin-top: .5rem; padding: .45rem .8rem; }
ul.links { list-style: none; padding: 0; margin: .5rem 0 0; }
ul.links li { display: flex; justify-content: space-between; align-items: center; gap: .5rem; padding: .3rem 0; }
ul.links li button { margin: 0; padding: .25rem .6rem; font-size: .85rem; }
`;
