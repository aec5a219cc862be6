// Charts drawn as SVG from plain numbers: lines over time, and horizontal bars. Labels are text nodes;
// colours come from console.css (series-0 .. series-7), so the page needs no inline style.
"use strict";

const Charts = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = 8;

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function niceMax(value) {
    if (!(value > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 2, 2.5, 5, 10]) {
      if (value <= step * power) return step * power;
    }
    return 10 * power;
  }

  function legend(names) {
    return Console.el("ul", {class: "legend"}, names.map((name, i) =>
      Console.el("li", {class: `series-${i % PALETTE}`}, Console.el("span", {class: "swatch"}), name)));
  }

  // lines(title, [{name, points: [[unix seconds, value or null], ...]}], format, {from, to}) -> a <figure>.
  // A null value breaks its line (no data in that slot, as opposed to a zero).
  function lines(title, series, format, range) {
    const width = 640, height = 200, left = 64, right = 24, top = 12, bottom = 28;
    const plotW = width - left - right, plotH = height - top - bottom;
    const values = series.flatMap((s) => s.points.map((p) => p[1]).filter((v) => v !== null && v !== undefined));
    const yMax = niceMax(Math.max(0, ...values));
    const x0 = range.from, x1 = Math.max(range.to, range.from + 1);
    const x = (t) => left + ((t - x0) / (x1 - x0)) * plotW;
    const y = (v) => top + plotH - (v / yMax) * plotH;
    const chart = svg("svg", {viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img"});
    chart.appendChild(svg("title", {}, title));
    for (let i = 0; i <= 4; i++) {
      const v = (yMax * i) / 4;
      chart.appendChild(svg("line", {x1: left, x2: width - right, y1: y(v), y2: y(v), class: "grid"}));
      chart.appendChild(svg("text", {x: left - 6, y: y(v) + 4, class: "axis", "text-anchor": "end"}, format(v)));
    }
    for (let i = 0; i <= 4; i++) {
      const t = x0 + ((x1 - x0) * i) / 4;
      chart.appendChild(svg("text", {x: x(t), y: height - 8, class: "axis", "text-anchor": "middle"},
        Console.clock(t).slice(0, 5)));
    }
    series.forEach((s, i) => {
      const group = svg("g", {class: `series series-${i % PALETTE}`, "data-series": s.name});
      let run = [];
      const flush = () => {
        if (run.length > 1) group.appendChild(svg("polyline", {points: run.join(" "), class: "line"}));
        run = [];
      };
      for (const [t, v] of s.points) {
        if (v === null || v === undefined) { flush(); continue; }
        run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
        if (v === 0) continue;   // a dot marks a slot with something in it; the line carries the zeros
        const dot = svg("circle", {cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 2.5, class: "dot"});
        dot.appendChild(svg("title", {}, `${s.name} · ${Console.clock(t)} · ${format(v)}`));
        group.appendChild(dot);
      }
      flush();
      chart.appendChild(group);
    });
    return Console.el("figure", {class: "chart-box"}, Console.el("figcaption", null, title), chart,
      legend(series.map((s) => s.name)));
  }

  // bars(title, [{label, value}], format) -> a <figure> with one bar per row, longest first as given.
  function bars(title, rows, format) {
    const rowH = 22, labelW = 220, width = 640, valueW = 90;
    const height = Math.max(rowH, rows.length * rowH) + 8;
    const plotW = width - labelW - valueW;
    const max = niceMax(Math.max(0, ...rows.map((r) => r.value || 0)));
    const chart = svg("svg", {viewBox: `0 0 ${width} ${height}`, class: "chart bars", role: "img"});
    chart.appendChild(svg("title", {}, title));
    rows.forEach((row, i) => {
      const yTop = 4 + i * rowH;
      const label = String(row.label);
      const group = svg("g", {class: `series series-${i % PALETTE}`, "data-label": label});
      group.appendChild(svg("text", {x: labelW - 8, y: yTop + 15, class: "axis", "text-anchor": "end"},
        label.length > 32 ? label.slice(0, 31) + "…" : label));
      const w = ((row.value || 0) / max) * plotW;
      const bar = svg("rect", {x: labelW, y: yTop + 3, width: Math.max(w, row.value ? 1 : 0).toFixed(1),
        height: rowH - 6, class: "bar"});
      bar.appendChild(svg("title", {}, `${label}: ${format(row.value || 0)}`));
      group.appendChild(bar);
      group.appendChild(svg("text", {x: labelW + w + 6, y: yTop + 15, class: "axis"}, format(row.value || 0)));
      chart.appendChild(group);
    });
    return Console.el("figure", {class: "chart-box"}, Console.el("figcaption", null, title), chart);
  }

  return {lines, bars};
})();
