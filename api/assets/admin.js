// The dashboard's live charts: every two seconds, each room's waiting, active and admitted-per-
// minute figures, the last two minutes of each drawn as a line.
(function () {
  var hist = {};
  function line(pts, max) {
    var w = 200, h = 40;
    if (pts.length < 2) return '';
    return pts.map(function (v, i) {
      return (i * w / (60 - 1)).toFixed(1) + ',' + (h - (v / max) * h).toFixed(1);
    }).join(' ');
  }
  function draw() {
    fetch('/admin/stats.json', { credentials: 'same-origin' })
      .then(function (r) { return r.json(); })
      .then(function (s) {
        s.rooms.forEach(function (r) {
          var h = hist[r.name] = hist[r.name] || { waiting: [], active: [], rate: [] };
          [['waiting', r.waiting], ['active', r.active], ['rate', r.admitted_last_minute]]
            .forEach(function (p) {
              h[p[0]].push(p[1]);
              if (h[p[0]].length > 60) h[p[0]].shift();
            });
          ['waiting', 'active', 'rate'].forEach(function (k) {
            var el = document.getElementById(k + '-' + r.name);
            if (!el) return;
            var max = Math.max.apply(null, h[k].concat([1]));
            el.querySelector('polyline').setAttribute('points', line(h[k], max));
            var t = document.getElementById(k + '-n-' + r.name);
            if (t) t.textContent = h[k][h[k].length - 1];
          });
        });
      })
      .catch(function () {});
  }
  draw();
  setInterval(draw, 2000);
})();
