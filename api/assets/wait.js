// The waiting page: follows the visitor's status (Server-Sent Events, or polling where they
// are not available), shows the place and the estimate, and moves an admitted visitor on.
// The page passes its data in data- attributes of #sluice-wait (no inline script, so that the
// page's Content-Security-Policy can forbid them).
(function () {
  var data = document.getElementById('sluice-wait').dataset;
  var room = data.room, next = data.next, unknown = data.unknown;
  // The page that asks to join: join for the visitor (the form does it without JavaScript),
  // then show the line. Back here within a minute of joining means the browser kept no cookie:
  // joining again would only take another place, so say so instead.
  if (data.join) {
    var joined = 'sluice-joined-' + room, at = +sessionStorage.getItem(joined) || 0;
    if (Date.now() - at < 60000) {
      sessionStorage.removeItem(joined);
      document.getElementById('cookies').hidden = false;
      return;
    }
    fetch('/v1/rooms/' + room + '/join', { method: 'POST', credentials: 'same-origin' })
      .then(function (r) {
        if (r.ok) {
          sessionStorage.setItem(joined, Date.now());
          location.reload();
        }
      })
      .catch(function () {});
    return;
  }
  sessionStorage.removeItem('sluice-joined-' + room);
  var key = 'sluice-first-' + room, prog = document.getElementById('prog');
  function fmt(s) {
    return s < 60 ? s + ' s'
      : (s < 3600 ? Math.ceil(s / 60) + ' min'
        : Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) + ' min');
  }
  function go() {
    fetch('/v1/rooms/' + room + '/join', { method: 'POST', credentials: 'same-origin' })
      .then(function () { location.replace(next); }, function () { location.replace(next); });
  }
  function show(s) {
    if (s.state === 'admitted') { go(); return; }
    if (s.state !== 'waiting') { location.reload(); return; }
    var p = document.getElementById('pos');
    if (p) p.textContent = s.position == null ? '—' : s.position;
    document.getElementById('eta').textContent = s.eta_secs == null ? unknown : fmt(s.eta_secs);
    if (s.position != null) {
      var f = +sessionStorage.getItem(key) || 0;
      if (!f || s.position > f) { f = s.position; sessionStorage.setItem(key, f); }
      prog.max = f;
      prog.value = f - s.position + 1;
    }
  }
  var timer = null;
  function poll() {
    fetch('/v1/rooms/' + room + '/heartbeat', { method: 'POST', credentials: 'same-origin' })
      .then(function (r) { return r.json(); })
      .then(show)
      .catch(function () {});
    timer = setTimeout(poll, 5000);
  }
  if (window.EventSource) {
    var es = new EventSource('/v1/rooms/' + room + '/events');
    es.addEventListener('status', function (e) { show(JSON.parse(e.data)); });
    es.onerror = function () { es.close(); if (!timer) poll(); };
  } else {
    poll();
  }
  var cd = document.getElementById('cd');
  if (cd) {
    setInterval(function () {
      var left = +cd.dataset.at - Math.floor(Date.now() / 1000);
      if (left <= 0) location.reload(); else cd.textContent = fmt(left);
    }, 1000);
  }
})();
