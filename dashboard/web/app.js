// Kontinue's dashboard: a snapshot then changes, as server-sent events from
// the dashboard's informers. Everything shown comes from cli/view's model
// (OwnerView, ChainView); this file only draws it. Text goes in with
// textContent, never as HTML.
'use strict';

const state = { identity: {}, kinds: [], chains: [], owners: new Map(), updates: 0, filter: { q: '', ns: '', status: '' } };
const SVGNS = 'http://www.w3.org/2000/svg';

function ownerKey(kind, ns, name) { return kind + '/' + ns + '/' + name; }

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'onclick') el.addEventListener('click', v); else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// stateClass maps a condition status to the colour classes.
function stateClass(status) {
  switch (status) {
    case 'True': return 'true';
    case 'False': return 'false';
    case undefined: case null: case '': return 'none';
    default: return 'unknown';
  }
}

function chip(status, text) { return h('span', { class: 'chip ' + stateClass(status) }, text || status || 'Unknown'); }
function cut(str, n) { str = (str || '').replace(/\s+/g, ' ').trim(); return str.length > n ? str.slice(0, n - 1) + '…' : str; }
function refText(r) { return r ? r.kind + ' ' + (r.namespace ? r.namespace + '/' : '') + r.name : ''; }
function shortDigest(d) { return (d || '').replace(/^sha256:/, '').slice(0, 12); }

// ---- events ----------------------------------------------------------------

// What changed since the last frame: the page redraws only that. A whole
// redraw happens on a snapshot (the first one, or after a reconnect).
const dirty = { all: true, meta: true, chains: true, owners: new Set() };

function connect() {
  const live = document.getElementById('live');
  const es = new EventSource('events');
  es.onopen = () => { live.textContent = 'live'; live.className = 'live on'; };
  es.onerror = () => { live.textContent = 'reconnecting…'; live.className = 'live off'; };
  es.addEventListener('snapshot', (e) => {
    const snap = JSON.parse(e.data);
    state.identity = snap.identity; state.kinds = snap.kinds; state.chains = snap.chains;
    state.owners = new Map();
    for (const o of snap.owners) state.owners.set(ownerKey(o.ownerKind, o.namespace, o.name), o);
    dirty.all = true;
    changed();
  });
  es.addEventListener('owner', (e) => {
    const o = JSON.parse(e.data);
    const key = ownerKey(o.ownerKind, o.namespace, o.name);
    state.owners.set(key, o);
    dirty.owners.add(key);
    changed();
  });
  es.addEventListener('ownerDeleted', (e) => {
    const o = JSON.parse(e.data);
    const key = ownerKey(o.ownerKind, o.namespace, o.name);
    state.owners.delete(key);
    dirty.owners.add(key);
    changed();
  });
  es.addEventListener('chains', (e) => { state.chains = JSON.parse(e.data); dirty.chains = true; changed(); });
  es.addEventListener('kinds', (e) => { state.kinds = JSON.parse(e.data); dirty.meta = true; changed(); });
  es.addEventListener('identity', (e) => { state.identity = JSON.parse(e.data); dirty.meta = true; changed(); });
}

let pending = false;
function changed() {
  state.updates++;
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => { pending = false; render(); });
}

window.addEventListener('hashchange', () => { dirty.route = true; changed(); });

// ---- patching ------------------------------------------------------------------

// patch makes parent's children look like kids, keeping every node that is
// already equal (so that a text selection, a focused control or a button's
// feedback in an unchanged part survives an update) and descending into
// elements of the same tag. SVG drawings are replaced whole when they differ.
function patch(parent, kids) {
  let i = 0;
  for (; i < kids.length; i++) {
    // Live, not a copy: a kept node (a persistent table or button) may move.
    const k = kids[i], o = parent.childNodes[i];
    if (!o) { parent.append(k); continue; }
    if (o === k || o.isEqualNode(k)) continue;
    if (o.nodeType === 1 && k.nodeType === 1 && o.tagName === k.tagName && o.namespaceURI === k.namespaceURI &&
        o.namespaceURI !== SVGNS && !o.persistent && !k.persistent) {
      syncAttributes(o, k);
      patch(o, Array.from(k.childNodes));
      continue;
    }
    if (o.nodeType === 3 && k.nodeType === 3) { o.data = k.data; continue; }
    parent.replaceChild(k, o);
  }
  while (parent.childNodes.length > kids.length) parent.lastChild.remove();
}

function syncAttributes(o, k) {
  for (const a of Array.from(o.attributes)) if (!k.hasAttribute(a.name)) o.removeAttribute(a.name);
  for (const a of Array.from(k.attributes)) if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
}

// ---- the lists of owners ---------------------------------------------------------

// Rows of the side bar and of the home page's table, one per owner, kept
// in order and changed one at a time: with a thousand owners an update
// touches one row, not the page.
const rows = new Map(); // key -> { side, home, sideSig, homeSig }
let order = [];         // keys, sorted as sortedOwners sorts

function compareOwners(a, b) {
  return a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.ownerKind.localeCompare(b.ownerKind);
}

