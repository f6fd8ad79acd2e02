// Starts the explorer in a saved page (AttentionExplorer.to_html): the same widget.js, read
// from the page, with a small stand-in for the widget model. __ID__ is the page element's id;
// the page also holds __ID__-state (JSON traits), __ID__-data (the `_data` buffer in base64)
// and __ID__-module (widget.js). Nothing is fetched: the module is imported from a blob.
const id = "__ID__";
const text = (suffix) => document.getElementById(id + suffix).textContent;

function fromBase64(b64) {
  b64 = b64.trim();
  if (Uint8Array.fromBase64) return Uint8Array.fromBase64(b64);
  const binary = atob(b64), bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const state = JSON.parse(text("-state"));
state._data = new DataView(fromBase64(text("-data")).buffer);
const listeners = new Map();
const model = {
  get: (key) => state[key],
  set(key, value) {
    if (state[key] === value) return;
    state[key] = value;
    for (const callback of listeners.get(`change:${key}`) || []) callback();
  },
  on(event, callback) {
    listeners.set(event, [...(listeners.get(event) || []), callback]);
  },
  off(event, callback) {
    listeners.set(event, (listeners.get(event) || []).filter((c) => c !== callback));
  },
  save_changes() {},
  send() {},
};
const url = URL.createObjectURL(new Blob([text("-module")], { type: "text/javascript" }));
const widget = (await import(url)).default;
URL.revokeObjectURL(url);
const el = document.getElementById(id);
el.replaceChildren();
widget.render({ model, el });
