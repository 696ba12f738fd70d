// The sluice admin page: it polls the JSON API of the admin listener
// (/api/v1/config, rates, leases, budgets, denied, health, inspect, overrides) and draws it,
// and sets and removes runtime overrides. Every value
// from the server is written as text, never as markup.
"use strict";

const POLL_MS = 1500;
const RATE_SECONDS = 10; // rates shown are averages over this many seconds
const OUTCOMES = ["allowed", "denied", "shadowed", "degraded"];
const COLORS = { allowed: "#2f9e44", denied: "#e03131", shadowed: "#f08c00", degraded: "#7048e8" };

const state = { config: null, configAt: 0, charts: new Map(), inspect: null, latency: null };

// el builds an element: el("td", {class: "num"}, "text", child, ...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("data-") || k === "class" || k === "id" || k === "type" || k === "name" || k === "value" || k === "placeholder" || k === "title") {
      e.setAttribute(k, String(v));
    } else {
      e[k] = v;
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false || c === "") continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmtMS(ms) {
  if (ms <= 0) return "now";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + " s";
  const whole = Math.round(s), m = Math.floor(whole / 60), r = whole % 60;
  if (m < 60) return m + " min" + (r ? " " + r + " s" : "");
  return Math.floor(m / 60) + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
}

function fmtRate(n) {
  if (n === 0) return "0/s";
  if (n < 10) return n.toFixed(1) + "/s";
  return Math.round(n) + "/s";
}

function fmtTime(iso) {
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

async function api(path, init) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin", cache: "no-store" }, init));
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.detail || res.status + " " + res.statusText);
  return body;
}

// ---- configuration ----

function renderConfig(cfg) {
  document.getElementById("file").textContent = cfg.file || "(none)";
  document.getElementById("loaded").textContent = fmtTime(cfg.loaded_at);
  document.getElementById("store-kind").textContent = cfg.store;
  document.getElementById("top-keys").textContent = cfg.top_keys;
  const banner = document.getElementById("reload");
  if (cfg.reload && !cfg.reload.ok) {
    banner.hidden = false;
    banner.textContent = "The last reload of " + cfg.reload.file + " at " + fmtTime(cfg.reload.at) +
      " failed; the configuration loaded at " + fmtTime(cfg.loaded_at) + " stays in use.\n" + cfg.reload.error;
  } else {
    banner.hidden = true;
  }
  const list = document.getElementById("policy-list");
  const sig = JSON.stringify(cfg.policies);
  if (list.dataset.sig !== sig) {
    list.dataset.sig = sig;
    list.replaceChildren(...cfg.policies.map(policyCard));
    for (const c of state.charts.values()) c.destroy();
    state.charts.clear();
  }
  renderSchedules(cfg.schedules);
  renderTargets(cfg);
}

function statCell(key, outcome, label) {
  return el("div", { class: "stat " + outcome },
    el("span", { class: "k" }, label),
    el("span", { class: "v", "data-rate": key }, "–"),
    el("span", { class: "t", "data-stat": key, "data-total": 0 }, "0 total"));
}