// insertAt is where key goes in order (binary search).
function insertAt(o) {
  let lo = 0, hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareOwners(state.owners.get(order[mid]) || keyOwner(order[mid]), o) < 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function keyOwner(key) {
  const [ownerKind, namespace, ...name] = key.split('/');
  return { ownerKind, namespace, name: name.join('/') };
}

// matches is the filter of the side bar: the namespace chosen, the state,
// and the search text in the name, namespace, kind, chain, reason or message.
function matches(o) {
  const f = state.filter;
  if (f.ns && o.namespace !== f.ns) return false;
  const st = o.ready.status;
  if (f.status === 'ready' && st !== 'True') return false;
  if (f.status === 'failing' && st !== 'False') return false;
  if (f.status === 'notready' && st === 'True') return false;
  if (!f.q) return true;
  const hay = (o.namespace + '/' + o.name + ' ' + o.ownerKind + ' ' + (o.chain ? o.chain.name : '') + ' ' +
    (o.ready.reason || '') + ' ' + (o.ready.message || '')).toLowerCase();
  return f.q.toLowerCase().split(/\s+/).every((w) => hay.includes(w));
}

function sideRow(o) {
  return h('a', { href: ownerHref(o), 'data-owner': o.namespace + '/' + o.name, 'data-key': ownerKey(o.ownerKind, o.namespace, o.name) },
    h('span', { class: 'dot ' + stateClass(o.ready.status) }), o.namespace + '/' + o.name,
    h('span', { class: 'sub' }, o.ownerKind + ' · ' + stepsReady(o) + ' steps Ready' + (o.ready.reason && o.ready.status !== 'True' ? ' · ' + o.ready.reason : '')));
}

function homeRow(o) {
  return h('tr', { 'data-key': ownerKey(o.ownerKind, o.namespace, o.name) },
    h('td', {}, o.namespace), h('td', {}, h('a', { href: ownerHref(o) }, o.name)), h('td', {}, o.ownerKind),
    h('td', {}, o.chain ? o.chain.name : '-'), h('td', {}, chip(o.ready.status, o.ready.reason || o.ready.status)),
    h('td', {}, stepsReady(o)), h('td', {}, cut(o.ready.status === 'True' ? '' : o.ready.message, 120)));
}

function sideSig(o) { return [o.ownerKind, o.ready.status, o.ready.reason, stepsReady(o)].join('\u0000'); }
function homeSig(o) { return [sideSig(o), o.chain ? o.chain.name : '', o.ready.message].join('\u0000'); }

function sideList() { return document.getElementById('side-owners'); }
function homeBody() { return homeTable.tBodies[0]; }

const homeTable = h('table', { id: 'owners-table' },
  h('thead', {}, h('tr', {}, ['namespace', 'name', 'kind', 'chain', 'ready', 'steps', 'message'].map((t) => h('th', {}, t)))),
  h('tbody', {}));

// updateRow brings one owner's rows in line with state.owners.
function updateRow(key) {
  const o = state.owners.get(key);
  const r = rows.get(key);
  if (!o) {
    if (r) {
      r.side.remove(); r.home.remove(); rows.delete(key);
      order.splice(order.indexOf(key), 1);
    }
    return;
  }
  if (!r) {
    const i = insertAt(o);
    order.splice(i, 0, key);
    const nr = { side: sideRow(o), home: homeRow(o), sideSig: sideSig(o), homeSig: homeSig(o) };
    const next = rows.get(order[i + 1]);
    sideList().insertBefore(nr.side, next ? next.side : null);
    homeBody().insertBefore(nr.home, next ? next.home : null);
    rows.set(key, nr);
    showRow(nr, o);
    return;
  }
  const ss = sideSig(o), hs = homeSig(o);
  if (ss !== r.sideSig) { const n = sideRow(o); r.side.replaceWith(n); r.side = n; r.sideSig = ss; }
  if (hs !== r.homeSig) { const n = homeRow(o); r.home.replaceWith(n); r.home = n; r.homeSig = hs; }
  showRow(r, o);
}

function showRow(r, o) {
  const hide = !matches(o);
  if (r.side.hidden !== hide) r.side.hidden = hide;
  if (r.home.hidden !== hide) r.home.hidden = hide;
  const sel = selected === ownerKey(o.ownerKind, o.namespace, o.name);
  if (r.side.classList.contains('sel') !== sel) r.side.classList.toggle('sel', sel);
}

let selected = '';

// rebuildRows draws every owner again (a snapshot).
function rebuildRows() {
  rows.clear();
  order = [...state.owners.keys()].sort((a, b) => compareOwners(state.owners.get(a), state.owners.get(b)));
  const side = [], home = [];
  for (const key of order) {
    const o = state.owners.get(key);
    const r = { side: sideRow(o), home: homeRow(o), sideSig: sideSig(o), homeSig: homeSig(o) };
    rows.set(key, r);
    showRow(r, o);
    side.push(r.side); home.push(r.home);
  }
  sideList().replaceChildren(...side);
  homeBody().replaceChildren(...home);
}

// refilter applies a changed filter to every row.
function refilter() {
  for (const [key, r] of rows) showRow(r, state.owners.get(key));
  renderCount();
}

function renderCount() {
  let shown = 0;
  for (const r of rows.values()) if (!r.side.hidden) shown++;
  const n = document.getElementById('owner-count');
  const txt = shown === rows.size ? rows.size + ' owner' + (rows.size === 1 ? '' : 's') : shown + ' of ' + rows.size + ' owners';
  if (n.textContent !== txt) n.textContent = txt;
  const empty = document.getElementById('side-empty');
  empty.hidden = shown > 0;
  empty.textContent = rows.size ? 'none matches the filter' : 'none visible';
}

// renderNamespaces keeps the namespace switcher's choices: the namespaces
// of the owners shown (the chosen one stays while it has none).
function renderNamespaces() {
  const sel = document.getElementById('filter-ns');
  const names = [...new Set([...state.owners.values()].map((o) => o.namespace))];
  if (state.filter.ns && !names.includes(state.filter.ns)) names.push(state.filter.ns);
  names.sort();
  const want = ['', ...names];
  const have = Array.from(sel.options).map((op) => op.value);
  if (want.join('\u0000') === have.join('\u0000')) return;
  sel.replaceChildren(...want.map((n) => h('option', { value: n }, n || 'all namespaces')));
  sel.value = state.filter.ns;
}

function setupFilters() {
  const q = document.getElementById('filter-q'), ns = document.getElementById('filter-ns'), st = document.getElementById('filter-status');
  const read = () => {
    state.filter = { q: q.value.trim(), ns: ns.value, status: st.value };
    refilter();
    if (route().view !== 'owner') { dirty.route = true; changed(); }
  };
  q.addEventListener('input', read);
  ns.addEventListener('change', read);
  st.addEventListener('change', read);
}

// ---- layout ------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'chain' && parts.length === 3) return { view: 'chain', kind: parts[1], name: parts[2] };
  if (parts[0] === 'owner' && parts.length === 4) return { view: 'owner', kind: parts[1], namespace: parts[2], name: parts[3] };
  return { view: 'home' };
}

function chainHref(kind, name) { return '#/chain/' + encodeURIComponent(kind) + '/' + encodeURIComponent(name); }
function ownerHref(o) { return '#/owner/' + [o.ownerKind, o.namespace, o.name].map(encodeURIComponent).join('/'); }

let firstPaint = 0;

function render() {
  const t0 = performance.now();
  document.body.dataset.updates = state.updates;
  const r = route();
  const owners = dirty.owners;
  if (dirty.all || dirty.meta) renderHeader();
  if (dirty.all) rebuildRows();
  else for (const key of owners) updateRow(key);
  const sel = r.view === 'owner' ? ownerKey(r.kind, r.namespace, r.name) : '';
  if (sel !== selected) {
    const before = rows.get(selected), after = rows.get(sel);
    selected = sel;
    if (before) before.side.classList.remove('sel');
    if (after) after.side.classList.add('sel');
  }
  if (dirty.all || owners.size) { renderNamespaces(); renderCount(); }
  if (dirty.all || dirty.chains || dirty.route || owners.size) patch(document.getElementById('side-chains'), sideChains(r));

  const main = document.getElementById('main');
  let redraw = dirty.all || dirty.route || dirty.meta;
  if (r.view === 'home') {
    redraw = redraw || dirty.chains || owners.size > 0; // counts in the chains table
    if (redraw) patch(main, homePage());
  } else if (r.view === 'chain') {
    redraw = redraw || dirty.chains || [...owners].some((k) => { const o = state.owners.get(k); return !o || (o.chain && o.chain.name === r.name); });
    if (redraw) patch(main, chainPage(r));
  } else {
    redraw = redraw || dirty.chains || owners.has(ownerKey(r.kind, r.namespace, r.name));
    if (redraw) patch(main, ownerPage(r));
  }
  dirty.all = dirty.meta = dirty.chains = dirty.route = false;
  dirty.owners = new Set();
  if (!firstPaint && state.owners.size) {
    firstPaint = performance.now();
    document.body.dataset.firstPaint = String(Math.round(firstPaint));
  }
  stats.frames++;
  stats.frameMs += performance.now() - t0;
}

