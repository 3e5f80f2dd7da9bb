/**
 * The dashboard's page, script and style: plain HTML, JavaScript and CSS kept as strings (no build
 * step, no framework, ~10 KB in all). The script opens `/dashboard/events` (server-sent events, one
 * JSON snapshot a second) and redraws; EventSource reconnects by itself when the node comes back.
 */

export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Floe</title>
<link rel="stylesheet" href="/dashboard/style.css">
</head>
<body>
<header>
  <h1>Floe</h1>
  <div id="summary">
    <span>leader <b id="leader" data-leader="">…</b></span>
    <span>this node <b id="self">…</b></span>
    <span>term <b id="term">…</b></span>
    <span>commit <b id="commit">…</b></span>
    <span>applied <b id="applied">…</b></span>
  </div>
  <span id="conn" class="bad">connecting</span>
</header>
<main>
  <section><h2>Members</h2>
    <table id="members"><thead><tr><th>id</th><th>role</th><th>term</th><th>commit</th><th>applied</th><th>match</th><th>HTTP</th></tr></thead><tbody></tbody></table>
  </section>
  <section><h2>Throughput and latency <small>(this node, last 5 minutes, 5 s steps)</small></h2>
    <div id="charts"></div>
  </section>
  <section><h2>Worker-ID leases</h2><div id="apps"><p class="muted">no pools yet</p></div></section>
  <section><h2>Sequences</h2><div id="sequences"><p class="muted">no sequences yet</p></div></section>