function policyCard(p) {
  const head = el("div", { class: "head" }, el("h3", {}, p.name),
    p.shadow && el("span", { class: "badge shadow" }, "shadow"),
    p.penalize && el("span", { class: "badge" }, "penalize"),
    el("span", { class: "note" }, p.by.length ? "keyed by " + p.by.join(", ") : "one window"));
  const stats = el("div", { class: "stats" }, OUTCOMES.map(o => statCell(p.name + "||" + o, o, o)));
  // A concurrency rule's leases this server granted: in flight now, and
  // expired unreleased since it started (GET api/v1/leases).
  const leases = p.rules.filter(r => r.concurrency).map(r => {
    const key = p.name + "|" + r.name;
    return el("div", { class: "stat leases" }, el("span", { class: "k" }, r.name + ": leases of this server"),
      el("span", { class: "v", "data-in-flight": key, "data-n": 0 }, "–"), " in flight ",
      el("span", { class: "t", "data-expired": key, "data-n": 0 }, "–"), el("span", { class: "t" }, " expired unreleased"));
  });
  const rows = p.rules.map(r => el("tr", { "data-rule": p.name + "|" + r.name },
    el("td", {}, r.name, r.shadow && el("span", { class: "badge shadow" }, "shadow")),
    el("td", {}, r.by.length ? r.by.join(", ") : "—"),
    el("td", { class: "num" }, r.concurrency ? r.concurrency + " at once, lease " + fmtMS(r.lease_ms) : r.limit + " per " + fmtMS(r.window_ms)),
    el("td", {}, (r.concurrency ? "concurrency" : r.algorithm) + (r.burst ? " (burst " + r.burst + ")" : "")),
    el("td", { class: "num" }, r.min_gap_ms ? fmtMS(r.min_gap_ms) : "—"),
    el("td", { class: "num" }, el("span", { "data-rate": p.name + "|" + r.name + "|denied" }, "–"), " ",
      el("span", { class: "t", "data-stat": p.name + "|" + r.name + "|denied", "data-total": 0 }, "0")),
    el("td", { class: "num" }, el("span", { "data-rate": p.name + "|" + r.name + "|shadowed" }, "–"), " ",
      el("span", { class: "t", "data-stat": p.name + "|" + r.name + "|shadowed", "data-total": 0 }, "0"))));
  const table = el("table", {}, el("thead", {}, el("tr", {},
    el("th", {}, "rule"), el("th", {}, "by"), el("th", { class: "num" }, "limit"), el("th", {}, "algorithm"),
    el("th", { class: "num" }, "min gap"), el("th", { class: "num" }, "denied (rate, total)"),
    el("th", { class: "num" }, "shadow-denied (rate, total)"))), el("tbody", {}, rows));
  const chart = el("div", { class: "chart", "data-chart": p.name });
  // A budgeted rule's slices this server holds (GET api/v1/budgets).
  const budgets = p.rules.filter(r => r.budget_ms).map(r => el("div", { class: "slices" },
    el("h4", {}, r.name + ": slices held by this server (budget " + fmtMS(r.budget_ms) + ")"),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "window"), el("th", { class: "num" }, "size"),
      el("th", { class: "num" }, "used"), el("th", { class: "num" }, "time left"))),
      el("tbody", { "data-slices": p.name + "|" + r.name }, el("tr", {}, el("td", { colSpan: 4, class: "note" }, "none"))))));
  return el("div", { class: "policy", "data-policy": p.name }, head, stats,
    leases.length ? el("div", { class: "stats" }, leases) : null, el("div", { class: "row" }, table, chart), budgets);
}

// renderBudgets writes each budgeted rule's slices held by this server
// into its policy's card.
function renderBudgets(b) {
  const byRule = new Map();
  for (const s of b.slices) {
    const key = s.policy + "|" + s.rule;
    if (!byRule.has(key)) byRule.set(key, []);
    byRule.get(key).push(s);
  }
  for (const body of document.querySelectorAll("[data-slices]")) {
    const held = byRule.get(body.dataset.slices) || [];
    body.replaceChildren(...(held.length ? held.map(s => el("tr", { "data-slice": s.values.join(",") },
      el("td", {}, s.values.length ? s.values.join(", ") : "(one window)"),
      el("td", { class: "num" }, s.granted), el("td", { class: "num" }, s.used),
      el("td", { class: "num" }, fmtMS(s.left_ms)))) :
      [el("tr", {}, el("td", { colSpan: 4, class: "note" }, "none"))]));
  }
}

// renderLeases writes each concurrency rule's leases in flight and expired
// unreleased into its policy's card.
function renderLeases(l) {
  const figures = new Map(l.rules.map(r => [r.policy + "|" + r.rule, r]));
  for (const e of document.querySelectorAll("[data-in-flight]")) {
    const r = figures.get(e.dataset.inFlight);
    e.dataset.n = r ? r.in_flight : 0;
    e.textContent = r ? r.in_flight : 0;
  }
  for (const e of document.querySelectorAll("[data-expired]")) {
    const r = figures.get(e.dataset.expired);
    e.dataset.n = r ? r.expired : 0;
    e.textContent = r ? r.expired : 0;
  }
}

function renderSchedules(schedules) {
  const list = document.getElementById("schedule-list");
  if (!schedules.length) {
    list.replaceChildren(el("p", { class: "empty" }, "No schedules."));
    return;
  }
  list.replaceChildren(el("table", {}, el("thead", {}, el("tr", {},
    el("th", {}, "schedule"), el("th", {}, "by"), el("th", {}, "rate"), el("th", { class: "num" }, "interval"),
    el("th", { class: "num" }, "max delay"), el("th", { class: "num" }, "max queue"))),
  el("tbody", {}, schedules.map(s => el("tr", { "data-schedule": s.name },
    el("td", {}, s.name), el("td", {}, s.by.length ? s.by.join(", ") : "—"), el("td", {}, s.rate),
    el("td", { class: "num" }, s.interval_ms.toFixed(1) + " ms"), el("td", { class: "num" }, fmtMS(s.max_delay_ms)),
    el("td", { class: "num" }, s.max_queue || "none"))))));
}