// stats: what the page spent drawing (the browser test reads them).
const stats = window.kontinueStats = { frames: 0, frameMs: 0 };

function renderHeader() {
  const id = state.identity || {};
  const who = id.user ? 'reading as ' + id.user : (id.identity ? 'reading as ' + id.identity : 'reading with your kubeconfig');
  const parts = [who, id.namespace ? 'namespace ' + id.namespace : 'all namespaces'];
  if (id.readOnly) parts.push('read-only');
  document.getElementById('identity').textContent = parts.join(' · ');
  patch(document.getElementById('warnings'), state.kinds.filter((k) => k.error && (!k.synced || k.forbidden)).map((k) =>
    h('div', { class: 'warn', 'data-kind': k.resource },
      h('strong', {}, k.forbidden ? 'Not allowed to list ' + k.resource : 'Cannot list ' + k.resource),
      ': ', k.forbidden ? 'this identity may not list them, so none are shown. ' : '', cut(k.error, 300))));
}

function sideChains(r) {
  const items = [h('h2', {}, 'Chains')];
  if (!state.chains.length) items.push(h('div', { class: 'empty' }, 'none visible'));
  for (const c of state.chains) {
    const sel = r.view === 'chain' && r.kind === c.chainKind && r.name === c.name;
    items.push(h('a', { href: chainHref(c.chainKind, c.name), class: sel ? 'sel' : null, 'data-chain': c.name },
      h('span', { class: 'dot ' + stateClass(c.ready.status) }), c.name,
      h('span', { class: 'sub' }, c.chainKind + ' · ' + c.owners + ' owner' + (c.owners === 1 ? '' : 's') + ' · ' + c.ownersReady + ' Ready' +
        (c.rollout && c.rollout.phase !== 'Complete' ? ' · roll-out ' + rolloutPhase(c.rollout) : ''))));
  }
  return items;
}

function sortedOwners() {
  return order.map((k) => state.owners.get(k)).filter(Boolean);
}

function stepsReady(o) {
  const steps = o.steps || [];
  return steps.filter((s) => s.ready.status === 'True').length + '/' + steps.length;
}

// ---- pages -------------------------------------------------------------------

function homePage() {
  const chainRows = state.chains.map((c) => h('tr', {},
    h('td', {}, h('a', { href: chainHref(c.chainKind, c.name) }, c.name)),
    h('td', {}, c.chainKind), h('td', {}, chip(c.ready.status, c.ready.reason || c.ready.status)),
    h('td', {}, String((c.steps || []).length)), h('td', {}, String(c.owners)), h('td', {}, String(c.ownersReady)),
    h('td', {}, c.rollout ? chip(phaseStatus(c.rollout), rolloutPhase(c.rollout)) : '-')));
  homeTable.persistent = true; // its rows are kept by updateRow, never redrawn here
  homeTable.hidden = rows.size === 0;
  return [
    h('h1', {}, 'Chains'),
    chainRows.length ? h('table', {}, h('tr', {}, ['name', 'kind', 'ready', 'steps', 'owners', 'owners ready', 'roll-out'].map((t) => h('th', {}, t))), chainRows)
      : h('p', { class: 'muted' }, 'No ClusterSupplyChain or ClusterDelivery visible.'),
    h('h1', {}, 'Workloads and Deliverables'),
    rows.size ? null : h('p', { class: 'muted' }, 'No Workload or Deliverable visible.'),
    homeTable,
  ].filter(Boolean);
}

function findChain(kind, name) { return state.chains.find((c) => c.chainKind === kind && c.name === name); }

function chainPage(r) {
  const c = findChain(r.kind, r.name);
  if (!c) return [h('h1', {}, r.kind + ' ' + r.name), h('p', { class: 'muted' }, 'Not visible (deleted, or this identity may not read it).')];
  const out = [
    h('h1', {}, h('span', { class: 'kind' }, c.chainKind + ' '), c.name),
    h('div', { class: 'summary' }, chip(c.ready.status, 'Ready: ' + (c.ready.status || 'Unknown') + (c.ready.reason ? ' (' + c.ready.reason + ')' : '')),
      h('span', {}, c.owners + ' owner' + (c.owners === 1 ? '' : 's') + ', ' + c.ownersReady + ' Ready'),
      c.selector ? h('span', { class: 'muted' }, 'selects ', h('code', {}, c.selector)) : null),
  ];
  if (c.ready.status !== 'True' && c.ready.message) out.push(h('div', { class: 'message ' + stateClass(c.ready.status) }, c.ready.message));
  if (c.rollout) out.push(rolloutSection(c));
  out.push(h('div', { class: 'graph' }, graph(c, null)));
  const owners = sortedOwners().filter((o) => o.chain && o.chain.kind === c.chainKind && o.chain.name === c.name && matches(o));
  out.push(doraSection(c));
  const rolling = c.rollout && c.rollout.target;
  if (owners.length) {
    out.push(h('h2', {}, 'Owners on this chain'));
    out.push(h('table', { id: 'chain-owners' }, h('tr', {}, ['namespace', 'name', 'ready', 'steps', rolling ? 'revision' : null, 'message'].filter(Boolean).map((t) => h('th', {}, t))),
      owners.map((o) => h('tr', {}, h('td', {}, o.namespace), h('td', {}, h('a', { href: ownerHref(o) }, o.name)),
        h('td', {}, chip(o.ready.status, o.ready.reason || o.ready.status)), h('td', {}, stepsReady(o)),
        rolling ? h('td', {}, revisionText(c.rollout, o.chainRevision)) : null,
        h('td', {}, cut(o.ready.status === 'True' ? '' : o.ready.message, 140))))));
  }
  return out;
}

// ---- a chain's roll-out ----------------------------------------------------------

// The phase of a roll-out as shown: the status's, "Pending" before the
// controller looked, "paused" added when the annotation is on but the
// status does not say Paused yet (or a halted roll-out is paused too).
function rolloutPhase(r) {
  const phase = r.phase || 'Pending';
  return phase + (r.paused && phase !== 'Paused' ? ' · paused' : '');
}

