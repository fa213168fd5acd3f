// The console's shared script (daemon/web/mod.rs). `CSRF` is defined before it.
// A tab without the page secret (opened by hand, or after the sign-in tab was closed) shows the
// console but cannot change anything: its controls are hidden and the daemon would refuse them.
if (!CSRF) { document.body.classList.add('read-only'); document.getElementById('read-only').hidden = false; }
const content = document.getElementById('content');
const connection = document.getElementById('connection');
// Keys of the things a request is in flight for: their buttons stay disabled across refreshes.
const busy = new Set();

function ago(date) {
  const s = Math.max(0, Math.floor((Date.now() - date) / 1000));
  if (s < 10) return 'just now';
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}
function tick() {
  for (const t of document.querySelectorAll('time[datetime]')) {
    const d = new Date(t.getAttribute('datetime'));
    if (!isNaN(d)) t.textContent = ago(d);
  }
}
setInterval(tick, 15000);

// Replaces #content with the server's fresh rendering, keeping what the person was doing.
function swap(html) {
  const open = new Set([...content.querySelectorAll('details[open][id]')].map((d) => d.id));
  const values = {};
  for (const input of content.querySelectorAll('input[id], select[id], textarea[id]')) values[input.id] = input.value;
  const focused = document.activeElement && content.contains(document.activeElement) ? document.activeElement.id : '';
  document.dispatchEvent(new Event('aileron:swapping'));
  content.innerHTML = html;
  for (const id of open) { const d = document.getElementById(id); if (d) d.open = true; }
  for (const [id, value] of Object.entries(values)) { const input = document.getElementById(id); if (input && value) input.value = value; }
  if (focused) { const f = document.getElementById(focused); if (f) f.focus(); }
  for (const key of busy) for (const b of content.querySelectorAll('button')) if (b.dataset.busyKey === key) b.disabled = true;
  tick();
  document.dispatchEvent(new Event('aileron:swapped'));
}

let refreshing = false, again = false, timer = null;
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    const r = await fetch(location.href, { credentials: 'same-origin', headers: { 'x-aileron-fragment': '1' } });
    if (r.status === 200) swap(await r.text());
    else if (r.status === 401) showConnection('Signed out: this session ended. Run `aileron open` for a new page.');
  } catch (error) { /* the event stream reports a lost daemon */ }
  refreshing = false;
  if (again) { again = false; schedule(); }
}
// Coalesces bursts (a busy daemon appends thousands of records a second) into one fetch.
function schedule() { if (!timer) timer = setTimeout(() => { timer = null; refresh(); }, 300); }
function showConnection(text) { connection.hidden = false; connection.textContent = text; }

const events = new EventSource('/v1/events/watch');
events.addEventListener('open', () => { connection.hidden = true; });
events.addEventListener('error', () => showConnection(
  'Lost the connection to the daemon: this page no longer updates. If the daemon restarted, run `aileron open` for a new page.'));
events.addEventListener('changed', schedule);

function setPath(object, path, value) {
  const keys = path.split('.');
  let at = object;
  for (const key of keys.slice(0, -1)) at = at[key] = at[key] || {};
  at[keys[keys.length - 1]] = value;
}

// Control buttons (`Control` in mod.rs): one request to the JSON API, the outcome shown beside it.
document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-path]');
  if (!button || button.disabled || !CSRF) return;
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  const group = button.closest('.group') || button.parentElement;
  const out = group.querySelector('.status');
  const body = JSON.parse(button.dataset.body || '{}');
  const fields = [...group.querySelectorAll('[data-field]')];
  for (const input of fields) { const v = input.value.trim(); if (v) setPath(body, input.dataset.field, v); }
  if (button.dataset.origin) body[button.dataset.origin] = location.origin + location.pathname;
  const buttons = [...group.querySelectorAll('button')];
  for (const b of buttons) b.disabled = true;
  if (out) out.textContent = 'sending…';
  const method = button.dataset.method;
  let outcome, answer = null;
  try {
    const r = await fetch(button.dataset.path, {
      method, credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF },
      body: method === 'DELETE' ? undefined : JSON.stringify(body),
    });
    try { answer = await r.json(); } catch (e) { answer = null; }
    if (r.ok) {
      outcome = 'done';
      for (const input of fields) input.value = '';
      if (button.dataset.follow && answer && typeof answer[button.dataset.follow] === 'string') {
        if (out) out.textContent = 'opening the provider…';
        location.assign(answer[button.dataset.follow]);
        return;
      }
    } else {
      const message = answer && (answer.message || (answer.error && answer.error.message));
      const hint = answer && (answer.hint || (answer.error && answer.error.hint));
      outcome = 'failed: ' + (message || ('HTTP ' + r.status)) + (hint ? ' (hint: ' + hint + ')' : '');
    }
  } catch (error) {
    outcome = 'failed: the daemon did not answer';
  }
  if (out) out.textContent = outcome;
  for (const b of buttons) b.disabled = false;
  schedule();
});