</main>
<footer>Updated live from <code>/dashboard/events</code>; the same data as JSON at <a href="/dashboard/data">/dashboard/data</a>; Prometheus at <a href="/metrics">/metrics</a>.</footer>
<script src="/dashboard/app.js"></script>
</body>
</html>
`;

export const STYLE_CSS = `
:root { --fg:#1d2330; --muted:#6b7385; --bg:#f6f7f9; --card:#fff; --line:#e3e6eb; --lead:#0b7a3e; --bad:#b42318; --accent:#2f5fd0; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; gap:24px; align-items:center; padding:12px 20px; background:var(--card); border-bottom:1px solid var(--line); position:sticky; top:0; }
h1 { font-size:20px; margin:0; letter-spacing:.5px; }
h2 { font-size:15px; margin:0 0 8px; }
h2 small, .muted { color:var(--muted); font-weight:normal; }
#summary { display:flex; gap:18px; flex-wrap:wrap; }
#leader { color:var(--lead); }
#conn { margin-left:auto; font-size:12px; padding:2px 8px; border-radius:10px; background:#e8f5ee; color:var(--lead); }
#conn.bad { background:#fdecea; color:var(--bad); }
main { padding:16px 20px; display:grid; gap:16px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 14px; overflow-x:auto; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:4px 10px 4px 0; border-bottom:1px solid var(--line); white-space:nowrap; }
th { color:var(--muted); font-weight:600; font-size:12px; }
tr.leader td:nth-child(2) { color:var(--lead); font-weight:600; }
tr.down td { color:var(--bad); }
.app { margin-bottom:12px; }
.bar { display:inline-block; width:120px; height:8px; background:var(--line); border-radius:4px; vertical-align:middle; margin:0 6px; }
.bar i { display:block; height:100%; background:var(--accent); border-radius:4px; }
#charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(280px, 1fr)); gap:12px; }
.chart { border:1px solid var(--line); border-radius:6px; padding:6px 8px; }
.chart b { font-size:13px; }
.chart svg { width:100%; height:70px; display:block; }
.chart .legend { font-size:12px; color:var(--muted); }
.bar-r { fill:#c9d6f5; }
.p50 { stroke:#8a95a8; fill:none; stroke-width:1; }
.p99 { stroke:#d97706; fill:none; stroke-width:1.5; }
footer { padding:8px 20px 20px; color:var(--muted); font-size:12px; }
a { color:var(--accent); }
`;

export const APP_JS = `'use strict';
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var esc = function (v) {
    return String(v).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  };
  var fmt = function (n) { return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'); };
  var ms = function (v) {
    if (v === null || v === undefined) return '—';
    return v >= 10000 ? (v / 1000).toFixed(0) + ' s' : v >= 1000 ? (v / 1000).toFixed(1) + ' s' : Math.round(v) + ' ms';
  };
  var time = function (t) { return t ? new Date(t).toISOString().replace('T', ' ').replace(/\\.\\d+Z$/, ' UTC') : '—'; };

  function members(s) {
    var rows = s.members.map(function (m) {
      var r = m.reported;
      var cls = (m.id === s.node.leader ? 'leader' : '') + (m.reachable ? '' : ' down');
      var role = m.reachable ? (r ? r.role : m.role) : 'unreachable';
      return '<tr class="' + cls + '" data-member="' + m.id + '"><td>' + m.id + (m.self ? ' (this node)' : '') +
        '</td><td>' + esc(role) + '</td><td>' + fmt(r && r.term) + '</td><td>' + fmt(r && r.commit) +
        '</td><td>' + fmt(r && r.applied) + '</td><td>' + fmt(m.match) + '</td><td>' +
        (m.httpAddr ? '<a href="' + location.protocol + '//' + esc(m.httpAddr) + '/">' + esc(m.httpAddr) + '</a>' : '—') + '</td></tr>';
    });
    $('members').tBodies[0].innerHTML = rows.join('');
  }

  var SLOTS = 60;
  var lat = function (v) { return v === null ? '—' : v >= 100 ? Math.round(v) + ' ms' : v >= 10 ? v.toFixed(1) + ' ms' : v.toFixed(2) + ' ms'; };
  function chart(title, pts) {
    var W = 300, H = 70, bw = W / SLOTS;
    pts = pts.slice(-SLOTS);
    if (pts.length === 0) return '';
    var off = SLOTS - pts.length;
    var maxRate = Math.max.apply(null, pts.map(function (p) { return p.rate; }).concat([1]));
    var maxLat = Math.max.apply(null, pts.map(function (p) { return p.p99 || 0; }).concat([0.01]));
    var y = function (v, max) { return (H - 1 - (v / max) * (H - 8)).toFixed(1); };
    var bars = '', d50 = '', d99 = '';
    pts.forEach(function (p, i) {
      var x = (off + i) * bw;
      if (p.rate > 0) bars += '<rect class="bar-r" x="' + (x + 0.5).toFixed(1) + '" y="' + y(p.rate, maxRate) + '" width="' + (bw - 1).toFixed(1) + '" height="' + (H - 1 - y(p.rate, maxRate)).toFixed(1) + '"/>';
      var cx = (x + bw / 2).toFixed(1);
      if (p.p99 !== null) d99 += (d99 ? ' L' : 'M') + cx + ' ' + y(p.p99, maxLat);
      if (p.p50 !== null) d50 += (d50 ? ' L' : 'M') + cx + ' ' + y(p.p50, maxLat);
    });
    // The last complete slot (the current one is still filling).
    var last = pts.length > 1 ? pts[pts.length - 2] : pts[0];
    return '<div class="chart"><b>' + esc(title) + '</b> <span class="legend">' + fmt(Math.round(last.rate)) + '/s, p99 ' + lat(last.p99) +
      ' · peak ' + fmt(Math.round(maxRate)) + '/s, p99 ' + lat(maxLat) + '</span>' +
      '<svg viewBox="0 0 ' + W + ' ' + H + '" preserveAspectRatio="none">' + bars + '<path class="p50" d="' + d50 + '"/><path class="p99" d="' + d99 +
      '"/></svg><span class="legend">bars: ops/s · orange: p99 · grey: p50' +
      (last.errors > 0 ? ' · errors ' + last.errors.toFixed(1) + '/s' : '') + '</span></div>';
  }

  function apps(s) {
    if (s.apps.length === 0) { $('apps').innerHTML = '<p class="muted">no pools yet</p>'; return; }
    var leader = s.node.role === 'leader';
    $('apps').innerHTML = s.apps.map(function (a) {
      var pct = a.size ? (100 * a.leased) / a.size : 0;
      var rows = a.leases.map(function (l) {
        return '<tr><td>' + l.workerId + '</td><td>' + esc(l.holder) + '</td><td>' + l.token + '</td><td>' +
          (l.timeLeftMs === null ? '<span class="muted">on the leader</span>' : ms(l.timeLeftMs)) + '</td><td>' +
          time(l.highWaterMs) + '</td><td>' + time(l.boundMs) + '</td><td>' + ms(l.ttlMs) + '</td></tr>';
      }).join('');
      return '<div class="app"><b>' + esc(a.app) + '</b> pool ' + fmt(a.size) + ' (' + a.bits + ' bits), ' + fmt(a.leased) +
        ' leased <span class="bar"><i style="width:' + pct.toFixed(1) + '%"></i></span>' +
        (a.leases.length ? '<table><thead><tr><th>worker ID</th><th>holder</th><th>token</th><th>time left' +
          (leader ? '' : ' <span class="muted">(known on the leader)</span>') +
          '</th><th>high-water</th><th>promised bound</th><th>TTL</th></tr></thead><tbody>' + rows + '</tbody></table>' : '') +
        (a.more > 0 ? '<p class="muted">… and ' + a.more + ' more</p>' : '') + '</div>';
    }).join('') + (s.appsMore > 0 ? '<p class="muted">… and ' + s.appsMore + ' more apps</p>' : '');
  }

  function sequences(s) {
    if (s.sequences.length === 0) { $('sequences').innerHTML = '<p class="muted">no sequences yet</p>'; return; }
    $('sequences').innerHTML = '<table><thead><tr><th>key</th><th>mode</th><th>high-water (next unallocated)</th><th>step</th><th>allocated/s</th></tr></thead><tbody>' +
      s.sequences.map(function (q) {
        return '<tr><td>' + esc(q.key) + '</td><td>' + esc(q.mode) + '</td><td>' + esc(q.next) + '</td><td>' + fmt(q.step) +
          '</td><td>' + (q.ratePerSec === null ? '—' : fmt(Math.round(q.ratePerSec))) + '</td></tr>';
      }).join('') + '</tbody></table>' +
      (s.sequencesTotal > s.sequences.length ? '<p class="muted">' + s.sequences.length + ' of ' + fmt(s.sequencesTotal) + ' shown</p>' : '');
  }

  function render(s) {
    var lead = s.node.leader;
    $('leader').textContent = lead ? 'node ' + lead : 'none (election)';
    $('leader').setAttribute('data-leader', String(lead));
    $('self').textContent = 'node ' + s.node.id + ' (' + s.node.role + ')';
    $('term').textContent = fmt(s.node.term);
    $('commit').textContent = fmt(s.node.commit);
    $('applied').textContent = fmt(s.node.applied);
    members(s);
    $('charts').innerHTML = chart('RESP commands', s.series.resp) + chart('HTTP requests', s.series.http) +
      chart('Raft commits (leader)', s.series.commit);
    apps(s);
    sequences(s);
  }

  var es = new EventSource('/dashboard/events');
  es.onmessage = function (e) {
    $('conn').textContent = 'live';
    $('conn').className = '';
    render(JSON.parse(e.data));
  };
  es.onerror = function () {
    $('conn').textContent = 'reconnecting…';
    $('conn').className = 'bad';
  };
})();
`;
