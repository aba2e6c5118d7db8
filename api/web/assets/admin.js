// The operator dashboard's script: times in the operator's own time zone, date-time pickers
// that send the instant the operator picked, the rooms list's live figures, and a room's
// charts (uPlot) from the node's kept history, refreshed every ten seconds.
(function () {
  'use strict';

  // A refused save: the list of what to fix, at the top of the page, takes the focus (a
  // screen reader reads it; the keyboard goes on from it to the fields it links).
  var errors = document.getElementById('errors');
  if (errors) {
    errors.setAttribute('tabindex', '-1');
    errors.focus();
  }

  // Codes just made: the links whole (this dashboard's address), copy buttons, and a CSV
  // download with the columns of `sluice ctl codes create`.
  var made = document.getElementById('made-codes');
  if (made) {
    var links = document.getElementById('made-links');
    links.value = links.value.split('\n').map(function (l) { return location.origin + l; }).join('\n');
    made.querySelector('.js-only').hidden = false;
    made.querySelectorAll('button[data-copy]').forEach(function (b) {
      b.addEventListener('click', function () {
        var text = document.getElementById(b.dataset.copy).value, label = b.textContent;
        navigator.clipboard.writeText(text).then(function () {
          b.textContent = 'Copied';
          setTimeout(function () { b.textContent = label; }, 2000);
        });
      });
    });
    var csv = document.getElementById('made-csv');
    csv.addEventListener('click', function () {
      var d = csv.dataset, field = function (s) { return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; };
      var lines = document.getElementById('made-list').value.split('\n').map(function (c) {
        return [c, field(d.lane), d.uses, d.expires].join(',');
      });
      var blob = new Blob(['code,lane,uses,expires_at\n' + lines.join('\n') + '\n'], { type: 'text/csv' });
      var a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = 'codes-batch-' + d.batch + '.csv';
      document.body.appendChild(a);
      a.click();
      a.remove();
    });
  }

  // Instants shown in the operator's time zone.
  document.querySelectorAll('time[data-unix]').forEach(function (t) {
    var d = new Date(+t.dataset.unix * 1000);
    t.setAttribute('datetime', d.toISOString());
    t.textContent = d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
  });

  // Date-time pickers: the stored instant in local time on load; on submit the picked instant,
  // as unix seconds, in the hidden field beside each (the server reads that first).
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function localValue(d) {
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + 'T' +
      pad(d.getHours()) + ':' + pad(d.getMinutes());
  }
  var zone = '';
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) { zone = ''; }
  document.querySelectorAll('input.when').forEach(function (input) {
    if (input.dataset.unix) input.value = localValue(new Date(+input.dataset.unix * 1000));
    var label = document.querySelector('label[for="' + input.id + '"] .tz');
    if (label) label.textContent = '(' + (zone || 'your time zone') + ')';
    input.form.addEventListener('submit', function () {
      var hidden = input.form.elements[input.name + '.unix'];
      if (!hidden) return;
      var t = input.value ? new Date(input.value).getTime() : NaN;
      hidden.value = isNaN(t) ? '' : Math.floor(t / 1000);
    });
  });

  // A room's figure tiles: live, every five seconds, as the rooms list.
  var tiles = document.querySelector('dl.figures[data-room]');
  function wait(s) {
    if (s == null) return 'no estimate';
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.ceil(s / 60) + ' min';
    return Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) + ' min';
  }
  function put(id, text) { var el = document.getElementById(id); if (el) el.textContent = text; }
  if (tiles) {
    setInterval(function () {
      fetch('/admin/stats.json', { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          var r = s && s.rooms.filter(function (x) { return x.name === tiles.dataset.room; })[0];
          if (!r) return;
          put('t-waiting', r.waiting);
          put('t-inside', r.active + ' / ' + r.capacity);
          put('t-inside-note', r.active >= r.capacity ? 'full' : 'of capacity');
          put('t-admitted', r.admitted_last_minute);
          put('t-eta', wait(r.newest_eta_secs));
          put('t-totals', r.joined + ' / ' + r.admitted);
        })
        .catch(function () {});
    }, 5000);
  }

  // The rooms list: live figures every five seconds.
  var rooms = document.getElementById('rooms');
  if (rooms) {
    setInterval(function () {
      fetch('/admin/stats.json', { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          if (!s) return;
          s.rooms.forEach(function (r) {
            var w = document.getElementById('w-' + r.name);
            var a = document.getElementById('a-' + r.name);
            var n = document.getElementById('r-' + r.name);
            if (w) w.textContent = r.waiting;
            if (a) a.textContent = r.active + ' / ' + r.capacity;
            if (n) n.textContent = r.admitted_last_minute;
          });
          if (s.all) {
            put('all-waiting', s.all.waiting);
            put('all-active', s.all.active);
            put('all-rate', s.all.admitted_last_minute);
          }
        })
        .catch(function () {});
    }, 5000);
  }

  // A room's charts.
  var box = document.getElementById('chart-box');
  if (!box || !window.uPlot) return;
  var room = box.dataset.room, span = box.dataset.span;
  var health = ['ok', 'slow', 'down'];
  // Every chart shows the whole span up to now, on one shared time axis.
  var spanSecs = { '15m': 900, '1h': 3600, '1d': 86400 };
  function xRange() { var to = Date.now() / 1000; return [to - spanSecs[span], to]; }
  function num(unit) {
    return function (u, v) { return v == null ? '—' : v + (unit ? ' ' + unit : ''); };
  }
  var charts = [
    { title: 'Arrivals and admissions', unit: 'per minute', series: [
      { key: 'arrivals_per_min', label: 'Arrivals', stroke: '#0b57d0' },
      { key: 'admissions_per_min', label: 'Admissions', stroke: '#0a7d32' }] },
    { title: 'Waiting', unit: 'people', series: [
      { key: 'waiting', label: 'Waiting', stroke: '#7a4100' }] },
    { title: 'Inside, against capacity', unit: 'sessions', series: [
      { key: 'active', label: 'Inside', stroke: '#0b57d0' },
      { key: 'capacity', label: 'Capacity', stroke: '#b00020', dash: [6, 4] }] },
    { title: 'Wait shown to the newest waiter', unit: 'minutes', series: [
      { key: 'newest_eta_min', label: 'Estimate', stroke: '#5b2a86' }] },
    { title: 'Origin health', unit: '', health: true, series: [
      { key: 'health', label: 'Health', stroke: '#8c0015' }] }
  ];
  var plots = [];
  function width(el) { return Math.max(240, el.clientWidth); }
  function build(data) {
    box.textContent = '';
    // Every chart's place first, so that each is measured in the final layout.
    var holders = charts.map(function (c) {
      var fig = document.createElement('figure');
      var cap = document.createElement('figcaption');
      cap.textContent = c.title + (c.unit ? ' (' + c.unit + ')' : '');
      fig.appendChild(cap);
      var holder = document.createElement('div');
      holder.setAttribute('role', 'img');
      fig.appendChild(holder);
      box.appendChild(fig);
      return holder;
    });
    plots = charts.map(function (c, i) {
      var holder = holders[i];
      var series = [{}].concat(c.series.map(function (s) {
        return {
          label: s.label, stroke: s.stroke, width: 2, dash: s.dash, spanGaps: false,
          paths: c.health ? uPlot.paths.stepped({ align: 1 }) : undefined,
          value: c.health ? function (u, v) { return v == null ? '—' : health[v]; } : num(c.unit)
        };
      }));
      var y = c.health
        ? { label: 'health', size: 60, splits: function () { return [0, 1, 2]; },
            values: function (u, vals) { return vals.map(function (v) { return health[v] || ''; }); } }
        : { label: c.unit, size: 60 };
      var opts = {
        width: width(holder), height: 180, series: series,
        cursor: { sync: { key: 'room-' + room } },
        scales: { x: { time: true, range: xRange }, y: c.health ? { range: [0, 2] } : { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } },
        axes: [{ label: 'time (' + (zone || 'your time zone') + ')', size: 40 }, y],
        legend: { live: true }
      };
      return { chart: c, holder: holder, plot: new uPlot(opts, columns(c, data), holder) };
    });
  }
  function columns(c, data) {
    return [data.t].concat(c.series.map(function (s) { return data[s.key] || []; }));
  }
  function describe(p, data) {
    var n = data.t.length, parts = p.chart.series.map(function (s) {
      var v = n ? data[s.key][n - 1] : null;
      return s.label + ' now ' + (v == null ? 'unknown' : (p.chart.health ? health[v] : v + ' ' + p.chart.unit));
    });
    p.holder.setAttribute('aria-label', p.chart.title + ': ' + parts.join(', '));
  }
  function load() {
    fetch('/admin/rooms/' + encodeURIComponent(room) + '/history.json?span=' + span, { credentials: 'same-origin' })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        if (!plots.length) build(data);
        plots.forEach(function (p) { p.plot.setData(columns(p.chart, data)); describe(p, data); });
      })
      .catch(function () {});
  }
  document.querySelectorAll('nav.spans a').forEach(function (a) {
    a.addEventListener('click', function (e) {
      e.preventDefault();
      span = a.dataset.span;
      document.querySelectorAll('nav.spans a').forEach(function (b) { b.removeAttribute('aria-current'); });
      a.setAttribute('aria-current', 'true');
      history.replaceState(null, '', '?span=' + span + '#charts');
      load();
    });
  });
  window.addEventListener('resize', function () {
    plots.forEach(function (p) { p.plot.setSize({ width: width(p.holder), height: 180 }); });
  });
  load();
  setInterval(load, 10000);
})();