function phaseStatus(r) {
  switch (r.phase) {
    case 'Complete': return 'True';
    case 'Halted': case 'Invalid': return 'False';
    default: return 'Unknown';
  }
}

// revisionText names an owner's chain revision against the roll-out's.
function revisionText(r, rev) {
  if (!rev) return h('span', { class: 'muted' }, 'none recorded');
  const which = rev === r.target ? 'target' : rev === r.stable ? 'stable' : rev === r.previous ? 'previous' : '';
  return h('span', { class: 'rev rev-' + (which || 'other'), 'data-revision': rev }, h('code', {}, rev), which ? ' ' + which : '');
}

function rolloutSection(c) {
  const r = c.rollout;
  const rows = [];
  const row = (k, ...v) => rows.push(h('dt', {}, k), h('dd', {}, ...v));
  row('stable', r.stable ? h('code', {}, r.stable) : h('span', { class: 'muted' }, 'none yet'));
  if (r.target) {
    row('target', h('code', {}, r.target), ' · wave ' + (r.wave + 1) + ' of ' + r.waves);
    row('owners', r.updated + ' of ' + r.admitted + ' admitted Ready on the target, of ' + r.owners);
  }
  if (r.previous) row('previous', h('code', {}, r.previous), h('span', { class: 'muted' }, ' undo restores it once no roll-out is under way'));
  if (r.paused) row('paused', 'yes: no further wave begins (kontinue.dev/rollout-paused)');
  const out = [h('h2', {}, 'Roll-out'),
    h('div', { class: 'summary' }, chip(phaseStatus(r), rolloutPhase(r)), state.identity.rollout ? rolloutButtons(c) : null),
    h('dl', { class: 'rollout-facts' }, rows)];
  if (r.error) out.push(h('div', { class: 'message false' }, 'spec.rollout cannot be used: ' + r.error));
  else if (r.condition && r.condition.status !== 'True' && r.condition.message) {
    out.push(h('div', { class: 'message ' + stateClass(r.condition.status), id: 'rollout-message' }, r.condition.type + ': ' + r.condition.message));
  }
  if ((r.failing || []).length) {
    out.push(h('div', { class: 'message false', id: 'rollout-failing' }, 'Failed on revision ' + r.target + ': ',
      r.failing.flatMap((key, i) => {
        const [ns, ...name] = key.split('/');
        const o = { ownerKind: c.chainKind === 'ClusterDelivery' ? 'Deliverable' : 'Workload', namespace: ns, name: name.join('/') };
        return [i ? ', ' : '', h('a', { href: ownerHref(o), 'data-failing': key }, key)];
      })));
  }
  if ((r.plan || []).length) {
    out.push(h('table', { class: 'waves' },
      h('tr', {}, ['wave', 'admits', 'state', 'owners', 'Ready on target', 'failed', ''].map((t) => h('th', {}, t))),
      r.plan.map((w, i) => {
        const st = !r.target ? '–' : i < r.wave ? 'done' : i === r.wave ? (r.phase === 'Halted' ? 'halted' : 'rolling') : 'waiting';
        return h('tr', { 'data-wave': i, 'data-state': st },
          h('td', {}, String(i + 1)), h('td', {}, w.rule + (w.implied ? ' (implied)' : '')), h('td', {}, st),
          h('td', {}, r.target ? String(w.owners) : '–'), h('td', {}, r.target ? String(w.updated) : '–'),
          h('td', { class: w.failing ? 'bad' : null }, r.target ? String(w.failing) : '–'),
          h('td', {}, (w.members || []).map((m) => h('a', { class: 'wm wm-' + m.state, href: ownerHref(m), 'data-member': m.namespace + '/' + m.name, 'data-state': m.state, title: m.state + (m.reason ? ': ' + m.reason : '') },
            m.namespace + '/' + m.name)), w.owners > (w.members || []).length ? h('span', { class: 'muted' }, ' and ' + (w.owners - w.members.length) + ' more') : null));
      })));
    out.push(h('p', { class: 'note' }, r.target
      ? 'Each owner is in the first wave that admits it: failed on the target (red), moving to it (amber), Ready on it (green), waiting for its wave (grey), passed over because nothing moves it (struck out: unserved by any running replica, being deleted, or no chain renders it).'
      : 'No roll-out under way: an edit of the chain or of a template it uses rolls out in these waves.'));
  }
  return h('section', { class: 'rollout', id: 'rollout', 'data-phase': r.phase || 'Pending', 'data-paused': r.paused ? 'true' : 'false' }, out);
}

// rolloutButtons are a chain's pause, resume and undo, kept across
// updates (their feedback stays); each POSTs api/rollout, which runs the
// function `kontinue rollout pause|resume|undo` runs, as the dashboard's
// identity. Undo asks for a second click.
const rolloutControls = new Map(); // chain key -> { el, buttons, result }
function rolloutButtons(c) {
  const key = c.chainKind + '/' + c.name;
  let ctl = rolloutControls.get(key);
  if (!ctl) {
    const result = h('span', { class: 'rollout-result', id: 'rollout-result' });
    const buttons = {};
    const send = async (verb, b) => {
      for (const x of Object.values(buttons)) x.disabled = true;
      result.textContent = verb + '…';
      try {
        const res = await fetch('api/rollout', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Kontinue-Dashboard': '1' },
          body: JSON.stringify({ verb, kind: c.chainKind, name: c.name }) });
        const body = await res.json();
        result.textContent = res.ok ? body.message : 'Failed: ' + cut(body.error, 160);
        result.className = 'rollout-result ' + (res.ok ? 'ok' : 'failed');
      } catch (err) {
        result.textContent = 'Failed: ' + err;
        result.className = 'rollout-result failed';
      }
      delete b.dataset.armed;
      updateRolloutButtons(ctl, findChain(c.chainKind, c.name) || c);
    };
    for (const [verb, label, title] of [
      ['pause', 'Pause', 'no further wave begins: sets kontinue.dev/rollout-paused, as `kontinue rollout pause` does'],
      ['resume', 'Resume', 'go on, and look at a halted wave again: as `kontinue rollout resume` does'],
      ['undo', 'Undo', 'write a kept revision\'s definitions back to the chain and its templates, as `kontinue rollout undo` does']]) {
      const b = h('button', { id: 'rollout-' + verb, title, 'data-verb': verb }, label);
      b.addEventListener('click', () => {
        if (verb === 'undo' && !b.dataset.armed) {
          b.dataset.armed = '1';
          b.textContent = 'Click again to undo to ' + undoTarget(findChain(c.chainKind, c.name) || c);
          setTimeout(() => { delete b.dataset.armed; updateRolloutButtons(ctl, findChain(c.chainKind, c.name) || c); }, 10000);
          return;
        }
        send(verb, b);
      });
      buttons[verb] = b;
    }
    ctl = { el: h('span', { class: 'rollout-buttons' }, Object.values(buttons), result), buttons, result };
    ctl.el.persistent = true;
    rolloutControls.set(key, ctl);
  }
  updateRolloutButtons(ctl, c);
  return ctl.el;
}