// ---- rates ----

function renderRates(r) {
  // Sums per policy and outcome, and per policy, rule and outcome.
  const totals = new Map(), recent = new Map(), perSecond = new Map();
  const add = (m, k, v) => m.set(k, (m.get(k) || 0) + v);
  for (const s of r.series) {
    const last = s.per_second.slice(-RATE_SECONDS).reduce((a, b) => a + b, 0);
    const keys = [s.policy + "||" + s.outcome];
    if (s.rule) keys.push(s.policy + "|" + s.rule + "|" + s.outcome);
    for (const k of keys) {
      add(totals, k, s.total);
      add(recent, k, last);
    }
    const pk = s.policy + "||" + s.outcome;
    const arr = perSecond.get(pk) || new Array(r.seconds).fill(0);
    s.per_second.forEach((v, i) => { arr[i] += v; });
    perSecond.set(pk, arr);
  }
  for (const e of document.querySelectorAll("[data-stat]")) {
    const k = e.dataset.stat, t = totals.get(k) || 0;
    e.dataset.total = t;
    e.textContent = e.parentElement.classList.contains("stat") ? t + " total" : "(" + t + ")";
  }
  for (const e of document.querySelectorAll("[data-rate]")) {
    e.textContent = fmtRate((recent.get(e.dataset.rate) || 0) / RATE_SECONDS);
  }
  const xs = Array.from({ length: r.seconds }, (_, i) => r.start + i);
  for (const box of document.querySelectorAll("[data-chart]")) {
    const p = box.dataset.chart;
    const data = [xs, ...OUTCOMES.map(o => perSecond.get(p + "||" + o) || new Array(r.seconds).fill(0))];
    let c = state.charts.get(p);
    if (!c && window.uPlot) {
      c = new uPlot({
        width: 520, height: 160, legend: { show: true },
        scales: { y: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
        series: [{}, ...OUTCOMES.map(o => ({ label: o + "/s", stroke: COLORS[o], width: 1.5 }))],
        axes: [{}, { size: 40 }],
      }, data, box);
      state.charts.set(p, c);
    } else if (c) {
      c.setData(data);
    }
  }
}

// ---- denied keys ----

function renderDenied(d) {
  const list = document.getElementById("denied-list");
  const rules = d.rules.filter(r => r.keys.length);
  if (!rules.length) {
    list.replaceChildren(el("p", { class: "empty" }, "No key has been denied in the last 5 minutes."));
    return;
  }
  list.replaceChildren(...rules.map(r => {
    const by = r.by && r.by.length ? r.by : null;
    return el("div", { class: "rule-denied", "data-denied-rule": r.policy + "|" + r.rule },
      el("h3", {}, r.policy + " / " + r.rule),
      el("div", { class: "note" }, r.denials + " denials seen, " + r.cached + " of them answered by the deny cache; showing " +
        r.keys.length + " of at most " + r.capacity + " keys"),
      el("table", {}, el("thead", {}, el("tr", {},
        el("th", {}, by ? by.join(", ") : "key"), el("th", { class: "num" }, "denials"),
        el("th", { class: "num" }, "from the deny cache"), el("th", {}, "last denied"),
        el("th", { class: "num" }, "let through in"), el("th", {}, ""))),
      el("tbody", {}, r.keys.map(k => {
        const label = k.values.length ? k.values.join(", ") : "(one window)";
        return el("tr", { "data-denied": r.policy + "|" + r.rule + "|" + k.values.join(","), "data-wait-ms": k.wait_ms,
          "data-count": k.count, "data-cached": k.cached },
          el("td", {}, label, k.truncated ? " (cut)" : "", k.shadow ? el("span", { class: "badge shadow" }, "shadow") : null),
          el("td", { class: "num count" }, k.count + (k.error ? " ±" + k.error : "")),
          el("td", { class: "num cached" }, k.cached),
          el("td", {}, fmtTime(k.last_denied)),
          el("td", { class: "num wait" + (k.wait_ms > 0 ? "" : " free"), "data-wait-ms": k.wait_ms }, fmtMS(k.wait_ms)),
          el("td", {}, by && !k.truncated ? el("button", {
            type: "button", onclick: () => inspectKey(r.policy, Object.fromEntries(by.map((a, i) => [a, k.values[i]]))),
          }, "inspect") : null));
      }))));
  }));
}

// ---- health ----

function renderHealth(h) {
  document.getElementById("ping").textContent = h.ping_error ? "failing" : h.ping_ms.toFixed(2) + " ms";
  const b = document.getElementById("breaker");
  b.textContent = h.breaker.replace("_", "-");
  b.className = "value " + h.breaker;
  document.getElementById("degraded-minute").textContent = h.degraded_last_minute;
  document.getElementById("degraded-total").textContent = h.degraded;
  document.getElementById("last-error").textContent =
    (h.ping_error ? "ping: " + h.ping_error + ". " : "") +
    (h.consecutive_failures ? h.consecutive_failures + " store calls failed in a row. " : "") +
    (h.last_error ? "Latest store error: " + h.last_error : "");
  const xs = h.latency.map((_, i) => h.start + i);
  const data = [xs, h.latency.map(l => l.calls ? l.mean_ms : null), h.latency.map(l => l.calls ? l.max_ms : null),
    h.latency.map(l => l.errors)];
  if (!state.latency && window.uPlot) {
    state.latency = new uPlot({
      width: 720, height: 150, title: "store calls: latency (ms) and errors per second",
      series: [{}, { label: "mean ms", stroke: "#1c7ed6", spanGaps: false }, { label: "max ms", stroke: "#74c0fc" },
        { label: "errors/s", stroke: "#e03131", scale: "n" }],
      axes: [{}, { size: 50 }, { scale: "n", side: 1, size: 40 }],
      scales: { n: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
    }, data, document.getElementById("latency-chart"));
  } else if (state.latency) {
    state.latency.setData(data);
  }
}

// ---- inspector ----

function renderTargets(cfg) {
  const sel = document.getElementById("inspect-target");
  const opts = [...cfg.policies.map(p => ["policy", p.name, p.by]), ...cfg.schedules.map(s => ["schedule", s.name, s.by])];
  const sig = JSON.stringify(opts);
  if (sel.dataset.sig === sig) return;
  sel.dataset.sig = sig;
  const cur = sel.value;
  sel.replaceChildren(...opts.map(([kind, name, by]) =>
    el("option", { value: kind + ":" + name, "data-by": JSON.stringify(by) }, kind + " " + name)));
  if (cur && [...sel.options].some(o => o.value === cur)) sel.value = cur;
  renderAttrInputs();
}

function renderAttrInputs(values) {
  const sel = document.getElementById("inspect-target");
  const opt = sel.selectedOptions[0];
  const by = opt ? JSON.parse(opt.dataset.by) : [];
  const box = document.getElementById("inspect-attrs");
  box.replaceChildren(...by.map(a => el("label", {}, a + " ",
    el("input", { type: "text", name: a, "data-attr": a, value: (values && values[a]) || "" }))));
}

function inspectKey(policy, attrs) {
  const sel = document.getElementById("inspect-target");
  sel.value = "policy:" + policy;
  renderAttrInputs(attrs);
  runInspect();
}

async function runInspect() {
  const sel = document.getElementById("inspect-target");
  if (!sel.value) return;
  const [kind, ...rest] = sel.value.split(":");
  const name = rest.join(":");
  const attributes = {};
  for (const i of document.querySelectorAll("#inspect-attrs input")) {
    if (i.value !== "") attributes[i.dataset.attr] = i.value;
  }
  state.inspect = { [kind]: name, attributes };
  await refreshInspect();
}

async function refreshInspect() {
  if (!state.inspect) return;
  const out = document.getElementById("inspect-result");
  try {
    const res = await api("api/v1/inspect", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(state.inspect) });
    out.replaceChildren(res.queue || res.schedule ? renderQueue(res) : renderWindows(res));
  } catch (e) {
    out.replaceChildren(el("p", { class: "error" }, e.message));
  }
}

function renderWindows(res) {
  const n = res.next;
  const verdict = n.allowed ? "A request of cost 1 now would be allowed." :
    "A request of cost 1 now would be denied by " + n.denied_by + " (" + n.cause + "); retry in " + fmtMS(n.retry_after_ms) + ".";
  const parts = [el("p", { "data-verdict": n.allowed ? "allowed" : "denied" }, verdict,
    res.error ? el("span", { class: "error" }, " " + res.error) : null)];
  if (!res.windows.length) parts.push(el("p", { class: "empty" }, "No rule of " + res.policy + " applies to these attributes."));
  if (!res.entries_shown && res.windows.length) {
    parts.push(el("p", { class: "note" }, "This store shows each window's figures; the entries themselves, and a concurrency rule's leases, are shown for the Redis store."));
  }
  for (const w of res.windows) {
    if (w.algorithm === "concurrency") {
      parts.push(leaseWindow(res, w));
      continue;
    }
    const head = w.rule + ": " + w.used + " of " + w.limit + " used per " + fmtMS(w.window_ms) + " (" + w.algorithm + ")" +
      (w.remaining >= 0 ? ", " + w.remaining + " left" : "") +
      (w.retry_after_ms ? ", full for " + fmtMS(w.retry_after_ms) : "") +
      (w.min_gap_ms ? ", min gap " + fmtMS(w.min_gap_ms) + (w.gap_left_ms ? " (" + fmtMS(w.gap_left_ms) + " left)" : " (passed)") : "") +
      ", empty in " + fmtMS(w.reset_after_ms);
    const box = el("div", { class: "window", "data-window": w.rule }, el("h3", {}, head));
    if (w.key) box.append(el("div", { class: "note" }, "key ", el("code", {}, w.key), w.ttl_ms > 0 ? ", expires in " + fmtMS(w.ttl_ms) : ""));
    if (w.slices) box.append(sliceList(res, w));
    if (w.algorithm === "calendar") box.append(usageLink(res, w));
    if (res.entries_shown) {
      box.append(timeline(w));
      box.append(el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "recorded"),
        el("th", { class: "num" }, "age"), el("th", { class: "num" }, "cost"), el("th", { class: "num" }, "leaves the window in"))),
      el("tbody", {}, w.entries.map((e, i) => el("tr", { "data-entry": i, "data-cost": e.cost, "data-leaves-ms": e.leaves_in_ms },
        el("td", { class: "num" }, i + 1), el("td", {}, fmtTime(e.time)), el("td", { class: "num" }, fmtMS(e.age_ms)),
        el("td", { class: "num" }, e.cost), el("td", { class: "num" }, e.counts ? fmtMS(e.leaves_in_ms) : "left (kept for the gap)"))))));
    }
    parts.push(box);
  }
  return el("div", {}, parts);
}

