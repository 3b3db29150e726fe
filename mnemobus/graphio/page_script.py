"""The graph page's own style and script, inlined into every page (no CDN, no library: it must work offline).

The script reads the page's JSON (entities with the positions the server laid out, every fact with its
valid time and source turns), draws SVG, and keeps it usable at thousands of entities by level of detail:
labels only for the best-connected entities in view, at a constant size on screen, recomputed after a zoom
or pan. Every stored string reaches the page through textContent or setAttribute, never as markup.
"""

STYLE = """
*{box-sizing:border-box}body{margin:0;font:14px/1.4 system-ui,sans-serif;color:#1d2430;display:flex;
flex-direction:column;height:100vh}header{display:flex;gap:12px;align-items:center;flex-wrap:wrap;
padding:8px 12px;border-bottom:1px solid #d5dae3;background:#f6f8fb}header h1{font-size:16px;margin:0}
#stats{color:#566}main{flex:1;display:flex;min-height:0}#graph{flex:1;background:#fff;cursor:grab;
touch-action:none}aside{width:380px;overflow:auto;border-left:1px solid #d5dae3;padding:8px 12px}
line{stroke:#9aa7b8;stroke-width:1;vector-effect:non-scaling-stroke}circle{fill:#4a78c2;stroke:#fff;
stroke-width:1;vector-effect:non-scaling-stroke;cursor:pointer}circle.t-person{fill:#d0673a}
circle.t-place{fill:#3a9d6a}circle.t-organization{fill:#8a5cc2}circle.hit{fill:#f2b705}
circle.sel{stroke:#111;stroke-width:3}line.sel{stroke:#d0673a;stroke-width:2}text{fill:#1d2430;pointer-events:none;paint-order:stroke;stroke:#fff;
stroke-width:3px;stroke-linejoin:round}#results button{display:block;border:0;background:none;padding:2px 0;
color:#245;cursor:pointer;text-align:left}.fact{margin:8px 0;padding:6px 8px;border-left:3px solid #4a78c2;
background:#f6f8fb}.fact.ended{border-color:#bbb;color:#667}.when{color:#667;font-size:12px}
.turn{margin:4px 0 0 8px;font-size:13px}.turn b{font-weight:600}
"""