// undoTarget is the revision undo writes back: the stable one during a
// roll-out, else the previous one.
function undoTarget(c) { const r = c.rollout || {}; return r.target ? r.stable : r.previous; }

function updateRolloutButtons(ctl, c) {
  const r = c.rollout || {};
  const b = ctl.buttons;
  b.pause.disabled = !!r.paused;
  b.resume.disabled = !(r.paused || r.phase === 'Halted');
  b.undo.disabled = !undoTarget(c);
  if (!b.undo.dataset.armed) b.undo.textContent = undoTarget(c) ? 'Undo to ' + undoTarget(c) : 'Undo';
}

function ownerPage(r) {
  const o = state.owners.get(ownerKey(r.kind, r.namespace, r.name));
  if (!o) return [h('h1', {}, r.kind + ' ' + r.namespace + '/' + r.name), h('p', { class: 'muted' }, 'Not visible (deleted, or this identity may not read it).')];
  const out = [h('h1', { 'data-owner-title': o.name }, h('span', { class: 'kind' }, o.ownerKind + ' '), o.namespace + '/' + o.name)];
  const summary = h('div', { class: 'summary' },
    chip(o.ready.status, 'Ready: ' + o.ready.status + (o.ready.reason ? ' (' + o.ready.reason + ')' : '')),
    o.chain ? h('span', {}, 'on ', h('a', { href: chainHref(o.chain.kind, o.chain.name) }, o.chain.kind + ' ' + o.chain.name)) : h('span', { class: 'muted' }, 'no chain chosen'),
    h('span', { class: 'muted' }, stepsReady(o) + ' steps Ready'));
  const oc = o.chain ? findChain(o.chain.kind, o.chain.name) : null;
  if (oc && oc.rollout && oc.rollout.target) {
    // A roll-out under way: which revision of the chain's definitions this owner renders with.
    summary.append(h('span', { id: 'owner-revision' }, 'chain revision ', revisionText(oc.rollout, o.chainRevision),
      h('span', { class: 'muted' }, ' (roll-out ' + rolloutPhase(oc.rollout) + ')')));
  }
  if (!state.identity.readOnly) summary.append(reconcileButton(o));
  out.push(summary);
  if (o.stale) out.push(h('div', { class: 'message unknown' }, 'The status describes generation ' + o.observedGeneration + ' of ' + o.generation + ': Kontinue has not caught up yet.'));
  if (o.ready.status !== 'True' && o.ready.message) out.push(h('div', { class: 'message ' + stateClass(o.ready.status), id: 'owner-message' }, o.ready.message));
  if (!o.conditions || !o.conditions.length) out.push(h('div', { class: 'message unknown' }, 'No status yet: is Kontinue running, and does it watch this namespace?'));
  let chain = o.chain ? findChain(o.chain.kind, o.chain.name) : null;
  let note = null;
  if (!chain) {
    chain = o.graph; // cli/view ChainOf: the steps and inputs of the owner's status
    note = 'The chain is not visible to this identity: drawn from the owner\'s status (no options).';
  }
  if ((o.steps || []).length) {
    out.push(h('div', { class: 'graph' }, graph(chain, o)));
    if (note) out.push(h('div', { class: 'note' }, note));
  }
  out.push(h('div', { class: 'cards' }, (o.steps || []).map((st) => stepCard(o, st, chain))));
  out.push(timelineSection(o));
  if (o.orphans && o.orphans.length) {
    out.push(h('h2', {}, 'Orphans'), h('p', { class: 'muted' }, 'Stamped objects no step stamps any more; deletion is retried.'),
      h('ul', {}, o.orphans.map((r) => h('li', {}, refText(r)))));
  }
  if (o.conditions && o.conditions.length) {
    out.push(h('h2', {}, 'Conditions'), h('table', {}, h('tr', {}, ['type', 'status', 'reason', 'message'].map((t) => h('th', {}, t))),
      o.conditions.map((c) => h('tr', {}, h('td', {}, c.type), h('td', {}, chip(c.status)), h('td', {}, c.reason || ''), h('td', {}, c.message || '')))));
  }
  if (o.reconcileRequestedAt) out.push(h('p', { class: 'note', id: 'reconcile-requested' }, 'reconcile requested at ' + o.reconcileRequestedAt));
  return out;
}

// reconcileButton is one button per owner, kept across updates: its
// feedback ("Requested") stays while the owner's events redraw the page.
const buttons = new Map();
function reconcileButton(o) {
  const key = ownerKey(o.ownerKind, o.namespace, o.name);
  let b = buttons.get(key);
  if (!b) {
    b = h('button', { id: 'reconcile', title: 'sets kontinue.dev/reconcile-requested-at, as `kontinue reconcile` does' }, 'Reconcile now');
    b.persistent = true;
    buttons.set(key, b);
    const reset = () => { delete b.dataset.requested; b.disabled = false; b.textContent = 'Reconcile now'; };
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        const res = await fetch('api/reconcile', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Kontinue-Dashboard': '1' },
          body: JSON.stringify({ kind: o.ownerKind, namespace: o.namespace, name: o.name }) });
        const body = await res.json();
        if (res.ok) {
          // "Requested" until the controller says it handled this request
          // (status.lastHandledReconcileAt), then "Reconciled".
          b.textContent = 'Requested';
          b.dataset.requested = body.requestedAt;
          reconcileFeedback(b, state.owners.get(key));
          return;
        }
        b.textContent = 'Failed: ' + cut(body.error, 80);
      } catch (err) {
        b.textContent = 'Failed: ' + err;
      }
      setTimeout(reset, 3000);
    });
    b.reset = reset;
  }
  reconcileFeedback(b, o);
  return b;
}

function reconcileFeedback(b, o) {
  if (!o || !b.dataset.requested || o.lastHandledReconcileAt !== b.dataset.requested || b.textContent === 'Reconciled') return;
  b.textContent = 'Reconciled';
  setTimeout(b.reset, 3000);
}

// stepState is the colour of a step: its Ready condition.
function stepState(st) { return st ? stateClass(st.ready.status) : 'none'; }

// optionUsed is the option of a chain step the owner's step took: the
// template it names, or a pass-through.
function optionUsed(cs, st) {
  if (!st || !cs.options) return -1;
  return cs.options.findIndex((op) => (st.passThrough && op.passThrough) || (!st.passThrough && st.template && op.name === st.template.name));
}