// usageLink links a calendar quota's window to its chart of periods
// (GET usage, drawn by the server).
function usageLink(res, w) {
  const q = new URLSearchParams(state.inspect.attributes || {});
  q.set("policy", res.policy);
  q.set("rule", w.rule);
  return el("div", { class: "note" }, el("a", { href: "usage?" + q.toString(), "data-usage-link": w.rule }, "usage by period"));
}

// sliceList shows the slices leased from a budgeted rule's window that
// count now (every process's on Redis, this server's on memory): their
// units, which its used counts, and when each ends.
function sliceList(res, w) {
  const whose = res.entries_shown ? "" : " by this server";
  const box = el("div", { class: "slices", "data-slices": w.slices.length, "data-sliced": w.sliced },
    el("p", {}, w.slices.length + " slices leased" + whose + ", " + w.sliced + " units, counted in its use"));
  if (!w.slices.length) return box;
  box.append(el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", { class: "num" }, "units"),
    el("th", {}, "ends"), el("th", { class: "num" }, "ends in"))),
  el("tbody", {}, w.slices.map((s, i) => el("tr", { "data-slice": i, "data-units": s.units, "data-ends-ms": s.ends_in_ms },
    el("td", { class: "num" }, i + 1), el("td", { class: "num" }, s.units), el("td", {}, fmtTime(s.ends)),
    el("td", { class: "num" }, s.ends_in_ms > 0 ? fmtMS(s.ends_in_ms) : "ended, counts until it leaves the window"))))));
  return box;
}

