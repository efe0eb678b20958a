/* scalestack report.html: the interactive timeline. Self-contained (no library, nothing fetched).
 * Data: the JSON in #sst-tl-data; its typed arrays gzip-compressed and base64-encoded in `blob`.
 * Drawing: per frame and lane, the time each state covers in each pixel column is summed and the
 * column gets the state that covered most of it (level of detail: 10^6 intervals stay fluid).
 * window.scalestackTimeline is the page's handle for tests and benchmarks. */
(function () {
  "use strict";
  var root = document.getElementById("sst-tl");
  var dataEl = document.getElementById("sst-tl-data");
  if (!root || !dataEl) return;
  var D = JSON.parse(dataEl.textContent);
  var LABEL_W = 190, AXIS_H = 22, CRIT_H = 16, TOP = AXIS_H + CRIT_H + 6, LANE_H = 14, LANE_GAP = 2,
    GROUP_H = 17, MAX_VIEW_H = 620, MIN_SPAN = 100;
  var canvas = root.querySelector(".sst-canvas"), scroller = root.querySelector(".sst-scroll"),
    spacer = root.querySelector(".sst-spacer"), tip = root.querySelector(".sst-tip"),
    sel = root.querySelector(".sst-sel"), rangeEl = root.querySelector(".sst-range"),
    resetBtn = root.querySelector(".sst-reset");
  var ctx = canvas.getContext("2d");
  var TYPES = { u1: Uint8Array, i2: Int16Array, u4: Uint32Array, i4: Int32Array, f8: Float64Array };
  var nL = D.lanes.length, N = D.intervals, nS = D.states.length;
  var A = null, start = null, end = null, cstart = null, cend = null;
  var rows = [], laneY = new Float64Array(nL), contentH = 0, tidLane = {};
  var S = { v0: 0, v1: Math.max(D.span, 1), dpr: 1, plotW: 1, img: null, px: null, cov: null, col: null,
    hover: null, arrow: null, phase: null, window: null, pending: false, drawnLanes: 0, painted: 0 };
  var api = { frames: [], firstPaintMs: null, lastFrameMs: null, error: null };
  window.scalestackTimeline = api;

  function rgba32(hex) {
    var v = parseInt(hex.slice(1), 16);
    return ((255 << 24) | ((v & 255) << 16) | (((v >> 8) & 255) << 8) | ((v >> 16) & 255)) >>> 0;
  }
  var STATE32 = D.states.map(function (s) { return rgba32(s.colour); });
  var BG32 = rgba32("#ffffff");

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function fmt(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e11 ? 1 : 3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 1 : 3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 1 : 3) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtTick(t, step) {
    var unit = step >= 1e8 ? 1e9 : step >= 1e5 ? 1e6 : step >= 100 ? 1e3 : 1;
    var name = unit === 1e9 ? " s" : unit === 1e6 ? " ms" : unit === 1e3 ? " µs" : " ns";
    var dec = Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9));
    return (t / unit).toFixed(Math.min(dec, 9)) + name;
  }
  function niceStep(raw) {
    var mag = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-3))));
    var m = [1, 2, 5, 10];
    for (var i = 0; i < m.length; i++) if (m[i] * mag >= raw) return m[i] * mag;
    return 10 * mag;
  }

  function b64(s) {
    var bin = atob(s), n = bin.length, out = new Uint8Array(n);
    for (var i = 0; i < n; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function gunzip(bytes) {
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer();
  }

  function build(buf) {
    A = {};
    Object.keys(D.layout).forEach(function (k) {
      var L = D.layout[k];
      A[k] = new TYPES[L[2]](buf, L[0], L[1]);
    });
    start = new Float64Array(N); end = new Float64Array(N);
    var gi = 0, gRow = A.gap_row, gStart = A.gap_start, off = A.lane_off, dur = A.dur;
    for (var l = 0; l < nL; l++) {
      var t = A.lane_start[l];
      for (var i = off[l]; i < off[l + 1]; i++) {
        if (gi < gRow.length && gRow[gi] === i) { t = gStart[gi]; gi++; }
        start[i] = t; t += dur[i]; end[i] = t;
      }
    }
    var M = A.crit_dur.length, c = D.critStart;
    cstart = new Float64Array(M); cend = new Float64Array(M);
    for (var j = 0; j < M; j++) { cstart[j] = c; c += A.crit_dur[j]; cend[j] = c; }
    var y = 0, lastG = null;
    for (var k = 0; k < nL; k++) {
      var ln = D.lanes[k];
      tidLane[ln.tid] = k;
      if (ln.group !== lastG) {
        var cnt = 0;
        for (var q = k; q < nL && D.lanes[q].group === ln.group; q++) cnt++;
        rows.push({ group: ln.group + "  (" + cnt + " thread" + (cnt === 1 ? "" : "s") + ")", y: y });
        y += GROUP_H; lastG = ln.group;
      }
      rows.push({ lane: k, y: y });
      laneY[k] = y; y += LANE_H + LANE_GAP;
    }
    contentH = y;
  }

  function resize() {
    var dpr = window.devicePixelRatio || 1;
    var cssW = Math.max(scroller.clientWidth, LABEL_W + 100);
    var viewH = Math.min(TOP + contentH, MAX_VIEW_H);
    scroller.style.height = viewH + "px";
    canvas.style.height = viewH + "px";
    spacer.style.height = Math.max(0, TOP + contentH - viewH) + "px";
    canvas.width = Math.round(cssW * dpr); canvas.height = Math.round(viewH * dpr);
    S.dpr = dpr; S.cssW = cssW; S.viewH = viewH;
    S.plotX = Math.round(LABEL_W * dpr);
    S.plotW = Math.max(1, canvas.width - S.plotX);
    S.img = null;
    S.cov = new Float32Array(nS * S.plotW);
    S.col = new Uint32Array(S.plotW);
  }

  function lowerEnd(a, b, arr, t) { // first index in [a, b) with arr[i] > t
    while (a < b) { var m = (a + b) >> 1; if (arr[m] <= t) a = m + 1; else b = m; }
    return a;
  }

  function drawLanes(top, lanesH, sc) {
    var plotW = S.plotW, dpr = S.dpr, v0 = S.v0, v1 = S.v1, nsPerPx = (v1 - v0) / plotW;
    if (!S.img || S.img.width !== plotW || S.img.height !== lanesH) {
      S.img = ctx.createImageData(plotW, lanesH);
      S.px = new Uint32Array(S.img.data.buffer);
    }
    var px = S.px, cov = S.cov, col = S.col, off = A.lane_off, state = A.state;
    px.fill(BG32);
    var drawn = 0, painted = 0;
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r];
      if (row.lane === undefined) continue;
      var y0 = Math.round((row.y - sc) * dpr), y1 = Math.round((row.y - sc + LANE_H) * dpr);
      if (y1 <= 0 || y0 >= lanesH) continue;
      if (y0 < 0) y0 = 0;
      if (y1 > lanesH) y1 = lanesH;
      var l = row.lane;
      drawn++;
      cov.fill(0);
      var b = off[l + 1];
      for (var i = lowerEnd(off[l], b, end, v0); i < b && start[i] < v1; i++) {
        var x0 = (start[i] - v0) / nsPerPx, x1 = (end[i] - v0) / nsPerPx;
        if (x0 < 0) x0 = 0;
        if (x1 > plotW) x1 = plotW;
        if (x1 <= x0) continue;
        var s = state[i] * plotW, c0 = x0 | 0, c1 = x1 | 0;
        if (c0 === c1) { cov[s + c0] += x1 - x0; continue; }
        cov[s + c0] += c0 + 1 - x0;
        for (var c = c0 + 1; c < c1; c++) cov[s + c] += 1;
        if (c1 < plotW) cov[s + c1] += x1 - c1;
      }
      for (var cc = 0; cc < plotW; cc++) {
        var best = -1, bv = 0, tot = 0;
        for (var k = 0; k < nS; k++) {
          var w = cov[k * plotW + cc];
          tot += w;
          if (w > bv) { bv = w; best = k; }
        }
        if (tot < 0.25) col[cc] = BG32; else { col[cc] = STATE32[best]; painted++; }
      }
      for (var yy = y0; yy < y1; yy++) px.set(col, yy * plotW);
    }
    ctx.putImageData(S.img, S.plotX, top);
    S.drawnLanes = drawn; S.painted = painted;
  }

  function drawCrit(y, h) {
    var plotW = S.plotW, v0 = S.v0, v1 = S.v1, nsPerPx = (v1 - v0) / plotW, x0p = S.plotX;
    var M = cstart.length, r = A.crit_r, lone = A.crit_lane;
    var i = lowerEnd(0, M, cend, v0);
    var colLane = new Int32Array(plotW).fill(-2), colH = new Float32Array(plotW);
    var acc = new Map(), shared = 0, sharedW = 0, idle = 0, cur = -1;
    function flush(c) {
      if (c < 0 || c >= plotW) return;
      var bl = -1, bt = 0;
      acc.forEach(function (t, ln) { if (t > bt) { bt = t; bl = ln; } });
      if (bt >= shared && bt >= idle && bt > 0) { colLane[c] = bl; colH[c] = 1; }
      else if (shared >= idle && shared > 0) { colLane[c] = -1; colH[c] = sharedW / shared; }
      acc.clear(); shared = 0; sharedW = 0; idle = 0;
    }
    function add(ln, rr, t) {
      if (rr === 0) idle += t;
      else if (rr === 1) acc.set(ln, (acc.get(ln) || 0) + t);
      else { shared += t; sharedW += t / rr; }
    }
    for (; i < M && cstart[i] < v1; i++) {
      var a = (cstart[i] - v0) / nsPerPx, b = (cend[i] - v0) / nsPerPx;
      if (a < 0) a = 0;
      if (b > plotW) b = plotW;
      if (b <= a) continue;
      var c0 = a | 0, c1 = b | 0;
      if (c0 !== cur) { flush(cur); cur = c0; }
      if (c0 === c1) { add(lone[i], r[i], b - a); continue; }
      add(lone[i], r[i], c0 + 1 - a);
      flush(c0);
      for (var c = c0 + 1; c < c1; c++) { add(lone[i], r[i], 1); flush(c); }
      cur = c1;
      if (c1 < plotW) add(lone[i], r[i], b - c1);
    }
    flush(cur);
    ctx.fillStyle = "#f4f4f4";
    ctx.fillRect(x0p, y, plotW, h);
    for (var c2 = 0; c2 < plotW;) {
      var ln = colLane[c2], hh = colH[c2], e = c2 + 1;
      while (e < plotW && colLane[e] === ln && Math.abs(colH[e] - hh) < 0.02) e++;
      if (ln >= 0) { ctx.fillStyle = D.lanes[ln].colour; ctx.fillRect(x0p + c2, y, e - c2, h); }
      else if (ln === -1) { ctx.fillStyle = "#9a9a9a"; var hp = Math.max(1, h * hh); ctx.fillRect(x0p + c2, y + h - hp, e - c2, hp); }
      c2 = e;
    }
  }

  function xOf(t) { return S.plotX + (t - S.v0) / (S.v1 - S.v0) * S.plotW; }

  function draw() {
    var t0 = performance.now();
    var dpr = S.dpr, W = canvas.width, H = canvas.height, top = Math.round(TOP * dpr);
    var sc = scroller.scrollTop;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, W, H);
    if (H - top > 0) drawLanes(top, H - top, sc);
    ctx.save();
    ctx.beginPath(); ctx.rect(0, top, W, H - top); ctx.clip();
    ctx.font = Math.round(11 * dpr) + "px system-ui,sans-serif";
    ctx.textBaseline = "middle";
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r], y = top + (row.y - sc) * dpr;
      if (y > H || y + GROUP_H * dpr < top) continue;
      if (row.group !== undefined) {
        ctx.fillStyle = "#eef0f3"; ctx.fillRect(0, y, W, GROUP_H * dpr);
        ctx.fillStyle = "#333"; ctx.font = "bold " + Math.round(11 * dpr) + "px system-ui,sans-serif";
        ctx.fillText(row.group, 4 * dpr, y + GROUP_H * dpr / 2);
        ctx.font = Math.round(11 * dpr) + "px system-ui,sans-serif";
      } else {
        var ln = D.lanes[row.lane];
        ctx.fillStyle = ln.colour; ctx.fillRect(4 * dpr, y + 2 * dpr, 8 * dpr, (LANE_H - 4) * dpr);
        ctx.fillStyle = S.arrow && S.arrow.from === row.lane ? "#c00" : "#222";
        var label = ln.name + " (" + ln.tid + ")";
        if (label.length > 28) label = label.slice(0, 27) + "…";
        ctx.fillText(label, 16 * dpr, y + LANE_H * dpr / 2);
      }
    }
    // the selected phase: its intervals outlined on their lanes
    if (S.phase !== null) {
      ctx.strokeStyle = "#000"; ctx.lineWidth = Math.max(1, dpr);
      ctx.fillStyle = "rgba(255,255,255,0.0)";
      D.marks.forEach(function (m) {
        if (m.kind !== "phase" || m.label !== S.phase || m.lane === undefined || m.lane < 0) return;
        if (m.t1 < S.v0 || m.t0 > S.v1) return;
        var yy = top + (laneY[m.lane] - sc) * dpr, xa = Math.max(S.plotX, xOf(m.t0)), xb = Math.min(W, xOf(m.t1));
        ctx.strokeRect(xa + 0.5, yy + 0.5, Math.max(1, xb - xa - 1), LANE_H * dpr - 1);
      });
    }
    if (S.window) {
      ctx.strokeStyle = "#1d6996"; ctx.lineWidth = 2 * dpr;
      [S.window.t0, S.window.t1].forEach(function (t) {
        var x = xOf(t);
        if (x >= S.plotX && x <= W) { ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, H); ctx.stroke(); }
      });
    }
    if (S.hover !== null && S.hover.lane !== undefined) {
      var hy = top + (laneY[S.hover.lane] - sc) * dpr;
      ctx.strokeStyle = "#333"; ctx.lineWidth = dpr;
      ctx.strokeRect(S.plotX + 0.5, hy - 0.5, S.plotW - 1, LANE_H * dpr + 1);
    }
    if (S.arrow) { // from the waker's lane to the woken thread's, at the wake-up
      var ax = xOf(S.arrow.t), ya = top + (laneY[S.arrow.from] - sc + LANE_H / 2) * dpr,
        yb = top + (laneY[S.arrow.to] - sc + LANE_H / 2) * dpr;
      if (ax >= S.plotX && ax <= W) {
        ctx.strokeStyle = "#d00"; ctx.fillStyle = "#d00"; ctx.lineWidth = 2 * dpr;
        ctx.beginPath(); ctx.moveTo(ax, ya); ctx.lineTo(ax, yb); ctx.stroke();
        var d = yb > ya ? -1 : 1;
        ctx.beginPath(); ctx.moveTo(ax, yb); ctx.lineTo(ax - 5 * dpr, yb + d * 8 * dpr);
        ctx.lineTo(ax + 5 * dpr, yb + d * 8 * dpr); ctx.closePath(); ctx.fill();
        ctx.beginPath(); ctx.arc(ax, ya, 3.5 * dpr, 0, 2 * Math.PI); ctx.fill();
      }
    }
    ctx.restore();
    // axis and criticality strip
    ctx.fillStyle = "#fafafa"; ctx.fillRect(0, 0, W, top);
    ctx.strokeStyle = "#ccc"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(0, top - 0.5); ctx.lineTo(W, top - 0.5); ctx.stroke();
    drawCrit(Math.round(AXIS_H * dpr), Math.round(CRIT_H * dpr));
    ctx.font = Math.round(11 * dpr) + "px system-ui,sans-serif";
    ctx.textBaseline = "middle"; ctx.fillStyle = "#333";
    ctx.fillText("time since start", 4 * dpr, AXIS_H * dpr / 2);
    ctx.fillText("critical thread", 4 * dpr, (AXIS_H + CRIT_H / 2) * dpr);
    var step = niceStep((S.v1 - S.v0) / Math.max(1, S.plotW / dpr / 110));
    ctx.textAlign = "center"; ctx.strokeStyle = "#999";
    for (var t = Math.ceil(S.v0 / step) * step; t <= S.v1; t += step) {
      var x = xOf(t);
      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS_H * dpr - 5 * dpr); ctx.lineTo(x + 0.5, AXIS_H * dpr); ctx.stroke();
      if (x > S.plotX + 30 * dpr && x < W - 30 * dpr) ctx.fillText(fmtTick(t, step), x, AXIS_H * dpr / 2 - 1);
    }
    ctx.textAlign = "left";
    rangeEl.textContent = "view " + fmt(S.v0) + " – " + fmt(S.v1) + " (" + fmt(S.v1 - S.v0) + " of " + fmt(D.span) + ")";
    var ms = performance.now() - t0;
    api.lastFrameMs = ms;
    api.frames.push(ms);
    if (api.frames.length > 200) api.frames.shift();
    return ms;
  }

  function request() {
    if (S.pending) return;
    S.pending = true;
    requestAnimationFrame(function () { S.pending = false; draw(); });
  }

  function setRange(a, b) {
    var span = Math.max(D.span, 1), w = Math.min(Math.max(b - a, MIN_SPAN), span);
    a = Math.min(Math.max(a, 0), span - w);
    S.v0 = a; S.v1 = a + w;
  }

  function zoomAt(factor, frac) {
    var t = S.v0 + frac * (S.v1 - S.v0), w = (S.v1 - S.v0) * factor;
    w = Math.min(Math.max(w, MIN_SPAN), Math.max(D.span, 1));
    setRange(t - frac * w, t - frac * w + w);
  }

  function laneAt(cssY) { // the lane row under a y inside the canvas, or null
    if (cssY < TOP) return null;
    var y = cssY - TOP + scroller.scrollTop;
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r];
      if (row.lane !== undefined && y >= row.y && y < row.y + LANE_H + LANE_GAP) return row.lane;
    }
    return null;
  }

  function intervalAt(l, t) {
    var a = A.lane_off[l], b = A.lane_off[l + 1], i = lowerEnd(a, b, end, t);
    return i < b && start[i] <= t ? i : -1;
  }

  function describe(l, i) {
    var ln = D.lanes[l], st = D.states[A.state[i]].name.replace("_", " ");
    var h = "<b>" + esc(ln.name) + " (" + ln.tid + ")</b> " + esc(ln.group) + "<br>" + esc(st) + " from " +
      fmt(start[i]) + " for " + fmt(end[i] - start[i]);
    if (A.cpu[i] >= 0) h += "<br>CPU " + A.cpu[i] + (A.state[i] === 1 ? " (queued for it)" : "");
    if (A.obj[i] > 0) h += "<br>wait object " + esc(D.addrs[A.obj[i]]);
    var w = A.waker[i];
    if (w >= 0) {
      var wl = tidLane[w];
      h += "<br>woken by " + (wl !== undefined ? esc(D.lanes[wl].name) + " (" + w + "): click to jump" : "tid " + w + " (not traced)");
    }
    return h;
  }

  function critAt(t) {
    var i = lowerEnd(0, cstart.length, cend, t);
    if (i >= cstart.length || cstart[i] > t) return "no data";
    var r = A.crit_r[i];
    if (r === 0) return "no thread running: idle";
    if (r === 1) {
      var ln = D.lanes[A.crit_lane[i]];
      return "<b>" + esc(ln.name) + " (" + ln.tid + ")</b> ran alone: critical for " + fmt(cend[i] - cstart[i]);
    }
    return r + (r === 255 ? "+" : "") + " threads running: each counts 1/" + r + " of this time";
  }

  function jumpToWaker(l, i) {
    var w = A.waker[i], wl = tidLane[w];
    if (w < 0 || wl === undefined) return -1;
    var t = end[i], span = S.v1 - S.v0;
    if (t < S.v0 || t > S.v1) setRange(t - span / 2, t + span / 2);
    S.arrow = { from: wl, to: l, t: t };
    var y = laneY[wl], view = S.viewH - TOP;
    if (y < scroller.scrollTop || y + LANE_H > scroller.scrollTop + view) scroller.scrollTop = Math.max(0, y - view / 2);
    draw();
    return wl;
  }

  function hideTip() { tip.hidden = true; }
  function showTip(html, cx, cy) {
    tip.innerHTML = html; tip.hidden = false;
    var rb = root.getBoundingClientRect(), x = cx - rb.left + 14, y = cy - rb.top + 14;
    if (x + tip.offsetWidth > rb.width) x = Math.max(0, cx - rb.left - tip.offsetWidth - 10);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }

  function pointer(e) {
    var rc = canvas.getBoundingClientRect();
    var x = e.clientX - rc.left, y = e.clientY - rc.top;
    var frac = (x * S.dpr - S.plotX) / S.plotW;
    return { x: x, y: y, frac: frac, t: S.v0 + frac * (S.v1 - S.v0), inPlot: frac >= 0 && frac <= 1 };
  }

  function install() {
    canvas.addEventListener("wheel", function (e) {
      var p = pointer(e);
      e.preventDefault();
      if (e.shiftKey) { scroller.scrollTop += e.deltaY || e.deltaX; return; } // the lanes, up and down
      if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        var dt = e.deltaX * (S.v1 - S.v0) / (S.plotW / S.dpr);
        setRange(S.v0 + dt, S.v1 + dt);
      } else {
        zoomAt(Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015)), Math.min(Math.max(p.frac, 0), 1));
      }
      request();
    }, { passive: false });
    var drag = null;
    canvas.addEventListener("mousedown", function (e) {
      drag = { x: e.clientX, y: e.clientY, v0: S.v0, v1: S.v1, top: scroller.scrollTop, moved: false };
      canvas.style.cursor = "grabbing";
    });
    window.addEventListener("mousemove", function (e) {
      if (drag) {
        var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
        var dt = -dx * (drag.v1 - drag.v0) / (S.plotW / S.dpr);
        setRange(drag.v0 + dt, drag.v1 + dt);
        scroller.scrollTop = drag.top - dy;
        hideTip(); request();
        return;
      }
      if (e.target !== canvas) return;
      var p = pointer(e);
      if (!p.inPlot) { hideTip(); if (S.hover) { S.hover = null; request(); } return; }
      if (p.y >= AXIS_H && p.y < AXIS_H + CRIT_H) { showTip(critAt(p.t), e.clientX, e.clientY); return; }
      var l = laneAt(p.y);
      if (l === null) { hideTip(); return; }
      var i = intervalAt(l, p.t);
      if (i < 0) { hideTip(); return; }
      showTip(describe(l, i), e.clientX, e.clientY);
      if (!S.hover || S.hover.lane !== l) { S.hover = { lane: l }; request(); }
    });
    window.addEventListener("mouseup", function (e) {
      if (!drag) return;
      var d = drag;
      drag = null; canvas.style.cursor = "grab";
      if (d.moved || e.target !== canvas) return;
      var p = pointer(e), l = p.inPlot ? laneAt(p.y) : null;
      if (l === null) { if (S.arrow) { S.arrow = null; request(); } return; }
      var i = intervalAt(l, p.t);
      if (i >= 0 && A.waker[i] >= 0) jumpToWaker(l, i);
      else if (S.arrow) { S.arrow = null; request(); }
    });
    canvas.addEventListener("mouseleave", function () { hideTip(); if (S.hover) { S.hover = null; request(); } });
    canvas.addEventListener("dblclick", function () { api.reset(); });
    scroller.addEventListener("scroll", request);
    window.addEventListener("resize", function () { resize(); request(); });
    resetBtn.addEventListener("click", function () { api.reset(); });
    // windows and phases
    var wins = D.marks.filter(function (m) { return m.kind === "window"; });
    var phases = {};
    D.marks.forEach(function (m) {
      if (m.kind !== "phase") return;
      var p = phases[m.label] || (phases[m.label] = { t0: m.t0, t1: m.t1, n: 0 });
      p.t0 = Math.min(p.t0, m.t0); p.t1 = Math.max(p.t1, m.t1); p.n++;
    });
    function group(label, items) {
      if (!items.length) return;
      var og = document.createElement("optgroup");
      og.label = label;
      items.forEach(function (it) {
        var o = document.createElement("option");
        o.value = it.value; o.textContent = it.text;
        og.appendChild(o);
      });
      sel.appendChild(og);
    }
    group("windows", wins.map(function (m, k) {
      return { value: "w" + k, text: m.label + ": " + fmt(m.t0) + " – " + fmt(m.t1) };
    }));
    group("phases (intervals outlined)", Object.keys(phases).sort(function (a, b) {
      return parseInt(a.replace(/\D/g, ""), 10) - parseInt(b.replace(/\D/g, ""), 10);
    }).map(function (k) {
      return { value: "p" + k, text: k + " (" + phases[k].n + " intervals)" };
    }));
    sel.addEventListener("change", function () { api.select(sel.value); });
    api.select = function (v) {
      S.window = null; S.phase = null;
      if (!v) { setRange(0, D.span); }
      else if (v[0] === "w") { var m = wins[parseInt(v.slice(1), 10)]; S.window = m; setRange(m.t0, m.t1); }
      else if (v[0] === "p") { var ph = phases[v.slice(1)]; S.phase = v.slice(1); setRange(ph.t0, ph.t1); }
      if (sel.value !== v) sel.value = v;
      return draw();
    };
  }

  api.lanes = function () { return nL; };
  api.intervals = function () { return N; };
  api.drawnLanes = function () { return S.drawnLanes; };
  api.paintedColumns = function () { return S.painted; };
  api.visibleRange = function () { return [S.v0, S.v1]; };
  api.setRange = function (a, b) { setRange(a, b); return draw(); };
  api.zoom = function (factor, frac) { zoomAt(factor, frac === undefined ? 0.5 : frac); return draw(); };
  api.reset = function () { S.arrow = null; S.window = null; S.phase = null; sel.value = ""; setRange(0, D.span); return draw(); };
  api.intervalAt = function (l, t) {
    var i = intervalAt(l, t);
    return i < 0 ? null : { start: start[i], end: end[i], state: D.states[A.state[i]].name, cpu: A.cpu[i],
      object: D.addrs[A.obj[i]], waker: A.waker[i] };
  };
  api.jumpToWaker = function (l, t) { var i = intervalAt(l, t); return i < 0 ? -1 : jumpToWaker(l, i); };
  api.marks = function () { return D.marks.slice(); };
  api.laneTop = function (l) { return TOP + laneY[l] - scroller.scrollTop; }; // css px inside the canvas
  api.arrow = function () { return S.arrow ? { from: S.arrow.from, to: S.arrow.to, t: S.arrow.t } : null; };
  api.ready = gunzip(b64(D.blob)).then(function (buf) {
    build(buf);
    resize();
    install();
    draw();
    return new Promise(function (done) { // the first frame with the timeline on screen
      requestAnimationFrame(function () {
        api.firstPaintMs = performance.now();
        root.setAttribute("data-ready", "1");
        done(api);
      });
    });
  }).catch(function (err) {
    api.error = String(err && err.stack || err);
    root.setAttribute("data-error", api.error);
    console.error("scalestack timeline: " + api.error);
    throw err;
  });
})();