function stepCard(o, st, chain) {
  const cls = stepState(st);
  const cs = (chain.steps || []).find((c) => c.name === st.name);
  const rows = [];
  const row = (k, ...v) => rows.push(h('dt', {}, k), h('dd', {}, ...v));
  if (st.template) row('template', st.template.kind + ' ' + st.template.name);
  const used = cs ? optionUsed(cs, st) : -1;
  if (cs && cs.options && cs.options.length) {
    row('option', used >= 0 ? (cs.options[used].passThrough ? 'passThrough: ' + cs.options[used].passThrough : cs.options[used].name) +
      ' (' + (cs.options[used].selector || 'empty selector: matches all') + ')' : 'none matched');
  } else if (st.passThrough) {
    row('option', 'passThrough' + (st.submitted && st.submitted.message ? ': ' + st.submitted.message : ''));
  }
  if (st.inputs && st.inputs.length) row('inputs', st.inputs.join(', '));
  if (st.stamped) row('stamped', refText(st.stamped), ' ', objectLinks(o, st));
  for (const ob of st.objects || []) if (!st.stamped || refText(ob) !== refText(st.stamped)) row('object', refText(ob));
  if (st.health) row('health', chip(st.health === 'Healthy' ? 'True' : st.health === 'Unhealthy' ? 'False' : 'Unknown', st.health),
    st.healthy && st.healthy.reason ? ' ' + st.healthy.reason : '');
  for (const out of st.outputs || []) row(out.name, h('code', {}, cut(out.preview, 160)), out.since ? h('span', { class: 'muted' }, ' since ' + out.since) : '');
  if (st.heldInputDigest) row('held', 'newer inputs ' + shortDigest(st.heldInputDigest) + ' wait until the object finishes with ' + (shortDigest(st.inputDigest) || '-'));
  const prov = st.provenance || {};
  for (const which of ['current', 'latest', 'held']) if (prov[which]) row(which, provenanceText(prov[which]));
  for (const v of st.verification || []) {
    row('verify', h('span', { 'data-verify': v.type + '/' + v.name, 'data-result': v.result },
      chip(v.result === 'Verified' ? 'True' : v.result === 'Refused' ? 'False' : 'Unknown', v.result), ' ', v.type + ' ' + v.name,
      v.digest ? h('code', {}, ' ' + shortDigest(v.digest)) : '', v.rule ? ' (' + v.rule + ')' : '',
      v.held ? h('span', { class: 'muted' }, '; the step keeps its previous ' + v.type) : '',
      v.message ? h('span', { class: 'muted' }, ': ' + cut(v.message, 200)) : ''));
  }
  if (st.shadow || st.servedBy === 'shadow') row('shadow', 'outputs served by the ' + (st.servedBy || '-') + (st.shadow ? '; last good copy ' + refText(st.shadow) : ''));
  if (st.runnable) {
    const rn = st.runnable;
    let txt = rn.ready.status + (rn.ready.reason ? ' ' + rn.ready.reason : '');
    if (rn.latestRun) txt += '; latest ' + rn.latestRun.kind + ' ' + rn.latestRun.name + (rn.latestRunSucceeded ? ' (Succeeded: ' + rn.latestRunSucceeded + ')' : '');
    if (rn.latestSuccessfulRun && (!rn.latestRun || rn.latestSuccessfulRun.name !== rn.latestRun.name)) txt += '; last success ' + rn.latestSuccessfulRun.name;
    row('runs', txt);
  }
  const msgs = [];
  for (const c of [st.ready, st.submitted, st.healthy]) {
    if (c && c.status !== 'True' && c.message && !msgs.some((m) => m.message === c.message)) msgs.push(c);
  }
  if (st.runnable && st.runnable.latestRunMessage && st.runnable.latestRunSucceeded === 'False') msgs.push({ status: 'False', type: 'Run', message: st.runnable.latestRunMessage });
  const card = h('div', { class: 'card state-' + cls, id: 'step-' + st.name, 'data-step': st.name, 'data-state': cls },
    h('h3', {}, h('span', { class: 'dot ' + cls }), st.name, chip(st.ready.status, st.ready.status === 'True' ? 'Ready' : (st.ready.reason || st.ready.status))),
    h('dl', {}, rows),
    msgs.map((c) => h('div', { class: 'message ' + stateClass(c.status), 'data-condition': c.type }, c.type + ': ' + c.message)),
    detailPanel(o, st));
  return card;
}

// A step's stamped object as YAML, or its events: fetched when asked (one
// GET or LIST with the dashboard's identity), shown under the step's card,
// and kept there across updates of the owner until closed.
const panels = new Map(); // owner key + step -> { what, el }

function panelKey(o, st) { return ownerKey(o.ownerKind, o.namespace, o.name) + '#' + st.name; }

function objectLinks(o, st) {
  const ref = st.stamped;
  const link = (what, label) => h('a', { href: '#', class: 'objlink', 'data-show': what, onclick: (e) => { e.preventDefault(); showDetail(o, st, what); } }, label);
  return h('span', { class: 'objlinks' }, ref.resource && ref.apiVersion ? link('yaml', 'YAML') : null, ' ', link('events', 'events'));
}

function detailPanel(o, st) {
  const p = panels.get(panelKey(o, st));
  return p ? p.el : null;
}

async function showDetail(o, st, what) {
  const key = panelKey(o, st), ref = st.stamped;
  const old = panels.get(key);
  if (old && old.what === what) { old.el.remove(); panels.delete(key); return; } // a second click closes it
  const body = h('pre', { class: 'detail-body' }, 'loading…');
  const el = h('div', { class: 'detail', 'data-detail': what },
    h('div', { class: 'detail-head' }, (what === 'yaml' ? 'YAML of ' : 'Events of ') + refText(ref), ' ',
      h('a', { href: '#', onclick: (e) => { e.preventDefault(); el.remove(); panels.delete(key); } }, 'close')), body);
  el.persistent = true;
  if (old) old.el.replaceWith(el); else document.getElementById('step-' + st.name)?.append(el);
  panels.set(key, { what, el });
  const q = new URLSearchParams(what === 'yaml'
    ? { apiVersion: ref.apiVersion, resource: ref.resource, namespace: ref.namespace || '', name: ref.name }
    : { kind: ref.kind, namespace: ref.namespace || '', name: ref.name });
  try {
    const res = await fetch('api/' + (what === 'yaml' ? 'object' : 'events') + '?' + q);
    if (!res.ok) { body.textContent = 'Failed: ' + ((await res.json()).error || res.status); return; }
    if (what === 'yaml') { body.textContent = await res.text(); return; }
    const evs = await res.json();
    body.textContent = evs.length ? evs.map((e) => [e.lastSeen, e.type, e.reason, (e.count > 1 ? '×' + e.count + ' ' : '') + e.message].join('  ')).join('\n')
      : 'No events (events expire after an hour).';
  } catch (err) {
    body.textContent = 'Failed: ' + err;
  }
}

// ---- provenance and the timeline ---------------------------------------------