// leaseWindow shows a concurrency rule's window: its leases alive of the
// most it admits, and on Redis each lease's token and when it expires.
function leaseWindow(res, w) {
  const alive = w.alive ?? w.used;
  const head = w.rule + ": " + alive + " of " + w.limit + " leases alive (concurrency, lease " + fmtMS(w.window_ms) + ")" +
    (w.retry_after_ms ? ", full until the earliest expires in " + fmtMS(w.retry_after_ms) : ", " + (w.limit - alive) + " free");
  const box = el("div", { class: "window", "data-window": w.rule, "data-alive": alive }, el("h3", {}, head));
  if (w.key) box.append(el("div", { class: "note" }, "key ", el("code", {}, w.key), w.ttl_ms > 0 ? ", expires in " + fmtMS(w.ttl_ms) : ""));
  if (!res.entries_shown) return box;
  const leases = w.leases || [];
  if (!leases.length) {
    box.append(el("p", { class: "empty" }, "No lease alive."));
    return box;
  }
  box.append(el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "lease token"),
    el("th", {}, "expires"), el("th", { class: "num" }, "expires in"))),
  el("tbody", {}, leases.map((l, i) => el("tr", { "data-lease": l.token, "data-expires-ms": l.expires_in_ms },
    el("td", { class: "num" }, i + 1), el("td", {}, el("code", {}, l.token)), el("td", {}, fmtTime(l.expires)),
    el("td", { class: "num" }, fmtMS(l.expires_in_ms)))))));
  return box;
}

