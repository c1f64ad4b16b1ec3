"use strict";
// kopfsched's HTML report: draws the JSON in #data. No network, no libraries.
// Nodes: [name, zone, cpuReq, cpuAlloc, memReq, memAlloc, pods, podsAlloc, [pod keys]].
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const PAGE = 25;
  const app = document.getElementById("app");
  const tip = el("div", {class: "tip"});
  document.body.appendChild(tip);

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v);
    }
    for (const c of children.flat()) if (c !== null && c !== undefined && c !== false)
      e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    return e;
  }
  const pct = (a, b) => (b > 0 ? Math.min(100, (100 * a) / b) : 0);
  const cores = (m) => (m % 1000 === 0 ? String(m / 1000) : (m / 1000).toFixed(m % 100 === 0 ? 1 : 2));
  const gib = (b) => { const g = b / 2 ** 30; return g >= 100 ? g.toFixed(0) + "Gi" : g >= 1 ? g.toFixed(1) + "Gi" : (b / 2 ** 20).toFixed(0) + "Mi"; };
  function utilColor(p) {
    if (p <= 0) return "#e4e9ef";
    if (p < 50) return mix([120, 200, 160], [47, 158, 110], p / 50);
    if (p < 80) return mix([47, 158, 110], [217, 150, 43], (p - 50) / 30);
    return mix([217, 150, 43], [210, 76, 76], Math.min(1, (p - 80) / 20));
  }
  function mix(a, b, t) { return `rgb(${a.map((x, i) => Math.round(x + (b[i] - x) * t)).join(",")})`; }
  const scoreColor = (s) => mix([246, 248, 250], [134, 206, 168], s / 100);
  function bar(label, used, total, fmt) {
    const p = pct(used, total);
    return el("div", {class: "bar" + (label ? "" : " bare")}, label ? el("span", {class: "label"}, label) : null,
      el("div", {class: "track"}, el("div", {class: "fill", style: `width:${p.toFixed(1)}%;background:${utilColor(p || 0.1)}`})),
      el("span", {class: "num"}, el("b", {}, `${p.toFixed(0)}%`), ` ${fmt(used)} / ${fmt(total)}`));
  }
  const nodeUtil = (n) => Math.max(pct(n[2], n[3]), pct(n[4], n[5]));
  function chip(label, value, cls) { return el("span", {class: "chip " + (cls || "")}, el("b", {}, String(value)), label); }

  function header(chips) {
    return el("header", {class: "top"}, el("div", {class: "brand"}, "kopfsched · " + D.kind),
      el("h1", {}, D.title), el("div", {class: "chips"}, chips, chip("generated", D.generated, "")));
  }

  // ---- the detail panel: one pod or one node -------------------------------------------------
  const detail = el("div", {class: "card detail", id: "detail"},
    el("div", {class: "empty"}, "Click a pending pod, a node cell or a row to see why."));
  function showPod(p, extra) {
    detail.replaceChildren();
    detail.appendChild(el("h2", {}, el("span", {class: "badge " + p.result}, p.result), p.key));
    const pairs = ["scheduler", p.scheduler || "-", "node", p.node || "-",
      ...(p.nominated ? ["nominated", p.nominated] : []),
      ...(p.victims && p.victims.length ? ["victims", p.victims.join(", ")] : []), ...(extra || [])];
    detail.appendChild(el("div", {class: "kv"}, pairs.map((t) => el("div", {}, t))));
    if (p.message) detail.appendChild(el("div", {class: "msg" + (p.result === "Scheduled" ? " okmsg" : ""), id: "pod-message"}, p.message));
    if (p.reasons && p.reasons.length) {
      const total = Math.max(...p.reasons.map((r) => r[0]));
      const box = el("div", {id: "pod-reasons"}, el("div", {class: "muted"}, "Why, node by node:"));
      for (const [n, reason] of p.reasons.slice().sort((a, b) => b[0] - a[0]))
        box.appendChild(el("div", {class: "reason"}, el("div", {}, el("div", {class: "why"}, reason),
          el("div", {class: "track"}, el("div", {class: "fill", style: `width:${pct(n, total)}%`}))), el("div", {class: "n"}, n + " nodes")));
      detail.appendChild(box);
    }
  }
  function showNode(n, extra) {
    detail.replaceChildren();
    detail.appendChild(el("h2", {}, n[0], el("span", {class: "sub"}, n[1])));
    detail.appendChild(bar("CPU", n[2], n[3], cores));
    detail.appendChild(bar("Memory", n[4], n[5], gib));
    detail.appendChild(bar("Pods", n[6], n[7], String));
    if (extra) detail.appendChild(extra);
    const pods = n[8] || [];
    detail.appendChild(el("div", {class: "muted", style: "margin-top:8px"}, pods.length ? `${pods.length} pod(s) on this node` : "No pods on this node"));
    const list = el("div", {class: "pods"});
    for (const key of pods.slice(0, 300)) list.appendChild(el("div", {}, key));
    if (pods.length > 300) list.appendChild(el("div", {class: "muted"}, `… and ${pods.length - 300} more`));
    detail.appendChild(list);
  }

  // ---- zones: aggregate bars and one canvas of node cells per zone --------------------------------
  function zonesCard(title, view, colorOf, onNode, mark, markLabel) {
    const byZone = new Map();
    for (const n of view.nodes) { if (!byZone.has(n[1])) byZone.set(n[1], []); byZone.get(n[1]).push(n); }
    const wrap = el("div", {class: "zones"});
    for (const [zone, nodes] of [...byZone.entries()].sort()) {
      const sum = (i) => nodes.reduce((s, n) => s + n[i], 0);
      const card = el("div", {class: "zone"}, el("h3", {}, zone, el("span", {}, `${nodes.length} node${nodes.length === 1 ? "" : "s"}`)),
        bar("CPU", sum(2), sum(3), cores), bar("Memory", sum(4), sum(5), gib), bar("Pods", sum(6), sum(7), String));
      card.appendChild(heatmap(nodes, colorOf, onNode, mark));
      wrap.appendChild(card);
    }
    return el("div", {class: "card"}, el("h2", {}, title, el("span", {class: "sub"}, `${view.nodes.length} nodes by zone · each cell is a node`)), wrap,
      el("div", {class: "legend"}, ...legendFor(colorOf), markLabel ? el("span", {}, el("i", {style: "background:#fff;border:2px solid #1d2733;width:8px;height:8px"}), markLabel) : null));
  }
  function legendFor(colorOf) {
    const items = colorOf.legend || [["#e4e9ef", "empty"], [utilColor(30), "< 50%"], [utilColor(65), "50–80%"], [utilColor(95), "> 80% (max of CPU, memory)"]];
    return items.map(([c, t]) => el("span", {}, el("i", {style: "background:" + c}), t));
  }
  function heatmap(nodes, colorOf, onNode, mark) {
    const cell = nodes.length > 400 ? 9 : nodes.length > 60 ? 14 : 24, gap = 3, width = 300;
    const per = Math.max(1, Math.floor((width + gap) / (cell + gap)));
    const rows = Math.ceil(nodes.length / per);
    const c = el("canvas", {class: "heat", width: per * (cell + gap), height: rows * (cell + gap)});
    const ctx = c.getContext("2d");
    nodes.forEach((n, i) => {
      const x = (i % per) * (cell + gap), y = Math.floor(i / per) * (cell + gap);
      ctx.fillStyle = colorOf(n); ctx.fillRect(x, y, cell, cell);
      if (mark && mark(n)) { ctx.strokeStyle = "#1d2733"; ctx.lineWidth = 2; ctx.strokeRect(x + 1, y + 1, cell - 2, cell - 2); }
      else if (colorOf(n) === "#e4e9ef") { ctx.strokeStyle = "#cfd6de"; ctx.lineWidth = 1; ctx.strokeRect(x + 0.5, y + 0.5, cell - 1, cell - 1); }
    });
    const at = (ev) => { const i = Math.floor(ev.offsetY / (cell + gap)) * per + Math.floor(ev.offsetX / (cell + gap)); return ev.offsetX < per * (cell + gap) ? nodes[i] : undefined; };
    c.addEventListener("mousemove", (ev) => {
      const n = at(ev);
      if (!n) { tip.style.display = "none"; return; }
      tip.textContent = `${n[0]} · CPU ${pct(n[2], n[3]).toFixed(0)}% · memory ${pct(n[4], n[5]).toFixed(0)}% · ${n[6]} pods` + (colorOf.label ? " · " + colorOf.label(n) : "");
      tip.style.display = "block"; tip.style.left = ev.clientX + 14 + "px"; tip.style.top = ev.clientY + 12 + "px";
    });
    c.addEventListener("mouseleave", () => (tip.style.display = "none"));
    c.addEventListener("click", (ev) => { const n = at(ev); if (n) onNode(n); });
    c.nodes = nodes;
    return c;
  }

  // ---- a paged, filterable list (never thousands of rows in the DOM) ------------------------------
  function pagedList({items, render, match, placeholder, id, container}) {
    let page = 0, shown = items;
    const body = container || el("ul", {class: "list", id});
    const info = el("span", {});
    const prev = el("button", {onclick: () => { page--; draw(); }}, "‹ prev");
    const next = el("button", {onclick: () => { page++; draw(); }}, "next ›");
    const search = el("input", {class: "search", placeholder, oninput: () => {
      const q = search.value.trim().toLowerCase(); shown = q ? items.filter((x) => match(x, q)) : items; page = 0; draw(); }});
    function draw() {
      const pages = Math.max(1, Math.ceil(shown.length / PAGE));
      page = Math.min(Math.max(0, page), pages - 1);
      body.replaceChildren(...shown.slice(page * PAGE, page * PAGE + PAGE).map(render));
      info.textContent = shown.length ? `${page * PAGE + 1}–${Math.min(shown.length, page * PAGE + PAGE)} of ${shown.length}` : "nothing";
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
    }
    draw();
    return {search, body, pager: el("div", {class: "pager"}, info, el("span", {}, prev, " ", next)),
      set(newItems) { items = newItems; shown = items; search.value = ""; page = 0; draw(); }};
  }
  function selectIn(container, node) {
    for (const s of container.querySelectorAll(".sel")) s.classList.remove("sel");
    if (node) node.classList.add("sel");
  }

  function pendingCard(pods, title) {
    const pending = pods.filter((p) => p.result !== "Scheduled");
    const ul = el("ul", {class: "list", id: "pending-list"});
    const list = pagedList({items: pending, container: ul, placeholder: "filter pending pods…",
      match: (p, q) => (p.key + " " + p.message).toLowerCase().includes(q),
      render: (p) => { const li = el("li", {"data-pod": p.key, onclick: () => { selectIn(ul, li); showPod(p); }},
        el("div", {}, el("span", {class: "badge " + p.result}, p.result), " ", el("span", {class: "k"}, p.key)),
        el("div", {class: "m"}, p.message || "")); return li; }});
    return el("div", {class: "card", id: "pending"}, el("h2", {}, title || "Pending pods", el("span", {class: "sub"}, `${pending.length}`)),
      pending.length ? [el("div", {class: "toolbar"}, list.search), ul, list.pager] : el("div", {class: "muted"}, "Every pod was placed."));
  }
  function nodesTable(view, title) {
    const tbody = el("tbody", {});
    const list = pagedList({items: view.nodes, container: tbody, placeholder: "filter nodes…",
      match: (n, q) => (n[0] + " " + n[1]).toLowerCase().includes(q),
      render: (n) => { const tr = el("tr", {class: "click", onclick: () => { selectIn(tbody, tr); showNode(n); }},
        el("td", {class: "mono"}, n[0]), el("td", {}, n[1]),
        el("td", {}, bar("", n[2], n[3], cores)), el("td", {}, bar("", n[4], n[5], gib)), el("td", {class: "mono"}, `${n[6]}/${n[7]}`)); return tr; }});
    return el("div", {class: "card"}, el("h2", {}, title || "Nodes", el("span", {class: "sub"}, "requested / allocatable")),
      el("div", {class: "toolbar"}, list.search),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "zone"), el("th", {}, "CPU"), el("th", {}, "memory"), el("th", {}, "pods"))), tbody),
      list.pager);
  }
  const podsByKey = (view) => new Map(view.pods.map((p) => [p.key, p]));
  const nodeByName = (view) => new Map(view.nodes.map((n) => [n[0], n]));
  const colorUtil = (n) => utilColor(nodeUtil(n));

  // ---- simulate ------------------------------------------------------------------------------------
  function simulatePage() {
    const s = D.summary, v = D.view;
    app.appendChild(header([chip("nodes", v.nodes.length), chip("scheduled", s.scheduled, "ok"),
      chip("unschedulable", s.unschedulable, s.unschedulable ? "bad" : ""), chip("preempted", s.preempted, s.preempted ? "warn" : "")]));
    app.appendChild(el("main", {class: "layout"},
      el("section", {}, zonesCard("Cluster", v, colorUtil, (n) => showNode(n)), nodesTable(v)),
      el("aside", {}, detail, pendingCard(v.pods))));
  }

  // ---- explain -------------------------------------------------------------------------------------
  function explainPage() {
    const e = D.entry, v = D.view, key = `${e.namespace}/${e.name}`;
    const scored = Object.keys(e.weights).filter((p) => Object.values(e.scores).some((s) => p in s));
    const rank = new Map(e.ranking.map((r) => [r.node, r]));
    const maxTotal = Math.max(1, ...e.ranking.map((r) => r.total));
    const verdict = (name) => e.filter[name] ? `${e.filter[name].reasons.join("; ") || e.filter[name].code} (${e.filter[name].plugin || "—"})` : null;
    const colorOf = (n) => n[0] === e.node ? "#3461c1" : e.filter[n[0]] ? (e.filter[n[0]].code === "Unschedulable" ? "#e8a19c" : "#c9ced6") : rank.has(n[0]) ? mix([190, 230, 208], [47, 158, 110], rank.get(n[0]).total / maxTotal) : "#e4e9ef";
    colorOf.legend = [["#3461c1", "chosen"], [mix([190, 230, 208], [47, 158, 110], 1), "feasible (darker: higher total)"], ["#e8a19c", "rejected: preemption might help"], ["#c9ced6", "rejected: unresolvable"]];
    colorOf.label = (n) => (n[0] === e.node ? "chosen · " : "") + (verdict(n[0]) || (rank.has(n[0]) ? `rank ${rank.get(n[0]).rank}, total ${rank.get(n[0]).total}` : "not evaluated"));
    const feasible = e.ranking.length;
    app.appendChild(header([chip("nodes evaluated", e.evaluatedNodes), chip("feasible", e.feasibleNodes, feasible ? "ok" : "bad"),
      chip("rejected", Object.keys(e.filter).length, Object.keys(e.filter).length ? "bad" : ""), chip("schedulerName", e.schedulerName)]));
    const self = {key, result: e.result, node: e.node, scheduler: e.schedulerName, message: e.message || (e.node ? `would be assigned to ${e.node}` : ""),
      reasons: groupsOf(e).filter((g) => !g.fit).map((g) => [g.nodes.length, g.label]), victims: e.victims, nominated: e.nominatedNode};
    const hero = el("div", {class: "card"}, el("div", {class: "hero"},
      el("div", {}, el("div", {class: "muted"}, "Pod"), el("div", {class: "big mono"}, key)),
      el("div", {}, el("div", {class: "muted"}, "Result"), el("span", {class: "badge " + e.result}, e.result)),
      e.node ? el("div", {}, el("div", {class: "muted"}, "Would be placed on"), el("div", {class: "big mono"}, e.node)) : null),
      e.note ? el("div", {class: "note"}, e.note) : null,
      e.message ? el("div", {class: "msg"}, e.message) : null);
    app.appendChild(el("main", {class: "layout"},
      el("section", {}, hero, groupsCard(e), zonesCard("Where the verdicts fall", v, colorOf, (n) => showNode(n, nodeVerdict(e, n[0])), (n) => n[0] === e.node),
        gridCard(e, scored, v), preemptionCard(e)),
      el("aside", {}, detail, pendingSelf(self))));
  }
  function groupsOf(e) {
    const groups = new Map();
    for (const [node, st] of Object.entries(e.filter)) {
      const label = `${st.reasons.join("; ") || st.code}${st.plugin ? " (" + st.plugin + ")" : ""}`;
      if (!groups.has(label)) groups.set(label, {label, nodes: [], fit: false});
      groups.get(label).nodes.push(node);
    }
    const out = [...groups.values()].sort((a, b) => b.nodes.length - a.nodes.length || a.label.localeCompare(b.label));
    if (e.ranking.length) out.unshift({label: "fit (passed every Filter plugin)", nodes: e.ranking.map((r) => r.node), fit: true});
    return out;
  }
  let gridFilter = null, gridRedraw = null;
  function groupsCard(e) {
    const box = el("div", {class: "groups", id: "groups"});
    for (const g of groupsOf(e)) {
      const row = el("div", {class: "g" + (g.fit ? " fit" : ""), onclick: () => {
        const on = !row.classList.contains("on");
        for (const r of box.children) r.classList.remove("on");
        if (on) row.classList.add("on");
        gridFilter = on ? new Set(g.nodes) : null; gridRedraw && gridRedraw(); }},
        el("span", {class: "count"}, g.nodes.length), el("span", {}, g.label));
      box.appendChild(row);
    }
    return el("div", {class: "card"}, el("h2", {}, "Verdicts", el("span", {class: "sub"}, "nodes grouped by what Filter said · click to narrow the grid")), box);
  }
  function gridCard(e, scored, v) {
    const nodes = nodeByName(v), rank = new Map(e.ranking.map((r) => [r.node, r]));
    const order = [...e.ranking.map((r) => r.node), ...groupsOf(e).filter((g) => !g.fit).flatMap((g) => g.nodes)];
    const tbody = el("tbody", {});
    const list = pagedList({items: order, container: tbody, placeholder: "filter nodes…", match: (n, q) => n.toLowerCase().includes(q),
      render: (name) => {
        const st = e.filter[name], sc = e.scores[name];
        const tr = el("tr", {class: "click" + (name === e.node ? " sel" : ""), "data-node": name, onclick: () => { const n = nodes.get(name); if (n) showNode(n, nodeVerdict(e, name)); }},
          el("td", {class: "mono"}, name + (name === e.node ? " ★" : "")));
        if (st) tr.appendChild(el("td", {class: "rej", colspan: scored.length + 2}, `✗ ${st.reasons.join("; ") || st.code} (${st.plugin || "—"})`));
        else {
          for (const p of scored) { const s = sc ? sc[p] : undefined; tr.appendChild(el("td", {class: "score", style: s === undefined ? "" : "background:" + scoreColor(s), title: `${p}: ${s ?? "-"} × ${e.weights[p]}`}, s ?? "–")); }
          tr.appendChild(el("td", {class: "mono", style: "font-weight:700"}, sc ? sc.total : "–"));
          tr.appendChild(el("td", {class: "mono"}, rank.has(name) ? rank.get(name).rank : "–"));
        }
        return tr; }});
    gridRedraw = () => list.set(gridFilter ? order.filter((n) => gridFilter.has(n)) : order);
    const short = (p) => p.replace(/[a-z]/g, "") || p.slice(0, 3);
    return el("div", {class: "card"}, el("h2", {}, "Nodes × plugins", el("span", {class: "sub"}, "normalized score 0–100 per Score plugin; ★ the chosen node")),
      el("div", {class: "toolbar"}, list.search),
      el("table", {id: "grid"}, el("thead", {}, el("tr", {}, el("th", {}, "node"), ...scored.map((p) => el("th", {title: p}, `${short(p)} ×${e.weights[p]}`)), el("th", {}, "total"), el("th", {}, "rank"))), tbody),
      list.pager, el("div", {class: "legend"}, scored.map((p) => el("span", {}, `${short(p)} = ${p}`))));
  }
  function nodeVerdict(e, name) {
    const st = e.filter[name], sc = e.scores[name];
    if (st) return el("div", {class: "msg"}, `Rejected by ${st.plugin || "—"} (${st.code}): ${st.reasons.join("; ")}`);
    if (sc) return el("div", {class: "msg okmsg"}, `Fits · total ${sc.total}` + Object.entries(sc).filter(([k]) => k !== "total").map(([k, s]) => ` · ${k} ${s}×${e.weights[k]}`).join(""));
    return null;
  }
  function preemptionCard(e) {
    const p = e.preemption;
    if (!p) return null;
    const body = p.candidates.length
      ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "candidate node"), el("th", {}, "victims"), el("th", {}, "PDB violations"))),
        el("tbody", {}, p.candidates.slice(0, 200).map((c) => el("tr", {class: c.node === (e.nominatedNode || p.chosen) ? "sel" : ""},
          el("td", {class: "mono"}, c.node + (c.node === (e.nominatedNode || p.chosen) ? " ★" : "")), el("td", {class: "mono"}, c.victims.join(", ")), el("td", {}, c.pdbViolations)))))
      : el("div", {class: "msg"}, "Preemption cannot help: " + p.reason);
    return el("div", {class: "card"}, el("h2", {}, "Preemption", el("span", {class: "sub"}, p.candidates.length ? `${p.candidates.length} candidate node(s); ★ the one the scheduler would nominate` : "")), body);
  }
  function pendingSelf(p) {
    const ul = el("ul", {class: "list", id: "pending-list"});
    const li = el("li", {"data-pod": p.key, onclick: () => { selectIn(ul, li); showPod(p); }},
      el("div", {}, el("span", {class: "badge " + p.result}, p.result), " ", el("span", {class: "k"}, p.key)), el("div", {class: "m"}, p.message));
    ul.appendChild(li);
    return el("div", {class: "card", id: "pending"}, el("h2", {}, "The pod"), ul);
  }

  // ---- compare -------------------------------------------------------------------------------------
  function comparePage() {
    const b = D.before, a = D.after, s = D.summary;
    const moved = new Set(D.changes.flatMap((c) => [c.before.node, c.after.node]).filter(Boolean));
    const freed = D.emptyNodes.after.filter((n) => !D.emptyNodes.before.includes(n));
    app.appendChild(header([chip("pods change", D.changes.length, D.changes.length ? "warn" : ""),
      chip("scheduled before → after", `${s.before.scheduled} → ${s.after.scheduled}`, "ok"),
      chip("unschedulable before → after", `${s.before.unschedulable} → ${s.after.unschedulable}`, "bad"),
      chip("empty nodes before → after", `${D.emptyNodes.before.length} → ${D.emptyNodes.after.length}`, freed.length ? "ok" : "")]));
    const bp = podsByKey(b), ap = podsByKey(a);
    const tbody = el("tbody", {});
    const list = pagedList({items: D.changes, container: tbody, placeholder: "filter changed pods…",
      match: (c, q) => `${c.namespace}/${c.name} ${c.before.node} ${c.after.node}`.toLowerCase().includes(q),
      render: (c) => { const key = `${c.namespace}/${c.name}`;
        const tr = el("tr", {class: "click changed", "data-pod": key, onclick: () => { selectIn(tbody, tr); comparePod(key, bp.get(key), ap.get(key)); }},
          el("td", {class: "mono"}, key), el("td", {}, el("span", {class: "badge " + c.before.result}, c.before.result), " ", el("span", {class: "mono"}, c.before.node || "")),
          el("td", {class: "arrow"}, "→"), el("td", {}, el("span", {class: "badge " + c.after.result}, c.after.result), " ", el("span", {class: "mono"}, c.after.node || ""))); return tr; }});
    const changes = el("div", {class: "card"}, el("h2", {}, "Pods whose result or node changes", el("span", {class: "sub"}, String(D.changes.length))),
      D.changes.length ? [el("div", {class: "toolbar"}, list.search), el("table", {id: "changes"}, el("thead", {}, el("tr", {}, el("th", {}, "pod"), el("th", {}, "before"), el("th", {}), el("th", {}, "after"))), tbody), list.pager]
        : el("div", {class: "muted"}, "No pod changes."),
      freed.length ? el("div", {class: "note"}, `Nodes left empty (but for DaemonSet and static pods) after: ${freed.slice(0, 40).join(", ")}${freed.length > 40 ? ` … and ${freed.length - 40} more` : ""}`) : null);
    const mark = (n) => moved.has(n[0]);
    app.appendChild(el("main", {class: "layout"},
      el("section", {}, changes, el("div", {class: "cols"},
        zonesCard("Before", b, colorUtil, (n) => showNode(n), mark, "a changed pod left or arrives"),
        zonesCard("After", a, colorUtil, (n) => showNode(n), mark, "a changed pod left or arrives"))),
      el("aside", {}, detail, pendingCard(a.pods, "Pending after"), pendingCard(b.pods, "Pending before"))));
    // Two pending lists: keep ids unique (the second one is "before").
    const lists = document.querySelectorAll("#pending-list");
    if (lists.length === 2) { lists[1].id = "pending-before-list"; lists[1].parentElement.id = "pending-before"; }
  }
  function comparePod(key, before, after) {
    const p = after || before;
    showPod(p || {key, result: "Absent"}, ["before", before ? `${before.result} ${before.node || ""}` : "absent", "after", after ? `${after.result} ${after.node || ""}` : "absent"]);
  }

  // ---- plan ----------------------------------------------------------------------------------------
  function planPage() {
    const P = D.plan, s = P.summary, b = D.before, a = D.after;
    const added = new Set(P.addedNodes.map((n) => n.name)), removed = new Set(P.remove.map((r) => r.node));
    app.appendChild(header([chip("nodes to add", s.nodesAdded, s.nodesAdded ? "warn" : ""),
      ...(s.cost !== null ? [chip("cost", +s.cost.toFixed(4), "")] : []),
      chip("pods helped", `${s.helped}/${s.pending}`, "ok"), chip("not helped", s.unhelped, s.unhelped ? "bad" : ""),
      chip("removable nodes", s.nodesRemovable, s.nodesRemovable ? "ok" : ""),
      chip(s.verified ? "verified by simulation" : "NOT verified", s.verified ? "✓" : "✗", s.verified ? "ok" : "bad")]));
    const afterNodes = nodeByName(a), beforeNodes = nodeByName(b);
    const addRows = P.addedNodes.map((n) => el("tr", {class: "click", "data-node": n.name, onclick: () => { const v = afterNodes.get(n.name); if (v) showNode(v); }},
      el("td", {class: "mono"}, n.name), el("td", {}, n.template), el("td", {class: "mono"}, n.pods.join(", "))));
    const groups = P.add.map((g) => `${g.count} × ${g.template}` + (g.price !== null ? ` (${+g.price.toFixed(4)})` : "")).join(" + ");
    const addCard = el("div", {class: "card", id: "plan-add"}, el("h2", {}, "Nodes to add",
      el("span", {class: "sub"}, P.add.length ? `${groups} · ${s.minimal ? "minimal" : "not proven minimal"} · by ${s.objective}` : "")),
      P.addedNodes.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "new node"), el("th", {}, "template"), el("th", {}, "pods it takes"))), el("tbody", {}, addRows))
        : el("div", {class: "muted"}, s.pending ? "No template can help the pending pods." : "No pod is pending."));
    const tmpl = el("div", {class: "legend"}, P.templates.map((t) => el("span", {}, el("b", {}, t.name), ` ${t.allocatable.cpu || "0"} CPU · ${t.allocatable.memory || "0"}`
      + Object.entries(t.allocatable).filter(([k]) => !["cpu", "memory", "pods"].includes(k)).map(([k, v]) => ` · ${v} ${k}`).join("")
      + (t.zone ? ` · ${t.zone}` : "") + (t.price !== null ? ` · price ${t.price}` : "") + (t.maxCount !== null ? ` · max ${t.maxCount}` : ""))));
    addCard.appendChild(tmpl);
    const unhelpedRows = P.unhelped.flatMap((p) => { const key = `${p.namespace}/${p.name}`, entries = Object.entries(p.templates);
      const first = el("td", {class: "mono", rowspan: Math.max(1, entries.length)}, key);
      if (!entries.length) return [el("tr", {"data-pod": key}, first, el("td", {}, "–"), el("td", {class: "rej"}, p.reason))];
      return entries.map(([t, st], i) => el("tr", {"data-pod": key}, i === 0 ? first : null, el("td", {}, t), el("td", {class: "rej"}, `✗ ${st.reasons.join("; ") || st.code} (${st.plugin || "—"})`))); });
    const unhelpedCard = el("div", {class: "card", id: "plan-unhelped"}, el("h2", {}, "Pods no template helps", el("span", {class: "sub"}, "what Filter said on a new node of each template")),
      P.unhelped.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "pod"), el("th", {}, "template"), el("th", {}, "why not"))), el("tbody", {}, unhelpedRows))
        : el("div", {class: "muted"}, "Every pending pod is helped."));
    const removeCard = el("div", {class: "card", id: "plan-remove"}, el("h2", {}, "Nodes that could be removed", el("span", {class: "sub"}, String(P.remove.length))),
      P.remove.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "its pods move to"))),
        el("tbody", {}, P.remove.map((r) => el("tr", {class: "click", "data-node": r.node, onclick: () => { const v = beforeNodes.get(r.node); if (v) showNode(v); }},
          el("td", {class: "mono"}, r.node), el("td", {class: "mono"}, r.pods.map((p) => `${p.pod} → ${p.node}`).join(", ") || "no pods to move")))))
        : el("div", {class: "muted"}, "No node can go."));
    const keepList = el("tbody", {});
    const keep = pagedList({items: P.keep, container: keepList, placeholder: "filter nodes kept…",
      match: (k, q) => `${k.node} ${k.reason} ${k.message}`.toLowerCase().includes(q),
      render: (k) => el("tr", {class: "click", "data-node": k.node, onclick: () => { const v = beforeNodes.get(k.node); if (v) showNode(v, el("div", {class: "msg"}, `${k.reason}: ${k.message}`)); }},
        el("td", {class: "mono"}, k.node), el("td", {}, el("span", {class: "badge Unschedulable"}, k.reason)), el("td", {}, k.message))});
    const keepCard = el("div", {class: "card", id: "plan-keep"}, el("h2", {}, "Nodes that must stay", el("span", {class: "sub"}, "cluster-autoscaler's scale-down rules, then the scheduler")),
      P.keep.length ? [el("div", {class: "toolbar"}, keep.search), el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "reason"), el("th", {}, "why"))), keepList), keep.pager]
        : el("div", {class: "muted"}, "Every existing node could go."));
    app.appendChild(el("main", {class: "layout"},
      el("section", {}, addCard, unhelpedCard, el("div", {class: "cols"},
        zonesCard("Before", b, colorUtil, (n) => showNode(n), (n) => removed.has(n[0]), "could be removed"),
        zonesCard("After", a, colorUtil, (n) => showNode(n), (n) => added.has(n[0]), "added by the plan")), removeCard, keepCard),
      el("aside", {}, detail, pendingCard(a.pods, "Pending after the plan"))));
  }

  ({simulate: simulatePage, explain: explainPage, compare: comparePage, plan: planPage})[D.kind]();
})();