// provenanceText is one input set of a step's provenance: its outcome, the
// values it was rendered from, when it was taken and ended.
function provenanceText(set) {
  const vals = [];
  for (const v of set.sources || []) vals.push(v.resource + ': ' + (v.url || '') + (v.revision ? '@' + v.revision : ''));
  if (set.deployment) vals.push(set.deployment.resource + ': ' + (set.deployment.url || '') + (set.deployment.revision ? '@' + set.deployment.revision : ''));
  for (const v of set.images || []) vals.push(v.resource + ': ' + v.image);
  for (const v of set.configs || []) vals.push(v.resource + ': config ' + shortDigest(v.digest));
  if (!vals.length && set.ownerGeneration) vals.push('the owner\'s spec, generation ' + set.ownerGeneration);
  const times = [];
  if (set.takenAt) times.push('taken ' + set.takenAt);
  const d = span(set.takenAt, set.endedAt);
  if (set.endedAt) times.push('ended ' + set.endedAt + (d ? ' (' + d + ')' : ''));
  const cls = set.outcome === 'Succeeded' ? 'True' : set.outcome === 'Failed' ? 'False' : 'Unknown';
  return h('span', { class: 'prov', 'data-outcome': set.outcome }, chip(cls, set.outcome), ' ',
    vals.flatMap((v, i) => [i ? ', ' : '', h('code', {}, cut(v, 120))]), times.length ? h('span', { class: 'muted' }, ' ' + times.join(', ')) : '');
}

// span is the time from a to b (metav1 times) as 3s, 2m5s, 1h2m.
function span(a, b) {
  if (!a || !b) return '';
  return seconds(Math.round((Date.parse(b) - Date.parse(a)) / 1000));
}

// seconds is a duration in seconds as 3s, 2m5s, 1h2m.
function seconds(sec) {
  if (!(sec >= 0)) return '';
  sec = Math.round(sec);
  if (sec < 60) return sec + 's';
  if (sec < 3600) return Math.floor(sec / 60) + 'm' + (sec % 60 ? (sec % 60) + 's' : '');
  return Math.floor(sec / 3600) + 'h' + (Math.floor(sec / 60) % 60 ? (Math.floor(sec / 60) % 60) + 'm' : '');
}

// An owner's timeline: its revisions as rows, its steps as columns, each
// cell in the colour of how the step fared with the revision. GET
// api/history (the history ConfigMap folded with the status, as `kontinue
// history`) when the page shows the owner and after its steps change
// (again 2 s later: the history is written just after the status); the
// section is kept across updates.
const timelines = new Map(); // owner key -> { el, body, sig, timers }

function timelineSection(o) {
  const key = ownerKey(o.ownerKind, o.namespace, o.name);
  let t = timelines.get(key);
  if (!t) {
    const body = h('div', { class: 'timeline-body' }, h('p', { class: 'muted' }, 'loading…'));
    const el = h('section', { class: 'timeline', id: 'timeline' }, h('h2', {}, 'Timeline'), body);
    el.persistent = true;
    t = { el, body, sig: null, timers: [] };
    timelines.set(key, t);
  }
  const sig = JSON.stringify((o.steps || []).map((st) => [st.name, st.provenance || null]));
  if (sig !== t.sig) {
    t.sig = sig;
    for (const id of t.timers) clearTimeout(id);
    t.timers = [setTimeout(() => loadTimeline(o, t), 200), setTimeout(() => loadTimeline(o, t), 2000)];
  }
  return t.el;
}

async function loadTimeline(o, t) {
  const q = new URLSearchParams({ kind: o.ownerKind, namespace: o.namespace, name: o.name });
  try {
    const res = await fetch('api/history?' + q);
    const body = await res.json();
    if (!res.ok) { patch(t.body, [h('p', { class: 'muted' }, 'Failed: ' + (body.error || res.status))]); return; }
    patch(t.body, timelineContent(body));
  } catch (err) {
    patch(t.body, [h('p', { class: 'muted' }, 'Failed: ' + err)]);
  }
}

function revisionLabel(r) { return (r.roots || []).map((x) => x.label).join(' + '); }

function timelineContent(tl) {
  const out = [];
  if (!tl.revisions.length) out.push(h('p', { class: 'muted' }, 'No input revision yet.'));
  else {
    out.push(h('table', { class: 'timeline-table' },
      h('tr', {}, h('th', {}, 'revision'), h('th', {}, 'since'), tl.steps.map((s) => h('th', {}, s))),
      tl.revisions.map((r) => h('tr', { 'data-revision': revisionLabel(r) },
        h('td', {}, h('code', {}, cut(revisionLabel(r), 80))), h('td', { class: 'muted' }, r.since || ''),
        tl.steps.map((s) => timelineCell(r, s))))));
  }
  out.push(h('p', { class: 'note' }, 'Each step\'s outcome with the revision and the time from when it took it to when it ended; revisions that left the status come from the owner\'s history ConfigMap.'));
  if (tl.note) out.push(h('div', { class: 'message unknown' }, tl.note));
  return out;
}

function timelineCell(r, step) {
  const c = (r.steps || []).find((x) => x.step === step);
  if (!c) return h('td', { class: 'tl tl-none', 'data-step': step }, '–');
  const d = span(c.takenAt, c.endedAt);
  const title = [c.outcome, c.takenAt ? 'taken ' + c.takenAt : '', c.endedAt ? 'ended ' + c.endedAt : '', c.reason, c.message].filter(Boolean).join('\n');
  return h('td', { class: 'tl tl-' + c.outcome.toLowerCase(), 'data-step': step, 'data-outcome': c.outcome, title },
    h('span', { class: 'tl-outcome' }, c.outcome + (c.shadowed ? ' · shadow served' : '')), d ? h('span', { class: 'tl-dur' }, ' ' + d) : null,
    c.reason ? h('div', { class: 'tl-reason' }, c.reason) : null);
}

// ---- the graph ---------------------------------------------------------------

const NODE_W = 210, COL_GAP = 64, ROW_GAP = 22, PAD = 16, OPT_H = 20;

function nodeHeight(cs) { return 62 + (cs.options ? cs.options.length * (OPT_H + 4) + 4 : 0); }