// timeline draws a window on a time axis from one window ago to one window
// ahead: each entry where it was recorded, with a bar to when it leaves.
function timeline(w) {
  const W = 760, H = 40 + 14 * Math.min(w.entries.length, 20), L = 20, R = W - 20;
  const span = w.window_ms;
  const x = t => L + (R - L) * (t + span) / (2 * span); // t: ms from now
  const svg = svgEl("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
  svg.append(svgEl("rect", { x: x(-span), y: 4, width: x(0) - x(-span), height: H - 24, fill: "#e7f5ff" }));
  svg.append(svgEl("line", { x1: x(0), x2: x(0), y1: 0, y2: H - 18, stroke: "#1d232b" }));
  svg.append(svgEl("text", { x: x(0) + 3, y: H - 6, "font-size": 11 }, "now"));
  svg.append(svgEl("text", { x: L, y: H - 6, "font-size": 11 }, "-" + fmtMS(span)));
  svg.append(svgEl("text", { x: R - 50, y: H - 6, "font-size": 11 }, "+" + fmtMS(span)));
  w.entries.slice(-20).forEach((e, i) => {
    const y = 12 + i * 14;
    const t0 = -e.age_ms, t1 = t0 + span;
    svg.append(svgEl("line", { x1: x(t0), x2: x(Math.min(t1, span)), y1: y, y2: y, stroke: e.counts ? "#e03131" : "#adb5bd", "stroke-width": 3 }));
    svg.append(svgEl("circle", { cx: x(t0), cy: y, r: 4, fill: "#1d232b" }));
    svg.append(svgEl("title", {}, "cost " + e.cost + ", leaves in " + fmtMS(e.leaves_in_ms)));
  });
  if (w.min_gap_ms && w.entries.length) {
    const last = w.entries[w.entries.length - 1];
    const g = x(-last.age_ms + w.min_gap_ms);
    svg.append(svgEl("line", { x1: g, x2: g, y1: 0, y2: H - 18, stroke: "#f08c00", "stroke-dasharray": "4 3" }));
    svg.append(svgEl("text", { x: g + 3, y: 10, "font-size": 10, fill: "#f08c00" }, "gap ends"));
  }
  return svg;
}

function renderQueue(res) {
  const parts = [];
  if (res.error) parts.push(el("p", { class: "error" }, res.error));
  const q = res.queue;
  if (!q) return el("div", {}, parts);
  parts.push(el("p", {}, q.pending + " reservations pending; a reservation now would wait " + fmtMS(q.next_delay_ms) +
    " (max delay " + fmtMS(q.max_delay_ms) + ", one every " + q.interval_ms.toFixed(1) + " ms)"));
  const W = 760, H = 50, L = 20, R = W - 20, span = Math.max(q.max_delay_ms, 1000);
  const x = t => L + (R - L) * (t + span * 0.1) / (span * 1.1);
  const svg = svgEl("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
  svg.append(svgEl("line", { x1: x(0), x2: x(0), y1: 0, y2: H - 14, stroke: "#1d232b" }));
  svg.append(svgEl("line", { x1: x(q.max_delay_ms), x2: x(q.max_delay_ms), y1: 0, y2: H - 14, stroke: "#e03131", "stroke-dasharray": "4 3" }));
  svg.append(svgEl("text", { x: x(0) + 3, y: H - 2, "font-size": 11 }, "now"));
  svg.append(svgEl("text", { x: x(q.max_delay_ms) - 60, y: H - 2, "font-size": 11 }, "max delay"));
  for (const s of q.slots) {
    svg.append(svgEl("rect", { x: x(s.in_ms), y: 8, width: Math.max(2, x(s.in_ms + s.length_ms) - x(s.in_ms) - 1), height: 20,
      fill: s.in_ms >= 0 ? "#1c7ed6" : "#adb5bd" }));
  }
  parts.push(svg);
  parts.push(el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "slot"), el("th", { class: "num" }, "in"), el("th", { class: "num" }, "holds"), el("th", {}, "id"))),
    el("tbody", {}, q.slots.map(s => el("tr", { "data-slot": s.id }, el("td", {}, fmtTime(s.slot)),
      el("td", { class: "num" }, s.in_ms >= 0 ? fmtMS(s.in_ms) : "passed"), el("td", { class: "num" }, s.length_ms.toFixed(1) + " ms"),
      el("td", {}, el("code", {}, s.id)))))));
  return el("div", {}, parts);
}

