// mkengine run viewer (served by the engine; no external scripts).
// The run page opens one Server-Sent Events stream (/api/live/RUN): a
// "state" message with everything, then "nodes", "events", "info" and
// "questions" as the run grows. Node details come from /api/node/RUN/ID.
// Answers and stop are POSTs with the X-MK-Token header (the token is in
// the URL fragment printed by mkengine, or typed once).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e[k] = v; else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k instanceof Node ? k : String(k));
    return e;
  };
  const arr = (x) => (Array.isArray(x) ? x : []);
  const COLORS = { ok: "#16a34a", incorrect: "#f59e0b", compile_error: "#dc2626", runtime_error: "#9333ea",
    timeout: "#7c3aed", reference: "#2563eb", error: "#9333ea" };
  const color = (n) => (n.kind === "reference" ? COLORS.reference : COLORS[n.status] || "#9ca3af");

  // ---- formatting values for people ----------------------------------------
  function fmtNum(x) {
    if (typeof x !== "number" || !isFinite(x)) return String(x);
    if (Number.isInteger(x)) return x.toLocaleString("en");
    const a = Math.abs(x);
    return a >= 100 ? x.toFixed(1) : a >= 1 ? x.toFixed(3) : x.toPrecision(3);
  }
  function fmtSeconds(s) {
    if (typeof s !== "number") return String(s);
    if (s < 1e-3) return (s * 1e6).toFixed(1) + " µs";
    if (s < 1) return (s * 1e3).toFixed(3) + " ms";
    if (s < 120) return s.toFixed(2) + " s";
    return (s / 60).toFixed(1) + " min";
  }
  function fmtValue(key, v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "number") {
      if (/speedup$/.test(key)) return v.toFixed(2) + "×";
      if (key === "spread") return (v * 100).toFixed(1) + " % of the median (p10–p90)";
      if (/(_s|seconds)$/.test(key)) return fmtSeconds(v);
      if (/usd/.test(key)) return "$" + v.toFixed(4);
      if (/gbps$/.test(key)) return v.toFixed(2) + " GB/s";
      if (/gflops$/.test(key)) return v.toFixed(2) + " GFLOP/s";
      return fmtNum(v);
    }
    if (Array.isArray(v)) return v.map((x) => (typeof x === "object" ? JSON.stringify(x) : fmtValue(key, x))).join(", ");
    return String(v);
  }
  // A table of name/value rows; nested objects become "outer › inner" rows.
  function kvTable(obj, prefix, rows) {
    rows = rows || [];
    for (const k of Object.keys(obj || {}).sort()) {
      const v = obj[k], name = prefix ? prefix + " › " + k : k;
      if (v && typeof v === "object" && !Array.isArray(v)) kvTable(v, name, rows);
      else rows.push(el("tr", {}, el("th", {}, name), el("td", {}, fmtValue(k, v))));
    }
    if (prefix) return rows;
    const t = el("table", { class: "kv" });
    rows.forEach((r) => t.append(r));
    return t;
  }
  function diffPre(patch) {
    const pre = el("pre", { class: "diff" });
    for (const line of patch.split("\n")) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : null;
      pre.append(cls ? el("span", { class: cls }, line) : line + "\n");
    }
    return pre;
  }
  function toast(msg, isError) {
    const t = $("toast");
    t.textContent = msg;
    t.className = isError ? "error" : "";
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => (t.hidden = true), 5000);
  }

  // ---- the token for writes --------------------------------------------------
  function token() {
    const m = location.hash.match(/token=([0-9a-f]+)/);
    if (m) sessionStorage.setItem("mk-token", m[1]);
    let t = sessionStorage.getItem("mk-token");
    if (!t) {
      t = (prompt("Token printed by mkengine when it started (needed to answer and stop):") || "").trim();
      if (t) sessionStorage.setItem("mk-token", t);
    }
    return t;
  }
  async function post(path, body) {
    const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-MK-Token": token() || "" },
      body: JSON.stringify(body || {}) });
    let j = {};
    try { j = await r.json(); } catch (e) { j = { error: "bad reply" }; }
    if (r.status === 403) sessionStorage.removeItem("mk-token");
    return { status: r.status, body: j };
  }

  // ---- run state -------------------------------------------------------------
  const S = { id: "", nodes: [], byId: new Map(), children: new Map(), best: null, info: {}, curve: [], spent: {},
    selected: null, questions: [], layout: null, dirty: false, log: [] };

  function addNodes(list) {
    for (const n of list) {
      // a known node again: its kernel was measured again (the figure is the median of all)
      if (S.byId.has(n.id)) { const o = S.byId.get(n.id); for (const k of ["latency_s", "speedup", "measurements", "same_as"]) o[k] = n[k]; continue; }
      n.parents = arr(n.parents);
      S.nodes.push(n);
      S.byId.set(n.id, n);
      const p = n.parents[0];
      if (p) { if (!S.children.has(p)) S.children.set(p, []); S.children.get(p).push(n.id); }
    }
    $("node-count").textContent = S.nodes.length;
    renderList();
    schedule();
  }

  // Layered layout: depth = first parent's + 1; leaves in depth-first order,
  // a parent centred over its children. O(n), redone at most once a frame.
  function layout() {
    const depth = new Map(), x = new Map();
    let leaf = 0, maxDepth = 0;
    const roots = S.nodes.filter((n) => !n.parents.length || !S.byId.has(n.parents[0]));
    const stack = roots.slice().reverse().map((n) => [n.id, 0, false]);
    while (stack.length) {
      const [id, d, done] = stack.pop();
      const kids = S.children.get(id) || [];
      if (done) {
        x.set(id, kids.length ? (x.get(kids[0]) + x.get(kids[kids.length - 1])) / 2 : leaf++);
        continue;
      }
      depth.set(id, d);
      maxDepth = Math.max(maxDepth, d);
      stack.push([id, d, true]);
      for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i], d + 1, false]);
    }
    return { depth, x, leaves: Math.max(leaf, 1), maxDepth };
  }
  function bestPath() {
    const path = new Set();
    let n = S.best && S.byId.get(S.best);
    while (n && !path.has(n.id)) { path.add(n.id); n = S.byId.get(n.parents[0]); }
    return path;
  }
  function schedule() {
    if (S.dirty) return;
    S.dirty = true;
    requestAnimationFrame(() => { S.dirty = false; drawTree(); });
  }
  function drawTree() {
    const c = $("tree"), box = $("tree-box");
    // the layout changes only when nodes came (a selection just redraws)
    if (!S.layout || S.layoutN !== S.nodes.length) { S.layout = layout(); S.layoutN = S.nodes.length; }
    const L = S.layout;
    // a big graph is squeezed into a bounded canvas (nodes may overlap):
    // a canvas of tens of millions of pixels would make every redraw slow
    const big = S.nodes.length > 2000, pad = 20, MAXW = 3000, MAXH = 1600;
    const width = Math.max(box.clientWidth - 2, Math.min(MAXW, L.leaves * (big ? 3 : 16) + 2 * pad));
    const gapY = Math.min(big ? 26 : 54, (MAXH - 2 * pad) / Math.max(L.maxDepth, 1));
    const height = Math.max(200, L.maxDepth * gapY + 2 * pad);
    if (c.width !== width) c.width = width;
    if (c.height !== height) c.height = height;
    const sx = (width - 2 * pad) / Math.max(L.leaves - 1, 1);
    S.pos = (id) => [pad + (L.leaves === 1 ? (width - 2 * pad) / 2 : L.x.get(id) * sx), pad + L.depth.get(id) * gapY];
    const g = c.getContext("2d");
    g.clearRect(0, 0, width, height);
    const onBest = bestPath();
    g.lineWidth = 1;
    g.strokeStyle = "#c4cad3";
    g.beginPath();
    for (const n of S.nodes) {
      if (!L.depth.has(n.id)) continue;
      for (const p of n.parents) {
        if (!L.depth.has(p)) continue;
        const [x1, y1] = S.pos(p), [x2, y2] = S.pos(n.id);
        g.moveTo(x1, y1); g.lineTo(x2, y2);
      }
    }
    g.stroke();
    if (onBest.size > 1) {
      g.lineWidth = 3; g.strokeStyle = "#eab308"; g.beginPath();
      for (const id of onBest) {
        const n = S.byId.get(id), p = n.parents[0];
        if (p && onBest.has(p)) { const [x1, y1] = S.pos(p), [x2, y2] = S.pos(id); g.moveTo(x1, y1); g.lineTo(x2, y2); }
      }
      g.stroke();
    }
    const r = big ? 2 : 6;
    const byColour = new Map(); // one path per colour: 10,000 fills would be slow
    for (const n of S.nodes) {
      if (!L.depth.has(n.id)) continue;
      const col = color(n);
      if (!byColour.has(col)) byColour.set(col, []);
      byColour.get(col).push(n.id);
    }
    for (const [col, ids] of byColour) {
      g.fillStyle = col;
      g.beginPath();
      for (const id of ids) { const [x, y] = S.pos(id); g.moveTo(x + r, y); g.arc(x, y, r, 0, 7); }
      g.fill();
    }
    for (const id of [S.best, S.selected]) {
      if (!id || !L.depth.has(id)) continue;
      const [x, y] = S.pos(id);
      g.lineWidth = 2; g.strokeStyle = id === S.selected ? "#111827" : "#eab308";
      g.beginPath(); g.arc(x, y, r + 3, 0, 7); g.stroke();
    }
  }
  function legend() {
    const items = [["reference", COLORS.reference], ["correct", COLORS.ok], ["incorrect", COLORS.incorrect],
      ["compile error", COLORS.compile_error], ["crash / timeout", COLORS.runtime_error], ["best path", "#eab308"]];
    $("legend").replaceChildren(...items.map(([t, c]) => el("span", {}, el("i", { style: "background:" + c }), t)));
  }
  function hit(ev) {
    if (!S.layout || !S.pos) return null;
    const c = $("tree"), rect = c.getBoundingClientRect();
    const mx = (ev.clientX - rect.left) * (c.width / rect.width), my = (ev.clientY - rect.top) * (c.height / rect.height);
    let best = null, bd = 12 * 12;
    for (const n of S.nodes) {
      if (!S.layout.depth.has(n.id)) continue;
      const [x, y] = S.pos(n.id), d = (x - mx) ** 2 + (y - my) ** 2;
      if (d < bd) { bd = d; best = n.id; }
    }
    return best;
  }

  // ---- node list, curve, spend, log ------------------------------------------
  function speedupText(n) { return typeof n.speedup === "number" ? n.speedup.toFixed(2) + "×" + (n.same_as ? " = " + n.same_as : "") : "–"; }
  function renderList() {
    const body = $("node-list").tBodies[0];
    const last = S.nodes.slice(-40).reverse();
    body.replaceChildren(...last.map((n) => {
      const tr = el("tr", { "data-id": n.id, class: n.id === S.selected ? "selected" : "" },
        el("td", {}, n.id), el("td", {}, n.kind), el("td", {}, el("span", { class: "tag", style: "background:" + color(n) }, n.status)),
        el("td", {}, speedupText(n)), el("td", {}, typeof n.latency_s === "number" ? fmtSeconds(n.latency_s) : "–"),
        el("td", {}, n.parents.join(", ")));
      tr.onclick = () => select(n.id);
      return tr;
    }));
  }
  function renderCurve() {
    const svg = $("curve"), W = 420, H = 200, P = 34;
    const pts = S.curve;
    const parts = [];
    if (!pts.length) { svg.innerHTML = '<text x="140" y="100" fill="#6b7480">no correct node yet</text>'; return; }
    const maxX = Math.max(1, (S.spent.tokens || 0), ...pts.map((p) => p.tokens));
    const maxY = Math.max(1.1, ...pts.map((p) => p.speedup)) * 1.1;
    const X = (t) => P + (t / maxX) * (W - P - 10), Y = (s) => H - P + 10 - (s / maxY) * (H - P);
    let d = "";
    pts.forEach((p, i) => { d += (i ? "H" + X(p.tokens) + "V" : "M" + X(p.tokens) + " ") + Y(p.speedup); });
    d += "H" + X(maxX);
    parts.push(`<line x1="${P}" y1="${H - P + 10}" x2="${W - 10}" y2="${H - P + 10}" stroke="#9ca3af"/>`);
    parts.push(`<line x1="${P}" y1="10" x2="${P}" y2="${H - P + 10}" stroke="#9ca3af"/>`);
    parts.push(`<line x1="${P}" y1="${Y(1)}" x2="${W - 10}" y2="${Y(1)}" stroke="#e5e7eb" stroke-dasharray="4"/>`);
    parts.push(`<path d="${d}" fill="none" stroke="#1d4ed8" stroke-width="2"/>`);
    for (const p of pts) parts.push(`<circle cx="${X(p.tokens)}" cy="${Y(p.speedup)}" r="3" fill="#1d4ed8"><title>${p.id}: ${p.speedup.toFixed(2)}× at ${p.tokens} tokens</title></circle>`);
    parts.push(`<text x="${P}" y="${H - 4}" font-size="11" fill="#4b5563">0</text><text x="${W - 10}" y="${H - 4}" font-size="11" text-anchor="end" fill="#4b5563">${fmtNum(maxX)} tokens</text>`);
    parts.push(`<text x="${P - 4}" y="${Y(1) + 4}" font-size="11" text-anchor="end" fill="#4b5563">1×</text><text x="${P - 4}" y="16" font-size="11" text-anchor="end" fill="#4b5563">${(maxY / 1.1).toFixed(2)}×</text>`);
    svg.innerHTML = parts.join("");
  }
  function budgetOf() {
    let b = S.info.budget || (S.info.options && S.info.options.budget);
    if (typeof b === "string") {
      const o = {};
      for (const kv of b.split(",")) { const [k, v] = kv.split("="); if (k && v) o[k.trim()] = parseFloat(v); }
      b = o;
    }
    return b || {};
  }
  function renderSpend() {
    const s = S.spent || {}, b = budgetOf();
    const rows = [["tokens", s.tokens, b.tokens, fmtNum], ["USD", s.usd, b.usd, (v) => "$" + (v || 0).toFixed(4)],
      ["device time", s.device_s, b.device_s, fmtSeconds], ["wall time", s.wall_s, b.wall_s, fmtSeconds]];
    $("spend").replaceChildren(...rows.map(([name, used, lim, f]) => {
      const u = used || 0;
      const frac = lim ? Math.min(1, u / lim) : 0;
      return el("div", { class: "bar" }, el("div", {}, `${name}: ${f(u)}` + (lim ? ` of ${f(lim)} (${Math.round((u / lim) * 100)}%)` : " (no budget)")),
        lim ? el("div", { class: "track" }, el("div", { class: "fill" + (u > lim ? " over" : ""), style: `width:${frac * 100}%` })) : null);
    }));
  }
  function logEvent(e) {
    let text = null;
    if (e.type === "log") text = e.message;
    else if (e.type === "best") text = `new best ${e.id}: ${speedupText(S.byId.get(e.id) || e)}`;
    else if (e.type === "question") text = `question: ${e.title || e.kind}`;
    else if (e.type === "decision") text = `decision: ${e.verb}${e.choice ? " " + e.choice : ""} (by ${e.by})`;
    else if (e.type === "resume") text = "resumed";
    else if (e.type === "stopped") text = "stopped" + (e.reason ? ": " + e.reason : "");
    if (!text) return;
    const li = el("li", {}, `[${fmtSeconds(e.t || 0)}] ${text}`);
    $("log").append(li);
    while ($("log").children.length > 200) $("log").firstChild.remove();
    $("log").scrollTop = $("log").scrollHeight;
  }
  function renderHeader() {
    const i = S.info;
    // the simulated model (docs/simulator.md) is labelled on every page, as in every output
    const sim = /^sim(:|$)/.test(i.model || "") ? " — SIMULATION (simulated model and device)" : "";
    $("title").textContent = `${i.strategy || "run"} on ${i.task || "?"}${sim}`;
    document.title = `${i.strategy || "run"} on ${i.task || "?"} · mkengine`;
    const st = $("status");
    st.textContent = i.status || "?";
    st.className = "badge " + (i.status || "");
    const b = S.best && S.byId.get(S.best);
    $("best").textContent = b ? `${speedupText(b)} (${b.id})` : "–";
    $("stop").disabled = i.status !== "running";
  }

  // ---- the node panel --------------------------------------------------------
  function section(title, ...kids) { return [el("h3", {}, title), ...kids]; }
  async function select(id) {
    S.selected = id;
    renderList();
    schedule();
    requestAnimationFrame(() => { // bring the node into view in a wide tree
      const box = $("tree-box"), p = S.pos && S.layout && S.layout.depth.has(id) && S.pos(id);
      if (p && (p[0] < box.scrollLeft || p[0] > box.scrollLeft + box.clientWidth)) box.scrollLeft = p[0] - box.clientWidth / 2;
    });
    const panel = $("panel");
    panel.replaceChildren(el("p", { class: "muted" }, "loading " + id + " …"));
    const r = await fetch(`/api/node/${S.id}/${id}`);
    const d = await r.json();
    if (!r.ok) { panel.replaceChildren(el("p", {}, d.error || "cannot load the node")); return; }
    if (S.selected !== id) return;
    const parts = [el("h2", { id: "node-title" }, `${d.id} · ${d.kind} · `, el("span", { class: "tag", style: "background:" + color(d) }, d.status))];
    if (d.key) parts.push(el("div", { class: "muted" }, "step " + d.key));
    const metrics = Object.assign({}, d.metrics || {}), timing = metrics.timing;
    delete metrics.timing;
    parts.push(...section("metrics", kvTable(metrics)));
    if (timing) parts.push(el("details", {}, el("summary", {}, "where the evaluation time went"), kvTable(timing)));
    if (d.plan) parts.push(...section("plan", el("pre", { id: "node-plan" }, d.plan)));
    for (const f of arr(d.files)) parts.push(...section("code: " + f.name, el("pre", { class: "node-code" }, f.text || "")));
    if (d.diff) parts.push(...section(`diff against ${d.diff.parent} (+${d.diff.insertions || 0} −${d.diff.deletions || 0})`,
      Object.assign(diffPre(d.diff.patch || "(no change)"), { id: "node-diff" })));
    if (d.error) parts.push(...section("compile and test messages", el("pre", { id: "node-error" }, d.error)));
    if (d.profile) parts.push(...section("profile and roofline", el("pre", { id: "node-profile" }, d.profile)));
    if (d.direction) parts.push(...section("direction", el("p", {}, d.direction)));
    parts.push(...section("tokens and cost", kvTable(d.cost)));
    if (arr(d.knowledge).length) parts.push(...section("knowledge used", el("ul", {}, ...d.knowledge.map((k) => el("li", {}, `${k.title} (${k.file}:${k.line})`)))));
    if (Object.keys(d.meta || {}).length) parts.push(...section("other", kvTable(d.meta)));
    const prompts = arr(d.prompts);
    if (prompts.length) parts.push(...section("prompts (kept with the node)", ...prompts.map((p) =>
      el("details", {}, el("summary", {}, `${p.n}. ${p.agent || "model"}`), el("h3", {}, "prompt"), el("pre", {}, p.prompt || ""),
        el("h3", {}, "reply"), el("pre", {}, p.reply || "")))));
    panel.replaceChildren(...parts);
  }

  // ---- questions -------------------------------------------------------------
  function renderQuestions() {
    const box = $("questions");
    const q = S.questions[0];
    if (!q) { box.hidden = true; box.replaceChildren(); box.dataset.qid = ""; return; }
    if (box.dataset.qid === q.id) return; // keep what the person is typing
    box.dataset.qid = q.id;
    box.hidden = false;
    const kids = [el("h2", {}, "The run asks you: " + (q.title || q.kind)),
      S.questions.length > 1 ? el("div", { class: "muted" }, `${S.questions.length - 1} more waiting`) : null];
    const actions = el("div", { class: "actions" });
    const send = async (a) => {
      for (const b of actions.querySelectorAll("button")) b.disabled = true;
      const r = await post(`/api/run/${S.id}/answer`, Object.assign({ id: q.id }, a));
      if (r.status === 200) toast(`answered: ${a.verb}`);
      else if (r.status === 409) toast(`someone answered first: ${r.body.decision ? r.body.decision.verb : ""} (${r.body.error})`, true);
      else toast(r.body.error || "refused", true);
      if (r.status !== 200 && r.status !== 409) for (const b of actions.querySelectorAll("button")) b.disabled = false;
    };
    if (q.kind === "choose") {
      kids.push(el("p", {}, q.text || ""));
      arr(q.options).forEach((o, i) => kids.push(el("label", { class: "opt" },
        el("input", { type: "radio", name: "q-choice", value: o.id, ...(i === 0 ? { checked: "" } : {}) }), " " + (o.label || o.id))));
      actions.append(el("button", { class: "primary", id: "q-choose", onclick: () => {
        const c = box.querySelector("input[name=q-choice]:checked");
        send({ verb: "choose", choice: c && c.value });
      } }, "Expand this node"));
    } else {
      const ta = el("textarea", { id: "q-editor", spellcheck: "false" });
      ta.value = q.text || "";
      kids.push(ta);
      actions.append(el("button", { class: "primary", id: "q-accept", onclick: () => {
        if (q.kind === "review" && ta.value !== (q.text || "")) send({ verb: "edit", text: ta.value });
        else send({ verb: "accept" });
      } }, "Accept (with your edits)"));
      actions.append(el("button", { id: "q-reject", onclick: () => send({ verb: "reject" }) }, "Reject"));
    }
    actions.append(el("button", { class: "danger", id: "q-quit", onclick: () => send({ verb: "quit" }) }, "Quit the run"));
    kids.push(actions);
    box.replaceChildren(...kids.filter(Boolean));
  }

  // ---- the stream ------------------------------------------------------------
  function connect() {
    const es = new EventSource(`/api/live/${S.id}`);
    es.addEventListener("state", (m) => {
      const st = JSON.parse(m.data);
      S.nodes = []; S.byId.clear(); S.children.clear();
      S.info = st.info || {}; S.curve = arr(st.curve); S.spent = st.spent || {}; S.best = st.best;
      S.questions = arr(st.questions);
      addNodes(arr(st.nodes));
      renderHeader(); renderCurve(); renderSpend(); renderQuestions();
      $("conn").textContent = "live";
    });
    es.addEventListener("nodes", (m) => { addNodes(JSON.parse(m.data)); renderHeader(); });
    es.addEventListener("events", (m) => {
      const d = JSON.parse(m.data);
      S.curve = arr(d.curve); S.spent = d.spent || {}; S.best = d.best || S.best;
      arr(d.events).forEach(logEvent);
      renderCurve(); renderSpend(); renderHeader(); schedule();
    });
    es.addEventListener("info", (m) => { S.info = JSON.parse(m.data); renderHeader(); renderSpend(); });
    es.addEventListener("questions", (m) => { S.questions = arr(JSON.parse(m.data)); renderQuestions(); });
    es.onerror = () => { $("conn").textContent = "reconnecting…"; };
  }

  window.mkui = {
    run() {
      S.id = decodeURIComponent(location.pathname.replace(/^\/run\/?/, ""));
      legend();
      $("tree").onclick = (ev) => { const id = hit(ev); if (id) select(id); };
      $("stop").onclick = async () => {
        if (!confirm("Stop this run? It finishes with what it has found.")) return;
        const r = await post(`/api/run/${S.id}/stop`);
        toast(r.status === 200 ? "stopping: the run ends after the step in flight" : r.body.error || "refused", r.status !== 200);
      };
      window.addEventListener("resize", schedule);
      connect();
    },
    async index() {
      const r = await fetch("/api/runs");
      const d = await r.json();
      const runs = arr(d.runs);
      if (d.single !== undefined && d.single !== null) { location.replace("/run/" + d.single + location.hash); return; }
      $("empty").hidden = runs.length > 0;
      $("runs").tBodies[0].replaceChildren(...runs.map((x) => {
        const href = x.kind === "run" ? "/run/" + x.id + location.hash : "/report/" + x.id;
        const tr = el("tr", {}, el("td", {}, el("a", { href }, x.id || "(this run)")), el("td", {}, x.strategy || x.kind),
          el("td", {}, x.task || ""), el("td", {}, x.status || ""), el("td", {}, x.nodes != null ? x.nodes : ""),
          el("td", {}, typeof x.best === "number" ? x.best.toFixed(2) + "×" : ""), el("td", {}, x.pending ? x.pending + " question(s)" : ""),
          el("td", {}, x.started_at || ""));
        tr.onclick = () => (location.href = href);
        return tr;
      }));
    },
    // for tests and the console
    nodeCount: () => S.nodes.length,
    _draw: () => drawTree(), _layout: () => layout(), _list: () => renderList(),
    select,
    nodePos: (id) => {
      if (!S.pos || !S.layout || !S.layout.depth.has(id)) return null;
      const c = $("tree"), rect = c.getBoundingClientRect(), [x, y] = S.pos(id);
      return [rect.left + (x * rect.width) / c.width, rect.top + (y * rect.height) / c.height];
    },
  };
})();