// graph draws a chain's steps in columns by depth, inputs as arrows, the
// options of a step as branches inside its box; with an owner, each step
// in its colour, the option it took highlighted.
function graph(chain, owner) {
  const steps = chain.steps || [];
  const byName = new Map((owner ? owner.steps || [] : []).map((st) => [st.name, st]));
  const cols = [];
  for (const cs of steps) (cols[cs.depth] = cols[cs.depth] || []).push(cs);
  const pos = new Map();
  let height = 0;
  cols.forEach((col, d) => {
    let y = PAD;
    for (const cs of col || []) {
      const hgt = nodeHeight(cs);
      pos.set(cs.name, { x: PAD + d * (NODE_W + COL_GAP), y, h: hgt });
      y += hgt + ROW_GAP;
    }
    height = Math.max(height, y);
  });
  const width = PAD * 2 + Math.max(1, cols.length) * (NODE_W + COL_GAP) - COL_GAP;
  const svg = s('svg', { width, height: Math.max(height, 60), viewBox: '0 0 ' + width + ' ' + Math.max(height, 60), role: 'img', 'aria-label': 'steps of the chain' },
    s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      s('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#94a3b8' }))));
  for (const cs of steps) {
    const to = pos.get(cs.name);
    (cs.inputs || []).forEach((inp, i) => {
      const from = pos.get(inp.step);
      if (!from) return;
      const x1 = from.x + NODE_W, y1 = from.y + 26, x2 = to.x, y2 = to.y + 22 + i * 8;
      const mx = (x1 + x2) / 2;
      svg.append(s('path', { class: 'edge', d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2 - 2} ${y2}`, 'marker-end': 'url(#arrow)' }));
      if (inp.type && inp.type !== 'input') svg.append(s('text', { class: 'edge-label', x: x2 - 8, y: y2 - 4, 'text-anchor': 'end' }, inp.type));
    });
  }
  for (const cs of steps) {
    const p = pos.get(cs.name);
    const st = byName.get(cs.name);
    const cls = owner ? stepState(st) : 'none';
    const g = s('g', { class: 'node state-' + cls + (st && st.passThrough ? ' passthrough' : ''), 'data-step': cs.name, 'data-state': cls, transform: `translate(${p.x},${p.y})` },
      s('title', {}, cs.name + (st && st.ready.message ? ': ' + st.ready.message : '')),
      s('rect', { class: 'box', width: NODE_W, height: p.h, rx: 8 }),
      s('text', { class: 'title', x: 12, y: 21 }, cut(cs.name, 26)));
    let tmpl = cs.templateKind ? cs.templateKind.replace(/^Cluster/, '') : '';
    if (st && st.template) tmpl += ' · ' + st.template.name;
    else if (cs.templateName) tmpl += ' · ' + cs.templateName;
    else if (st && st.passThrough) tmpl += ' · pass-through';
    else if (cs.options && cs.options.length) tmpl += ' · ' + cs.options.length + ' options';
    g.append(s('text', { class: 'tmpl', x: 12, y: 39 }, cut(tmpl, 31)));
    if (st) {
      const label = st.ready.status === 'True' ? 'Ready' : (st.ready.reason || st.ready.status);
      g.append(s('text', { class: 'reason', x: 12, y: 55 }, cut(label, 32)));
    }
    const used = optionUsed(cs, st);
    (cs.options || []).forEach((op, i) => {
      const y = 62 + i * (OPT_H + 4);
      g.append(s('g', { class: 'opt' + (i === used ? ' used' : '') },
        s('rect', { x: 10, y, width: NODE_W - 20, height: OPT_H, rx: 4 }),
        s('text', { x: 16, y: y + 14 }, cut((op.passThrough ? 'pass-through ' + op.passThrough : op.name) + '  [' + (op.selector || 'all') + ']', 33))));
    });
    g.addEventListener('click', () => {
      const card = document.getElementById('step-' + cs.name);
      if (card) card.scrollIntoView({ behavior: 'smooth', block: 'center' });
    });
    svg.append(g);
  }
  return svg;
}

setupFilters();
connect();

// A chain's four DORA numbers per namespace (docs/dora.md): GET api/dora
// (view.DORA, as `kontinue dora --chain`) when the page shows the chain,
// and again at most every 10 s while its owners change; the section is
// kept across updates.
const doras = new Map(); // chain key -> { el, body, sig, last, timer }

function doraSection(c) {
  const key = c.chainKind + '/' + c.name;
  let d = doras.get(key);
  if (!d) {
    const body = h('div', { class: 'dora-body' }, h('p', { class: 'muted' }, 'loading…'));
    const el = h('section', { class: 'dora', id: 'dora' }, h('h2', {}, 'DORA, last 30 days'), body);
    el.persistent = true;
    d = { el, body, sig: null, last: 0, timer: null };
    doras.set(key, d);
  }
  const sig = [c.owners, c.ownersReady, ...sortedOwners().filter((o) => o.chain && o.chain.kind === c.chainKind && o.chain.name === c.name)
    .map((o) => JSON.stringify((o.steps || []).map((st) => [st.name, st.provenance || null])))].join('\u0000');
  if (sig !== d.sig && !d.timer) {
    d.sig = sig;
    const wait = Math.max(200, d.last + 10000 - Date.now());
    d.timer = setTimeout(() => { d.timer = null; d.last = Date.now(); loadDora(c, d); }, wait);
  }
  return d.el;
}

async function loadDora(c, d) {
  const q = new URLSearchParams({ kind: c.chainKind, name: c.name });
  try {
    const res = await fetch('api/dora?' + q);
    const body = await res.json();
    if (!res.ok) { patch(d.body, [h('p', { class: 'muted' }, 'Failed: ' + (body.error || res.status))]); return; }
    patch(d.body, doraContent(body));
  } catch (err) {
    patch(d.body, [h('p', { class: 'muted' }, 'Failed: ' + err)]);
  }
}

function doraContent(out) {
  const rows = out.rows.map((r) => h('tr', { 'data-namespace': r.namespace },
    h('td', {}, r.namespace), h('td', { 'data-dora': 'owners' }, String(r.owners)),
    h('td', { 'data-dora': 'frequency' }, r.deploymentsPerDay.toFixed(2) + ' / day', h('span', { class: 'muted' }, ' (' + r.deployments + ')')),
    h('td', { 'data-dora': 'lead' }, r.leadTimes ? seconds(r.leadTimeMedianSeconds) : '-'),
    h('td', { 'data-dora': 'failure' }, Math.round(100 * r.changeFailureRate) + '%', h('span', { class: 'muted' }, ' (' + r.failed + ' failed)')),
    h('td', { 'data-dora': 'restore' }, r.restores ? seconds(r.timeToRestoreMedianSeconds) : '-')));
  const out2 = [];
  if (!rows.length) out2.push(h('p', { class: 'muted' }, 'No deployment recorded yet.'));
  else out2.push(h('table', { class: 'dora-table' }, h('tr', {}, ['namespace', 'owners', 'deployment frequency', 'lead time', 'change failure rate', 'time to restore'].map((t) => h('th', {}, t))), rows));
  out2.push(h('p', { class: 'note' }, 'Lead time and time to restore are medians. A deployment is a revision\'s outcome at the chain\'s deployment steps (docs/dora.md).'));
  for (const n of out.notes || []) out2.push(h('div', { class: 'message unknown' }, n));
  return out2;
}