// The Envoy configuration's source (GET api/v1/envoy/config): a directory,
// or an xDS control plane with the version in use and the last one refused.
// A listener without Envoy's routes answers 404: nothing is shown.
async function renderEnvoy() {
  const span = document.getElementById("envoy-source");
  let e;
  try { e = await api("api/v1/envoy/config"); } catch (_) { span.hidden = true; return; }
  if (e.source === "xds") {
    let text = "xDS " + e.server + ", " + (e.version ? "version " + e.version : "no version yet") + (e.connected ? "" : " (disconnected)");
    if (e.rejected) text += "; version " + e.rejected + " refused: " + e.rejected_error;
    document.getElementById("envoy").textContent = text;
  } else if (e.dir) {
    document.getElementById("envoy").textContent = "files " + e.dir;
  } else {
    span.hidden = true;
    return;
  }
  span.hidden = false;
}

// ---- runtime overrides ----

// overrideTargetName is how the form and the list name a rule an override
// may apply to.
function overrideTargetName(t) {
  return (t.domain ? "domain " + t.domain : "policy " + t.policy) + " / " + t.rule;
}

function renderOverrides(l) {
  const section = document.getElementById("overrides");
  section.hidden = false;
  const canWrite = state.config.access === "write";
  document.getElementById("override-set").disabled = !canWrite;
  const sel = document.getElementById("override-target");
  const sig = JSON.stringify(l.targets);
  if (sel.dataset.sig !== sig) {
    sel.dataset.sig = sig;
    const cur = sel.value;
    sel.replaceChildren(...l.targets.map(t => el("option", {
      value: JSON.stringify({ policy: t.policy, domain: t.domain, rule: t.rule }), "data-by": JSON.stringify(t.by),
    }, overrideTargetName(t) + " (" + t.limit + " per " + t.window + ")")));
    if (cur && [...sel.options].some(o => o.value === cur)) sel.value = cur;
    renderOverrideInputs();
  }
  const status = document.getElementById("override-status");
  status.dataset.stale = l.stale;
  if (l.stale) {
    status.textContent = "The store does not answer (" + l.error + "); this server applies the overrides it read last.";
  } else if (!status.dataset.message) {
    status.textContent = l.overrides.length + " of at most " + l.max + " overrides" + (canWrite ? "" : "; this token may only read them");
  }
  const list = document.getElementById("override-list");
  if (!l.overrides.length) {
    list.replaceChildren(el("p", { class: "empty" }, "No runtime override: every rule has the file's limits."));
    return;
  }
  list.replaceChildren(el("table", {}, el("thead", {}, el("tr", {},
    el("th", {}, "rule"), el("th", {}, "values"), el("th", { class: "num" }, "limit"), el("th", {}, "until"),
    el("th", {}, "set by"), el("th", {}, "reason"), el("th", {}, "state"), el("th", {}, ""))),
  el("tbody", {}, l.overrides.map(o => {
    const limit = o.limit === 0 ? "blocked" : o.limit + (o.window ? " per " + o.window : "") +
      (o.burst ? ", burst " + o.burst : "") + (o.min_gap ? ", min gap " + o.min_gap : "");
    const st = o.problem ? "not applied: " + o.problem : o.expired ? "ended" : "active";
    return el("tr", { "data-override": o.id, "data-limit": o.limit, "data-state": o.active ? "active" : "inactive",
      class: o.active ? "" : "inactive" },
      el("td", {}, overrideTargetName(o)), el("td", {}, el("code", {}, o.values.join(", ") || "(one window)")),
      el("td", { class: "num" }, limit), el("td", {}, o.until ? fmtTime(o.until) : "for good"),
      el("td", {}, o.set_by + " at " + fmtTime(o.set_at)), el("td", {}, o.reason || ""), el("td", {}, st),
      el("td", {}, canWrite && !o.expired ? el("button", { type: "button", class: "remove", "data-remove": o.id, onclick: () => removeOverride(o.id) }, "remove") : null));
  }))));
}

