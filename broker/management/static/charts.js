// Time-series charts of the API's 5 s samples. The API reports each counter's current value and
// its rate over the latest sampling interval (RabbitMQ's `*_details.rate`), not a history, so the
// page keeps the history itself: one point per refresh, the last ten minutes (drawn over the last minute until there is more).

import { el, num, svg } from "./dom.js";

export const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

const KEEP_MS = 10 * 60 * 1000;

export class History {
  constructor() {
    this.points = []; // [{t, values: {key: number}}]
  }

  add(values, t = Date.now()) {
    this.points.push({ t, values });
    while (this.points.length && this.points[0].t < t - KEEP_MS) this.points.shift();
  }

  latest(key) {
    const last = this.points[this.points.length - 1];
    return last ? last.values[key] : undefined;
  }
}

/**
 * A line chart of `series` ([{key, label}]) from `history`; the legend shows each series' latest
 * value (`data-series`, `data-value` on each legend row). `unit` is appended to legend values.
 */
export function lineChart(history, series, { width = 520, height = 150, unit = "", name = "" } = {}) {
  const pad = { left: 48, right: 8, top: 8, bottom: 18 };
  const points = history.points;
  const plotW = width - pad.left - pad.right, plotH = height - pad.top - pad.bottom;
  const tMax = points.length ? points[points.length - 1].t : Date.now();
  // the last minute at first, growing with the history up to ten minutes
  const span = Math.min(KEEP_MS, Math.max(60_000, points.length ? tMax - points[0].t : 0));
  const tMin = tMax - span;
  let vMax = 0;
  for (const p of points) for (const s of series) vMax = Math.max(vMax, p.values[s.key] || 0);
  vMax = vMax > 0 ? niceCeil(vMax) : 1;
  const x = (t) => pad.left + plotW * (t - tMin) / (tMax - tMin || 1);
  const y = (v) => pad.top + plotH * (1 - v / vMax);
  const chart = svg("svg", {
    class: "line-chart", width, height, viewBox: `0 0 ${width} ${height}`,
    dataset: { chart: name, points: points.length },
  });
  chart.append(svg("line", { x1: pad.left, x2: pad.left + plotW, y1: y(0), y2: y(0), class: "axis" }));
  chart.append(svg("text", { x: pad.left - 4, y: pad.top + 8, "text-anchor": "end" }, num(vMax)));
  chart.append(svg("text", { x: pad.left - 4, y: y(0), "text-anchor": "end" }, "0"));
  chart.append(svg("text", { x: pad.left, y: height - 4 }, `−${Math.round(span / 60_000)} min`));
  chart.append(svg("text", { x: pad.left + plotW, y: height - 4, "text-anchor": "end" }, "now"));
  series.forEach((s, i) => {
    const pts = points.filter((p) => typeof p.values[s.key] === "number");
    if (!pts.length) return;
    const d = pts.map((p, j) => `${j ? "L" : "M"}${x(p.t).toFixed(1)} ${y(p.values[s.key]).toFixed(1)}`).join(" ");
    const colour = COLOURS[i % COLOURS.length];
    chart.append(svg("path", { d, fill: "none", stroke: colour, "stroke-width": 1.5 }));
    const last = pts[pts.length - 1];
    chart.append(svg("circle", { cx: x(last.t), cy: y(last.values[s.key]), r: 2, fill: colour }));
  });
  const legend = el("table", { class: "legend" }, series.map((s, i) => {
    const value = history.latest(s.key);
    return el("tr", { dataset: { series: s.key, value: value ?? "" } },
      el("td", { class: "swatch", style: `color:${COLOURS[i % COLOURS.length]}` }, "■"),
      el("th", {}, s.label),
      el("td", { class: "num" }, value === undefined ? "" : `${num(value)}${unit}`));
  }));
  return el("div", { class: "chart" }, chart, legend);
}

function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
