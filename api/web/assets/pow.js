// The proof-of-work solver, run as a Web Worker by the waiting page. A challenge (ALTCHA's
// protocol version 2, PBKDF2/SHA-256) asks for the counter whose derived key begins with
// keyPrefix; this worker tries every step-th counter from `from` up to `to`, reports how many it
// tried, and posts the counter and the whole derived key when it finds it.
'use strict';
function hex(bytes) {
  var s = '';
  for (var i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
  return s;
}
function unhex(s) {
  var b = new Uint8Array(s.length / 2);
  for (var i = 0; i < b.length; i++) b[i] = parseInt(s.substr(2 * i, 2), 16);
  return b;
}
self.onmessage = async function (e) {
  var p = e.data.parameters, step = e.data.step, to = e.data.to;
  var nonce = unhex(p.nonce), salt = unhex(p.salt), prefix = p.keyPrefix;
  var password = new Uint8Array(nonce.length + 4);
  password.set(nonce);
  var view = new DataView(password.buffer);
  var tried = 0;
  for (var c = e.data.from; c < to; c += step) {
    view.setUint32(nonce.length, c, false);
    var key = await crypto.subtle.importKey('raw', password, 'PBKDF2', false, ['deriveBits']);
    var bits = new Uint8Array(await crypto.subtle.deriveBits(
      { name: 'PBKDF2', hash: 'SHA-256', salt: salt, iterations: p.cost }, key, p.keyLength * 8));
    tried++;
    var h = hex(bits);
    if (h.lastIndexOf(prefix, 0) === 0) {
      self.postMessage({ tried: tried, counter: c, derivedKey: h });
      return;
    }
    if (tried % 8 === 0) self.postMessage({ tried: tried });
  }
  self.postMessage({ tried: tried, done: true });
};
