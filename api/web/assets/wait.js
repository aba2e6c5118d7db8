// The waiting page: follows the visitor's status (Server-Sent Events, or polling where they
// are not available), shows the place and the estimate, and moves an admitted visitor on.
// The page passes its data in data- attributes of #sluice-wait (no inline script, so that the
// page's Content-Security-Policy can forbid them).
(function () {
  var data = document.getElementById('sluice-wait').dataset;
  var room = data.room, next = data.next, unknown = data.unknown;
  // The tab's own storage; a browser that blocks cookies blocks it too (reading it throws), and
  // then a join would only take a place the browser cannot keep.
  var store = (function () {
    try {
      var s = window.sessionStorage;
      s.setItem('sluice-probe', '1');
      s.removeItem('sluice-probe');
      return s;
    } catch (e) {
      return null;
    }
  })();
  var cookiesOff = !navigator.cookieEnabled || !store;
  if (!store) store = { getItem: function () { return null; }, setItem: function () {}, removeItem: function () {} };
  // The page that asks to join: join for the visitor (the form does it without JavaScript),
  // then show the line. Back here within a minute of joining, without the room's cookie, means
  // the browser kept none: joining again would only take another place, so say so instead (a
  // browser that brought the cookie kept it: its place ended, handed on to another site, say).
  if (data.join) {
    if (cookiesOff) {
      document.getElementById('cookies').hidden = false;
      return;
    }
    var joined = 'sluice-joined-' + room, at = +store.getItem(joined) || 0;
    if (!data.kept && Date.now() - at < 60000) {
      store.removeItem(joined);
      document.getElementById('cookies').hidden = false;
      return;
    }
    // An invite-only room: the visitor types the code and presses the button.
    if (data.manual) return;
    // A code from the invitation link goes with the form (which redeems it).
    var code = document.getElementById('code');
    if (code && code.value && !data.pow) {
      store.setItem(joined, Date.now());
      document.getElementById('join').submit();
      return;
    }
    if (data.pow) {
      document.getElementById('join').addEventListener('submit', function (e) {
        if (!e.target.elements.altcha.value) { e.preventDefault(); solveThenJoin(joined); }
      });
      solveThenJoin(joined);
      return;
    }
    // Refused (the room is full, the network holds its places, …): the form joins again and
    // its answer is the page that says why, at once, in the page's language.
    fetch('/v1/rooms/' + room + '/join', { method: 'POST', credentials: 'same-origin' })
      .then(function (r) {
        store.setItem(joined, Date.now());
        if (r.ok) location.reload();
        else document.getElementById('join').submit();
      })
      .catch(function () {});
    return;
  }
  // The room asks a proof-of-work: fetch a challenge, solve it in Web Workers (one per core, at
  // most four) while a progress bar and a live text say how far they are, then join with the
  // solution. The join button, pressed again, solves a new one.
  function solveThenJoin(joined) {
    var box = document.getElementById('pow'), bar = document.getElementById('pow-bar');
    var pct = document.getElementById('pow-pct'), failed = document.getElementById('pow-failed');
    var form = document.getElementById('join');
    // While the browser works, the button is hidden (the work joins by itself); it comes back
    // if the work fails, to try again.
    function fail() { box.hidden = true; failed.hidden = false; form.hidden = false; }
    if (!window.Worker || !window.crypto || !crypto.subtle) { fail(); return; }
    box.hidden = false;
    failed.hidden = true;
    form.hidden = true;
    fetch('/v1/rooms/' + room + '/challenge', { credentials: 'same-origin' })
      .then(function (r) { if (!r.ok) throw r; return r.json(); })
      .then(function (c) {
        var began = Date.now();
        var p = c.parameters, n = Math.min(4, navigator.hardwareConcurrency || 2);
        // A prefix of d hex digits takes 16^d tries on average; the bar shows the chance of
        // having found it by now.
        var from = p.data.start, to = p.data.end, tried = [], workers = [], left = n;
        var mean = Math.pow(16, p.keyPrefix.length);
        for (var i = 0; i < n; i++) {
          (function (i) {
            var w = new Worker('/assets/pow.js');
            workers.push(w);
            tried[i] = 0;
            w.onmessage = function (e) {
              tried[i] = e.data.tried;
              var sum = tried.reduce(function (a, b) { return a + b; }, 0);
              bar.value = 1 - Math.exp(-sum / mean);
              pct.textContent = Math.floor(100 * bar.value) + ' %';
              if (e.data.derivedKey) {
                workers.forEach(function (x) { x.terminate(); });
                store.setItem('sluice-pow-ms-' + room, Date.now() - began);
                join(btoa(JSON.stringify({ challenge: c,
                  solution: { counter: e.data.counter, derivedKey: e.data.derivedKey } })));
              } else if (e.data.done && --left === 0) {
                fail();
              }
            };
            w.onerror = fail;
            w.postMessage({ parameters: p, from: from + i, step: n, to: to });
          })(i);
        }
      })
      .catch(fail);
    // The form carries the solution: the answer is the line, or a page that says what failed.
    function join(altcha) {
      form.elements.altcha.value = altcha;
      store.setItem(joined, Date.now());
      form.submit();
    }
  }
  store.removeItem('sluice-joined-' + room);
  var key = 'sluice-first-' + room, prog = document.getElementById('prog');
  var title = document.title;
  // A duration in the page's language's units, as the server writes it (i18n.rs `Units`).
  var units = (data.units || '{n} s|{n} min|{n} h|{n} d').split('|');
  function u(i, n) { return units[i].replace('{n}', n); }
  function fmt(s) {
    return s < 60 ? u(0, s)
      : (s < 3600 ? u(1, Math.ceil(s / 60))
        : (s < 86400 ? u(2, Math.floor(s / 3600)) + ' ' + u(1, Math.floor(s % 3600 / 60))
          : u(3, Math.floor(s / 86400)) + ' ' + u(2, Math.floor(s % 86400 / 3600))));
  }
  // The opening's date and time, and the next phase's of a sale, in the visitor's own zone and
  // language.
  if (window.Intl) {
    Array.prototype.forEach.call(document.querySelectorAll('time[data-unix]'), function (el) {
      try {
        el.textContent = new Intl.DateTimeFormat(data.lang, { dateStyle: 'full', timeStyle: 'short' })
          .format(new Date(+el.dataset.unix * 1000));
      } catch (e) { /* the UTC text stays */ }
    });
  }
  function range(s) {
    if (s.eta_secs == null) return unknown;
    var a = fmt(s.eta_secs), b = s.eta_max_secs == null ? a : fmt(s.eta_max_secs);
    return a === b ? a : a + ' – ' + b;
  }
  function go() {
    fetch('/v1/rooms/' + room + '/join', { method: 'POST', credentials: 'same-origin' })
      .then(function () { location.replace(next); }, function () { location.replace(next); });
  }
  // Admitted: say so, with a link on, then go on by itself.
  var turned = false;
  function turn() {
    if (turned) return;
    turned = true;
    var h = document.querySelector('h1');
    if (h && data.turn) h.textContent = data.turn;
    document.title = (data.turn || '') + ' ' + title;
    if (prog.max) prog.value = prog.max;
    // The waiting figures (place, estimate, people ahead) are over: they go.
    ['details', 'estimate'].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.hidden = true;
    });
    var stale = document.getElementById('stale');
    if (stale) stale.remove();
    var a = document.createElement('a'), p = document.createElement('p');
    a.href = next;
    a.className = 'button';
    a.textContent = data.cont || 'Continue';
    p.setAttribute('role', 'status');
    p.appendChild(a);
    prog.insertAdjacentElement('afterend', p);
    setTimeout(go, 1500);
  }
  // Everyone ahead, in the page's language's plural form.
  var plural = null;
  try { plural = new Intl.PluralRules(data.lang); } catch (e) { plural = null; }
  function ahead(n) {
    var el = document.getElementById('people-ahead');
    if (!el) return;
    var form = (plural && el.dataset[plural.select(n)]) || el.dataset.other;
    if (form) el.textContent = form.replace('{n}', n);
  }
  // One sentence for screen readers, said once per change of place or estimate.
  var said = '';
  function say(s) {
    var el = document.getElementById('say');
    if (!el) return;
    var parts = [];
    if (s.position != null) parts.push(data.place + data.colon + s.position);
    parts.push(data.wait + data.colon + range(s));
    var text = parts.join('. ') + '.';
    if (text !== said) { said = text; el.textContent = text; }
  }
  function show(s) {
    if (s.state === 'admitted') { turn(); return; }
    if (s.state !== 'waiting') { location.reload(); return; }
    var p = document.getElementById('pos'), w = document.getElementById('waiting');
    if (p) p.textContent = s.position == null ? '—' : s.position;
    if (w && s.waiting != null) w.textContent = s.waiting;
    var lanes = document.getElementById('ahead');
    if (lanes && s.ahead != null) lanes.textContent = s.ahead;
    if (s.position != null) ahead(s.position - 1 + (s.ahead || 0));
    if (s.next_check_secs) check = s.next_check_secs;
    document.getElementById('eta').textContent = range(s);
    heard();
    say(s);
    // The operator's notice, set or taken down while the visitor waits.
    var notice = document.getElementById('notice');
    if (notice) {
      notice.textContent = s.notice || '';
      notice.hidden = !s.notice;
    }
    // Why there is no estimate (paused, site down) holds only while there is none.
    var why = document.getElementById('why');
    if (why && s.eta_secs != null) why.hidden = true;
    if (s.position != null) {
      // The visitor's own progress since joining: empty at the place first seen, full only
      // when admitted (a lottery shows none: there is no progress to show).
      var f = +store.getItem(key) || 0;
      if (!f || s.position > f) { f = s.position; store.setItem(key, f); }
      prog.max = f;
      prog.value = f - s.position;
      // The tab says the place too, for a visitor on another tab.
      document.title = '(#' + s.position + ') ' + title;
    }
  }
  // How long to wait between polls: the room's advice, which keeps all its waiters' polling
  // within its budget.
  var check = +data.check || 5;
  // "Last updated" is when the page last heard from the node: a status, or the event stream's
  // keep-alive (the status it holds is still true). Heard nothing for three intervals (a poll's,
  // or the stream's 15 s), the page says so plainly.
  var lastHeard = Date.now();
  function heard() {
    lastHeard = Date.now();
    var up = document.getElementById('updated');
    if (up) up.textContent = new Date(lastHeard).toLocaleTimeString(data.lang);
    var stale = document.getElementById('stale');
    if (stale) stale.hidden = true;
  }
  setInterval(function () {
    var stale = document.getElementById('stale');
    if (stale) stale.hidden = Date.now() - lastHeard < 3 * Math.max(check, 15) * 1000;
  }, 1000);
  var timer = null;
  function poll() {
    fetch('/v1/rooms/' + room + '/heartbeat', { method: 'POST', credentials: 'same-origin' })
      .then(function (r) { return r.json(); })
      .then(show)
      .catch(function () {});
    timer = setTimeout(poll, check * 1000);
  }
  if (window.EventSource) {
    var es = new EventSource('/v1/rooms/' + room + '/events');
    es.addEventListener('status', function (e) { show(JSON.parse(e.data)); });
    es.addEventListener('alive', heard);
    es.onerror = function () { es.close(); if (!timer) poll(); };
  } else {
    poll();
  }
  // The countdown runs from the seconds the node said were left, not from this device's
  // clock (one that runs fast would reload the page every second until the opening). A page
  // served at the opening, before the node has applied it, reloads after the poll interval.
  var cd = document.getElementById('cd');
  if (cd) {
    var left0 = +cd.dataset.left;
    var start = Date.now();
    setInterval(function () {
      var left = left0 - Math.floor((Date.now() - start) / 1000);
      if (left > 0) cd.textContent = fmt(left);
      else if (left0 > 0 || -left >= check) location.reload();
    }, 1000);
  }
})();
