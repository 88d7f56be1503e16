// Comparisons between the variants, and the table and plot of a result.
import { fitRatio, maxAbsDiff } from "./compare.mjs";
import { $, COLORS } from "./common.js";

export function compare(cfg, variants, tjs, wllama) {
  const by = Object.fromEntries(variants.map((v) => [v.variant, v]));
  const ratios = [];
  const base = by.stock;
  for (const v of variants) {
    if (!base || v === base) continue;
    ratios.push({
      what: `${v.variant} vs stock`, faster: v.variant, slower: "stock",
      per_length: base.median_ms.map((m, i) => m / v.median_ms[i]),
      at_45_tokens_by_fit: fitRatio(base.fit, v.fit),
      max_abs_dp: Math.max(...v.probs.map((p, i) => maxAbsDiff(p, base.probs[i]))),
      bytes_read_back: { [v.variant]: v.bytes_read_back, stock: base.bytes_read_back },
    });
  }
  if (tjs) {
    for (const v of variants) {
      ratios.push({
        what: `${v.variant} vs transformers.js`, faster: v.variant, slower: "transformers.js",
        per_length: tjs.median_ms.map((m, i) => m / v.median_ms[i]),
        at_45_tokens_by_fit: fitRatio(tjs.fit, v.fit),
        max_abs_dp: Math.max(...v.probs.map((p, i) => maxAbsDiff(p, tjs.probs[i]))),
        bytes_read_back: { [v.variant]: v.bytes_read_back, "transformers.js": tjs.bytes_read_back },
      });
    }
  }
  // wllama reads other weights (its own GGUF's Q4_1, not our files) and its
  // top tokens rather than our letters: the times compare, the probabilities do not.
  if (wllama) {
    for (const v of variants) {
      ratios.push({
        what: `${v.variant} vs wllama`, faster: v.variant, slower: "wllama",
        per_length: wllama.median_ms.map((m, i) => m / v.median_ms[i]),
        at_45_tokens_by_fit: fitRatio(wllama.fit, v.fit),
        max_abs_dp: null,
        bytes_read_back: { [v.variant]: v.bytes_read_back },
      });
    }
  }
  return ratios;
}

function fmt(x, d = 1) {
  return x == null || Number.isNaN(x) ? "—" : x.toFixed(d);
}