SCRIPT = r"""
(() => {
const D = JSON.parse(document.getElementById('data').textContent);
const E = D.entities, F = D.facts, P = D.episodes, NS = 'http://www.w3.org/2000/svg';
const $ = id => document.getElementById(id);
const svg = $('graph'), gE = $('edges'), gN = $('nodes'), gL = $('labels');
const day = 86400000, iso = ms => new Date(ms).toISOString().slice(0, 10);
const el = (tag, text, cls) => { const x = document.createElement(tag);
  if (text !== undefined) x.textContent = text; if (cls) x.className = cls; return x; };
let asOf = D.now, selected = -1, vb = null;
const byDegree = E.map((_, i) => i).sort((a, b) => E[b][4] - E[a][4]);
const radius = i => 3 + Math.sqrt(E[i][4]);
const lines = [], dots = [];
const fe = document.createDocumentFragment(), fn = document.createDocumentFragment();
F.forEach((f, i) => { const a = E[f[0]], b = E[f[1]], l = document.createElementNS(NS, 'line');
  l.setAttribute('x1', a[2]); l.setAttribute('y1', a[3]); l.setAttribute('x2', b[2]); l.setAttribute('y2', b[3]);
  l.dataset.f = i; lines.push(l); fe.appendChild(l); });
E.forEach((e, i) => { const c = document.createElementNS(NS, 'circle');
  c.setAttribute('cx', e[2]); c.setAttribute('cy', e[3]); c.setAttribute('r', radius(i));
  c.setAttribute('class', 't-' + e[1]); c.dataset.i = i;
  const t = document.createElementNS(NS, 'title'); t.textContent = e[0]; c.appendChild(t);
  dots.push(c); fn.appendChild(c); });
gE.appendChild(fe); gN.appendChild(fn);

const validFact = f => (f[4] === null || f[4] <= asOf) && (f[5] === null || asOf < f[5]);
const seenEntity = e => e[5] === null || e[5] <= asOf;
function applyTime() {
  let n = 0, m = 0;
  E.forEach((e, i) => { const on = seenEntity(e); dots[i].style.display = on ? '' : 'none'; n += on; });
  F.forEach((f, i) => { const on = validFact(f) && seenEntity(E[f[0]]) && seenEntity(E[f[1]]);
    lines[i].style.display = on ? '' : 'none'; m += on; });
  $('stats').textContent = `${n} entities · ${m} facts valid on ${iso(asOf)}`;
  $('asof').value = iso(asOf); $('slider').value = Math.round(asOf / day);
  labels(); if (selected >= 0) show(selected);
}

function setView(x, y, w, h) { vb = {x, y, w, h}; svg.setAttribute('viewBox', `${x} ${y} ${w} ${h}`); }
function fit() {
  const xs = E.map(e => e[2]).concat([0]), ys = E.map(e => e[3]).concat([0]);
  // at least 360 units across: a small graph is not blown up to dinner plates
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const w = Math.max(x1 - x0 + 60, 360), h = Math.max(y1 - y0 + 60, 360);
  setView((x0 + x1 - w) / 2, (y0 + y1 - h) / 2, w, h);
}
function scale() { const r = svg.getBoundingClientRect();
  return Math.min(r.width / vb.w, r.height / vb.h) || 1; }
const inView = (x, y) => x >= vb.x && x <= vb.x + vb.w && y >= vb.y && y <= vb.y + vb.h;
function labels() {
  // level of detail: at most 200 labels, best-connected entities in view first, none over another on screen
  const s = scale(), frag = document.createDocumentFragment(), taken = new Set();
  const order = selected >= 0 ? [selected, ...byDegree] : byDegree;
  let shown = 0;
  for (const i of order) {
    const e = E[i];
    if (shown >= 200) break;
    if (!seenEntity(e) || !inView(e[2], e[3])) continue;
    const cx = Math.floor((e[2] - vb.x) * s / 10), cy = Math.floor((e[3] - vb.y) * s / 16);
    const cells = [];
    for (let k = 0; k <= Math.ceil(e[0].length * 0.75); k++) cells.push(cx + k + ',' + cy);
    if (cells.some(c => taken.has(c))) continue;
    cells.forEach(c => taken.add(c));
    const t = document.createElementNS(NS, 'text');
    t.setAttribute('x', e[2] + radius(i) + 2 / s); t.setAttribute('y', e[3] + 4 / s);
    t.setAttribute('font-size', 12 / s); t.textContent = e[0]; frag.appendChild(t); shown++;
  }
  gL.replaceChildren(frag);
  // many edges in view fade, so the shape shows instead of a solid disc; the selected entity's stay solid
  let edges = 0;
  F.forEach((f, i) => { if (lines[i].style.display !== 'none' && inView((E[f[0]][2] + E[f[1]][2]) / 2,
    (E[f[0]][3] + E[f[1]][3]) / 2)) edges++; });
  gE.style.strokeOpacity = Math.min(1, Math.max(0.06, 300 / Math.max(edges, 1)));
}
let pending = false;
const relabel = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; labels(); }); } };

function factItem(f) {
  const li = el('div', f[3], 'fact' + (validFact(f) ? '' : ' ended'));
  const when = (f[4] === null ? 'valid' : `from ${iso(f[4])}`) + (f[5] === null ? '' : ` until ${iso(f[5])}`);
  li.appendChild(el('div', validFact(f) ? when : `${when} (not valid on ${iso(asOf)})`, 'when'));
  for (const k of f[6]) { const p = P[k], turn = el('div', '', 'turn');
    turn.appendChild(el('b', `${p[1] || p[0]} (${p[0]}), ${iso(p[2])}: `)); turn.appendChild(document.createTextNode(p[3]));
    li.appendChild(turn); }
  return li;
}
function show(i) {
  const e = E[i], box = $('facts'), mine = F.filter(f => f[0] === i || f[1] === i);
  const now = mine.filter(validFact), other = mine.filter(f => !validFact(f));
  box.replaceChildren(el('h2', e[0]), el('div', `${e[1]}${e[6] ? ' · also ' + e[6] : ''}`, 'when'));
  const list = (title, facts) => { box.appendChild(el('h3', title));
    facts.slice(0, 100).forEach(f => box.appendChild(factItem(f)));
    if (facts.length > 100) box.appendChild(el('p', `… and ${facts.length - 100} more`, 'when')); };
  const newest = (a, b) => (b[4] || 0) - (a[4] || 0);
  list(`${now.length} fact(s) valid on ${iso(asOf)}`, now.sort(newest));
  if (other.length) list(`${other.length} other(s) in its history`, other.sort(newest));
}
function select(i, centre) {
  if (selected >= 0) dots[selected].classList.remove('sel');
  gE.querySelectorAll('line.sel').forEach(l => { l.classList.remove('sel'); l.style.strokeOpacity = ''; });
  selected = i; dots[i].classList.add('sel'); show(i);
  const mine = F.map((f, k) => k).filter(k => F[k][0] === i || F[k][1] === i);
  // a few edges stay solid however faded the rest; a hub's thousands fade with them
  mine.forEach(k => { lines[k].classList.add('sel'); if (mine.length <= 300) lines[k].style.strokeOpacity = 1; });
  if (centre) { const w = Math.min(vb.w, 600), h = vb.h * w / vb.w; setView(E[i][2] - w / 2, E[i][3] - h / 2, w, h); }
  labels();
}

gN.addEventListener('click', ev => { const i = ev.target.dataset && ev.target.dataset.i;
  if (i !== undefined && !dragged) select(+i, false); });
let drag = null, dragged = false;
svg.addEventListener('pointerdown', ev => { drag = {x: ev.clientX, y: ev.clientY, vx: vb.x, vy: vb.y}; dragged = false; });
svg.addEventListener('pointermove', ev => { if (!drag) return; const s = scale();
  const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
  if (Math.abs(dx) + Math.abs(dy) > 4) dragged = true;
  if (dragged) { setView(drag.vx - dx / s, drag.vy - dy / s, vb.w, vb.h); relabel(); } });
window.addEventListener('pointerup', () => { drag = null; });
svg.addEventListener('wheel', ev => { ev.preventDefault();
  const r = svg.getBoundingClientRect(), s = scale(), k = Math.exp(ev.deltaY * 0.0015);
  const px = vb.x + (ev.clientX - r.left) / s, py = vb.y + (ev.clientY - r.top) / s;
  setView(px - (px - vb.x) * k, py - (py - vb.y) * k, vb.w * k, vb.h * k); relabel(); }, {passive: false});

$('search').addEventListener('input', ev => {
  const q = ev.target.value.trim().toLowerCase(), list = $('results');
  dots.forEach(d => d.classList.remove('hit')); list.replaceChildren();
  if (!q) return;
  const found = byDegree.filter(i => E[i][0].toLowerCase().includes(q) || E[i][6].toLowerCase().includes(q));
  found.forEach(i => dots[i].classList.add('hit'));
  list.appendChild(el('div', `${found.length} match(es)`, 'when'));
  found.slice(0, 30).forEach(i => { const b = el('button', `${E[i][0]} (${E[i][1]})`);
    b.addEventListener('click', () => select(i, true)); list.appendChild(b); });
});
$('search').addEventListener('keydown', ev => { if (ev.key === 'Enter') { const b = $('results').querySelector('button');
  if (b) b.click(); } });
$('slider').min = Math.floor(D.first / day); $('slider').max = Math.ceil(D.now / day);
$('slider').addEventListener('input', ev => { asOf = (+ev.target.value + 1) * day - 1; applyTime(); });
$('asof').addEventListener('input', ev => { const t = Date.parse(ev.target.value + 'T23:59:59Z');
  if (!isNaN(t)) { asOf = t; applyTime(); } });
$('now').addEventListener('click', () => { asOf = D.now; applyTime(); });
window.addEventListener('resize', relabel);
fit(); applyTime();
document.documentElement.dataset.ready = Math.round(performance.now());
})();
"""