function renderOverrideInputs() {
  const opt = document.getElementById("override-target").selectedOptions[0];
  const by = opt ? JSON.parse(opt.dataset.by) : [];
  document.getElementById("override-values").replaceChildren(...by.map(a => el("label", {}, a + " ",
    el("input", { type: "text", "data-attr": a, placeholder: "value or prefix*" }))));
}

function overrideMessage(text, error) {
  const status = document.getElementById("override-status");
  status.textContent = text;
  status.dataset.message = text;
  status.className = error ? "note error" : "note";
}

async function setOverride() {
  const sel = document.getElementById("override-target");
  if (!sel.value) return;
  const body = JSON.parse(sel.value);
  body.values = [...document.querySelectorAll("#override-values input")].map(i => i.value);
  if (document.getElementById("override-blocked").checked) {
    body.blocked = true;
  } else {
    const limit = document.getElementById("override-limit").value.trim();
    if (!/^[0-9]+$/.test(limit)) {
      overrideMessage("Give the limit as a whole number, or tick blocked.", true);
      return;
    }
    body.limit = Number(limit);
  }
  const forText = document.getElementById("override-for").value.trim();
  if (forText) body.for = forText;
  const reason = document.getElementById("override-reason").value.trim();
  if (reason) body.reason = reason;
  try {
    const o = await api("api/v1/overrides", { method: "PUT", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    overrideMessage("Set " + o.id + ".", false);
    await refreshOverrides();
  } catch (e) {
    overrideMessage("Not set: " + e.message, true);
  }
}

async function removeOverride(id) {
  try {
    await api("api/v1/overrides/" + encodeURIComponent(id), { method: "DELETE" });
    overrideMessage("Removed " + id + "; the rule's own limits apply to its keys again.", false);
    await refreshOverrides();
  } catch (e) {
    overrideMessage("Not removed: " + e.message, true); // an override that ended may be gone from the store already
    await refreshOverrides().catch(() => {});
  }
}

async function refreshOverrides() {
  if (!state.config || !state.config.overrides) return;
  renderOverrides(await api("api/v1/overrides"));
}

// ---- the loop ----

async function tick() {
  const live = document.getElementById("live");
  try {
    const now = Date.now();
    if (!state.config || now - state.configAt > 5000) {
      state.config = await api("api/v1/config");
      state.configAt = now;
      renderConfig(state.config);
      await renderEnvoy();
    }
    const [rates, leases, budgets, denied, health] = await Promise.all([api("api/v1/rates"), api("api/v1/leases"), api("api/v1/budgets"),
      api("api/v1/denied"), api("api/v1/health")]);
    renderRates(rates);
    renderLeases(leases);
    renderBudgets(budgets);
    renderDenied(denied);
    renderHealth(health);
    await refreshOverrides();
    if (document.getElementById("inspect-follow").checked) await refreshInspect();
    live.textContent = "live";
    live.className = "pill ok";
    document.body.dataset.updated = health.now;
  } catch (e) {
    live.textContent = "not updating: " + e.message;
    live.className = "pill bad";
  }
  setTimeout(tick, POLL_MS);
}

document.getElementById("inspect-target").addEventListener("change", () => renderAttrInputs());
document.getElementById("inspect-form").addEventListener("submit", ev => { ev.preventDefault(); runInspect(); });
document.getElementById("override-target").addEventListener("change", () => renderOverrideInputs());
document.getElementById("override-form").addEventListener("submit", ev => { ev.preventDefault(); setOverride(); });
tick();