export function render(result) {
  const { lengths } = result;
  const rows = [...result.variants, ...(result.transformers ? [result.transformers] : []), ...(result.wllama ? [result.wllama] : [])];
  const t = $("table");
  t.innerHTML = `<thead><tr><th>variant</th>${lengths.map((n) => `<th>n=${n}</th>`).join("")}<th>fixed ms</th><th>ms / token</th><th>R²</th><th>bytes back (n=${lengths.at(-1)})</th></tr></thead>`;
  const body = document.createElement("tbody");
  for (const v of rows) {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td><span class="swatch" style="background:${COLORS[v.variant]}"></span>${v.variant === "transformers.js" ? "transformers.js (stock)" : v.variant === "wllama" ? `wllama ${v.version} (${v.id})` : v.id}</td>` +
      v.median_ms.map((m) => `<td class="num">${fmt(m)}</td>`).join("") +
      `<td class="num">${fmt(v.fit?.fixed_ms)}</td><td class="num">${fmt(v.fit?.per_token_ms, 2)}</td><td class="num">${fmt(v.fit?.r2, 4)}</td><td class="num">${(v.bytes_read_back.at(-1) ?? 0).toLocaleString()}</td>`;
    body.append(tr);
  }
  t.append(body);
  const r = $("ratios");
  r.innerHTML = `<thead><tr><th>comparison (× faster)</th>${lengths.map((n) => `<th>n=${n}</th>`).join("")}<th>45 by fit</th><th>max |Δp|</th></tr></thead>`;
  const rb = document.createElement("tbody");
  for (const c of result.ratios) {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>${c.what}</td>${c.per_length.map((x) => `<td class="num">${fmt(x, 2)}×</td>`).join("")}<td class="num">${fmt(c.at_45_tokens_by_fit, 2)}×</td><td class="num">${c.max_abs_dp == null ? "other weights" : c.max_abs_dp.toExponential(1)}</td>`;
    rb.append(tr);
  }
  if (result.allowed_mass) {
    const m = result.allowed_mass;
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>allowedMass over ${m.width.toLocaleString()} float16 logits: engine (${m.engine_place}) ${fmt(m.engine.median_ms, 2)} ms vs JavaScript ${fmt(m.javascript.median_ms, 2)} ms</td>` +
      `<td class="num" colspan="${lengths.length + 1}">${fmt(m.javascript_over_engine, 2)}×</td><td class="num">${m.abs_diff_allowed_mass.toExponential(1)}</td>`;
    rb.append(tr);
  }
  r.append(rb);
  const md = $("modes");
  md.replaceChildren();
  if (result.modes) {
    md.innerHTML = `<thead><tr><th>readout on ${result.modes.model}, example state (${result.modes.criteria} criteria)</th><th>ms / criterion</th><th>× letters</th><th>bytes read back / criterion</th></tr></thead>`;
    const mb = document.createElement("tbody");
    for (const m of result.modes.rows) {
      const tr = document.createElement("tr");
      tr.innerHTML = `<td>${m.what}</td><td class="num">${fmt(m.ms_per_criterion)}</td><td class="num">${fmt(m.over_letters, 2)}×</td><td class="num">${m.bytes_per_criterion === undefined ? "" : Math.round(m.bytes_per_criterion).toLocaleString()}</td>`;
      mb.append(tr);
    }
    md.append(mb);
  }
  $("plot").innerHTML = plot(result, rows);
  const blob = new Blob([JSON.stringify(result, null, 2)], { type: "application/json" });
  $("download").href = URL.createObjectURL(blob);
  $("download").download = `${result.date}-${result.model}-${result.backend}.json`;
  $("results").hidden = false;
}

/** Points (medians) and fitted lines per variant; log-free, linear axes. */
function plot(result, rows) {
  const W = 900, H = 420, L = 64, R = 210, T = 30, B = 46;
  const xmax = Math.max(...result.lengths);
  const ymax = Math.max(...rows.flatMap((v) => v.median_ms)) * 1.08 || 1;
  const X = (n) => L + ((W - L - R) * n) / xmax;
  const Y = (ms) => H - B - ((H - T - B) * ms) / ymax;
  const step = 10 ** Math.floor(Math.log10(ymax / 4));
  const tick = [1, 2, 5, 10].map((k) => k * step).find((s) => ymax / s <= 6) ?? step * 10;
  let svg = `<svg viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="12">`;
  svg += `<text x="${L}" y="18" font-size="13" font-weight="600">${result.model} · ${result.backend}${result.emulated ? " (emulated: SwiftShader)" : ""} · prefix ${result.prefix_tokens} tokens</text>`;
  for (let y = 0; y <= ymax; y += tick) svg += `<line x1="${L}" x2="${W - R}" y1="${Y(y)}" y2="${Y(y)}" stroke="#e5e8ec"/><text x="${L - 6}" y="${Y(y) + 4}" text-anchor="end" fill="#66707c">${y.toFixed(0)}</text>`;
  for (const n of result.lengths) svg += `<text x="${X(n)}" y="${H - B + 16}" text-anchor="middle" fill="#66707c">${n}</text>`;
  svg += `<text x="${(L + W - R) / 2}" y="${H - 8}" text-anchor="middle">suffix tokens</text>`;
  svg += `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">median ms</text>`;
  svg += `<clipPath id="area"><rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}"/></clipPath>`;
  svg += `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" stroke="#99a"/><line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" stroke="#99a"/>`;
  rows.forEach((v, k) => {
    const c = COLORS[v.variant] ?? "#333";
    if (v.fit) svg += `<line x1="${X(0)}" y1="${Y(v.fit.fixed_ms)}" x2="${X(xmax)}" y2="${Y(v.fit.fixed_ms + v.fit.per_token_ms * xmax)}" stroke="${c}" stroke-width="1.5" stroke-dasharray="5 4" clip-path="url(#area)"/>`;
    v.median_ms.forEach((m, i) => (svg += `<circle cx="${X(result.lengths[i])}" cy="${Y(m)}" r="4" fill="${c}"/>`));
    const label = v.fit ? `${v.fit.fixed_ms.toFixed(1)} + ${v.fit.per_token_ms.toFixed(2)}·n, R² ${v.fit.r2.toFixed(3)}` : "";
    svg += `<circle cx="${W - R + 14}" cy="${T + 10 + k * 36}" r="5" fill="${c}"/><text x="${W - R + 24}" y="${T + 14 + k * 36}">${v.variant}</text>`;
    svg += `<text x="${W - R + 24}" y="${T + 28 + k * 36}" fill="#66707c" font-size="11">${label}</text>`;
  });
  return svg + "</svg>";
}
