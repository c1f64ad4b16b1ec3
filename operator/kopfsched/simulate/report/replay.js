"use strict";
// kopfsched replay's page, drawn by report.js with its helpers. Charts are inline SVG, one run
// per column (two with --compare, on the same scales).
window.KOPFSCHED_PAGES = Object.assign(window.KOPFSCHED_PAGES || {}, {replay: function (h) {
  const {D, app, el, chip, header, detail, showNode, zonesCard, colorUtil, bar, tip} = h;
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = {alloc: "#2f9e6e", frag: "#d24c4c", pending: "#d9962b", running: "#3b6fb6", wait: "#8a5cc2", max: "#b9a3d8", pre: "#d24c4c"};
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of kids) if (c !== null && c !== undefined) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  }
  function dur(s) {
    if (s === null || s === undefined) return "-";
    const a = Math.abs(s);
    if (a < 100) return `${+s.toFixed(1)}s`;
    if (a < 3600) return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, "0")}s`;
    if (a < 86400 * 2) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
    return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
  }
  const pctText = (x) => `${(100 * x).toFixed(0)}%`;
  const amountText = (r, v) => r === "cpu" ? `${+v.toFixed(2)} cores` : r === "memory" ? `${(v / 2 ** 30).toFixed(1)}Gi` : String(v);

  // One chart: lines over the run's time axis; hovering shows every line's value at that moment.
  function chart({t, lines, max, fmt, id, height}) {
    const W = 560, H = height || 150, L = 46, R = 10, T = 8, B = 22;
    const t0 = START, t1 = END > t0 ? END : t0 + 1;  // one time axis for every run
    const x = (v) => L + ((v - t0) / (t1 - t0)) * (W - L - R);
    const top = max > 0 ? max : 1;
    const y = (v) => T + (1 - v / top) * (H - T - B);
    const g = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart", id, role: "img", width: "100%"});
    for (const f of [0, 0.5, 1]) {
      g.appendChild(svg("line", {x1: L, x2: W - R, y1: y(top * f), y2: y(top * f), stroke: "#e4e9ef"}));
      g.appendChild(svg("text", {x: L - 6, y: y(top * f) + 4, "text-anchor": "end", "font-size": 10, fill: "#6b7785"}, fmt(top * f)));
    }
    for (let i = 0; i <= 4; i++) {
      const v = t0 + ((t1 - t0) * i) / 4;
      g.appendChild(svg("text", {x: x(v), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", "font-size": 10, fill: "#6b7785"}, dur(v)));
    }
    for (const line of lines) {
      let d = "", open = false;
      line.values.forEach((v, i) => {
        if (v === null || v === undefined) { open = false; return; }
        d += `${open ? "L" : "M"}${x(t[i]).toFixed(1)},${y(v).toFixed(1)}`; open = true;
      });
      if (line.area && d) {
        const first = line.values.findIndex((v) => v !== null), last = line.values.length - 1;
        g.appendChild(svg("path", {d: `${d}L${x(t[last]).toFixed(1)},${y(0)}L${x(t[first]).toFixed(1)},${y(0)}Z`, fill: line.color, opacity: 0.18}));
      }
      g.appendChild(svg("path", {d, fill: "none", stroke: line.color, "stroke-width": 1.6, "stroke-dasharray": line.dash || "", class: "series", "data-name": line.name}));
    }
    const cursor = svg("line", {x1: 0, x2: 0, y1: T, y2: H - B, stroke: "#1d2733", "stroke-width": 0.6, visibility: "hidden"});
    g.appendChild(cursor);
    const catcher = svg("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "transparent"});
    catcher.addEventListener("mousemove", (ev) => {
      const box = g.getBoundingClientRect();
      const at = t0 + ((ev.clientX - box.left) / box.width * W - L) / (W - L - R) * (t1 - t0);
      let i = 0;
      while (i < t.length - 1 && t[i + 1] <= at) i++;
      cursor.setAttribute("x1", x(t[i])); cursor.setAttribute("x2", x(t[i])); cursor.setAttribute("visibility", "visible");
      tip.replaceChildren(el("b", {}, `t = ${dur(t[i])}`), ...lines.map((l) => el("div", {}, `${l.name}: ${l.values[i] === null ? "-" : fmt(l.values[i])}`)));
      tip.style.display = "block"; tip.style.left = `${ev.clientX + 14}px`; tip.style.top = `${ev.clientY + 10}px`;
    });
    catcher.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); tip.style.display = "none"; });
    g.appendChild(catcher);
    return g;
  }
  function legend(lines) {
    return el("div", {class: "legend"}, lines.map((l) => el("span", {}, el("i", {style: `background:${l.color}`}), l.name)));
  }
  function card(title, sub, body, id) {
    return el("div", {class: "card", id}, el("h2", {}, title, sub ? el("span", {class: "sub"}, sub) : null), body);
  }

  const runs = D.runs;
  const compare = runs.length > 1;
  const START = Math.min(...runs.map((r) => r.report.start)), END = Math.max(...runs.map((r) => r.report.end));
  const maxOf = (get) => Math.max(0, ...runs.flatMap((r) => get(r.report).filter((v) => v !== null)));
  const slug = (s) => s.replace(/[^a-z0-9]+/gi, "-");

  function column(run) {
    const R = run.report, S = R.series, s = R.summary, w = R.wait, tag = run.label ? `-${run.label}` : "";
    const parts = [];  // the charts' cards: two a row for one run, one a row in each column of two
    for (const r of R.resources) {
      const cap = R.capacity[r];
      const alloc = S.allocated[r].map((v) => cap ? v / cap : 0), frag = S.fragmented[r].map((v) => cap ? v / cap : 0);
      const lines = [{name: "allocated", values: alloc, color: COLORS.alloc, area: true},
        {name: "fragmented (free, wanted, no pending pod fits)", values: frag, color: COLORS.frag, dash: "4 3"}];
      parts.push(card(r, `capacity ${amountText(r, cap)} · mean ${pctText(R.allocation[r].mean)} allocated, ${pctText(R.fragmentation[r].mean)} of the free fragmented`,
        [chart({t: S.t, lines, max: 1, fmt: pctText, id: `alloc-${slug(r)}${tag}`}), legend(lines)], `resource-${slug(r)}${tag}`));
    }
    const podLines = [{name: "pending", values: S.pending, color: COLORS.pending, area: true}, {name: "running", values: S.running, color: COLORS.running}];
    parts.push(card("Pods", `peak ${s.peakPending} pending · ${s.pending} pending at the end`,
      [chart({t: S.t, lines: podLines, max: maxOf((x) => [...x.series.pending, ...x.series.running]), fmt: (v) => String(Math.round(v)), id: `pods${tag}`}), legend(podLines)], `pods-card${tag}`));
    const waitLines = [{name: "p90 of the pods bound in the interval", values: S.waitP90, color: COLORS.wait}, {name: "max", values: S.waitMax, color: COLORS.max, dash: "3 3"}];
    const waitTable = el("table", {class: "waits"}, el("thead", {}, el("tr", {}, ["pods bound", "p50", "p90", "p99", "max", "mean"].map((x) => el("th", {}, x)))),
      el("tbody", {}, el("tr", {}, el("td", {}, String(w.count)), ["p50", "p90", "p99", "max", "mean"].map((k) => el("td", {class: "mono"}, dur(w[k]))))));
    parts.push(card("Wait until bound", "arrival to bind, per pod",
      [waitTable, chart({t: S.t, lines: waitLines, max: maxOf((x) => x.series.waitMax), fmt: dur, id: `wait${tag}`}), legend(waitLines)], `wait-card${tag}`));
    const preLines = [{name: "pods preempted (cumulative)", values: S.preempted, color: COLORS.pre}];
    const events = R.preemptions.slice(0, 100).map((p) => el("tr", {}, el("td", {class: "mono"}, dur(p.t)), el("td", {class: "mono"}, p.preemptor),
      el("td", {class: "mono"}, p.node || "-"), el("td", {class: "mono"}, p.victims.join(", "))));
    parts.push(card("Preemptions", `${s.preempted} pod(s) preempted by ${R.preemptions.length} preemption(s)`,
      [chart({t: S.t, lines: preLines, max: Math.max(1, maxOf((x) => x.series.preempted)), fmt: (v) => String(Math.round(v)), id: `preempted${tag}`, height: 110}),
        events.length ? el("table", {}, el("thead", {}, el("tr", {}, ["time", "preemptor", "node", "victims"].map((x) => el("th", {}, x)))), el("tbody", {}, events)) : null],
      `preemptions-card${tag}`));
    const extended = run.view.extended || {};
    const whole = [];
    whole.push(zonesCard(`Nodes at the end${run.label ? " · " + run.label : ""}`, run.view, colorUtil, (n) => showNode(n,
      el("div", {}, (extended[n[0]] || []).map(([r, used, total]) => bar(r, used, total, String))))));
    if (run.pending.length) {
      const list = el("ul", {class: "list", id: `pending-list${tag}`}, run.pending.map(([key, since]) =>
        el("li", {}, el("div", {}, el("span", {class: "badge Unschedulable"}, "Pending"), " ", el("span", {class: "k"}, key)),
          el("div", {class: "m"}, `arrived at ${dur(since)}, waiting ${dur(R.end - since)} when the replay ended`))));
      whole.push(card("Pending at the end", `${run.pendingCount} pod(s), the longest waiting first${run.pendingCount > run.pending.length ? ` (the first ${run.pending.length})` : ""}`, list, `pending-card${tag}`));
    }
    return el("section", {class: "run", "data-run": run.label || "replay"}, compare ? el("h2", {class: "runlabel"}, run.label) : null,
      compare ? parts : el("div", {class: "cols"}, parts), whole);
  }

  const first = runs[0].report, last = runs[runs.length - 1].report;
  const arrow = (get, f) => compare ? `${f(get(first))} → ${f(get(last))}` : f(get(first));
  app.appendChild(header([
    chip("pods", first.summary.pods), chip("nodes", first.summary.nodes),
    chip("scheduled", arrow((r) => r.summary.scheduled, String), "ok"),
    chip("pending at the end", arrow((r) => r.summary.pending, String), last.summary.pending ? "bad" : ""),
    chip("wait p90", arrow((r) => r.wait.p90, dur), ""),
    chip("preempted", arrow((r) => r.summary.preempted, String), last.summary.preempted ? "warn" : ""),
    chip("replayed", `${dur(first.start)} → ${dur(first.end)}${first.origin ? " from " + first.origin : ""}`, "")]));
  app.appendChild(el("main", {class: "layout"},
    el("section", {}, el("div", {class: compare ? "cols" : ""}, runs.map(column))),
    el("aside", {}, detail, card("How to read this", "", el("div", {class: "note"},
      (first.summary.notHandled ? `${first.summary.notHandled} pod(s) name a schedulerName with no profile: nobody schedules them, and they count nowhere. ` : "") +
      "Allocation is what the bound pods request, as a share of the nodes' allocatable. Fragmented is the free capacity of the nodes " +
      "where a pending pod asking for it could run were the node empty, but none fits now: free, wanted, and unusable (docs/replay.md). " +
      "Hover a chart for its values; click a node cell for its pods.")))));
}});
