// The live rate chart (uPlot): rates in and out, clock times on the x axis,
// a legend with the value under the cursor (the latest when the cursor is away);
// seeded with the broker's short history so a page opens with its last minutes.
import { clock, fmtRate } from "./ui.js";

const POINTS = 150;

// A tick's rate: as the cards show it from 1,000 up, exact below (0.25, not 0.3).
const axisRate = (v) => v >= 1000 ? fmtRate(v) : `${Math.round(v * 100) / 100} /s`;

export function rateChart(container) {
  const data = [[], [], []];
  let plot = null;
  function size() { return { width: Math.max(320, container.clientWidth - 8), height: 220 }; }
  function latest(i) { const s = data[i]; return s.length ? s[s.length - 1] : null; }
  function draw() {
    if (data[0].length > POINTS) for (const s of data) s.splice(0, data[0].length - POINTS);
    container.dataset.points = String((Number(container.dataset.points) || 0) + 1);
    if (!plot && typeof uPlot !== "undefined") {
      const value = (u, v, i) => fmtRate(v ?? latest(i));
      plot = new uPlot({
        ...size(),
        series: [
          { label: "Time", value: (u, v) => clock(v ?? latest(0) ?? Date.now() / 1000) },
          { label: "in", stroke: "#4f8cff", width: 2, fill: "rgba(79,140,255,0.10)", value },
          { label: "out", stroke: "#2bb673", width: 2, value }],
        axes: [
          // Whole seconds at least: sub-second ticks would print the same time several times.
          { stroke: "#8a94a6", space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600], values: (u, ticks) => {
            const labels = ticks.map(clock);
            container.dataset.xlabels = labels.join(" ");  // what the axis shows (drawn on a canvas): for the tests
            return labels;
          } },
          { stroke: "#8a94a6", size: 70, values: (u, ticks) => ticks.map(axisRate) }],
        scales: { x: { time: true } },
      }, data, container);
    } else if (plot) {
      plot.setData(data);
    }
    if (plot) plot.setLegend({ idx: null });
    container.dataset.length = String(data[0].length);
  }
  // points: [[unix seconds, rate in, rate out], ...] (the broker's history), oldest first.
  function seed(points) {
    if (data[0].length || !points || !points.length) return;
    for (const [t, rin, rout] of points) { data[0].push(t); data[1].push(rin); data[2].push(rout); }
    container.dataset.seeded = String(points.length);
  }
  function push(t, rin, rout) {
    if (data[0].length && t <= data[0][data[0].length - 1]) return;
    data[0].push(t); data[1].push(rin); data[2].push(rout);
    draw();
  }
  return { push, seed, stop: () => plot && plot.destroy() };
}
