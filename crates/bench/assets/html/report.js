// basalt bench: draws the charts of report.html, compare.html and
// index.html with uPlot (embedded above this script) from the JSON in
// <script id="bench-data">. No framework, no build step, nothing fetched.
//
// Data: { "charts": [ chart... ] }, a chart being
//   { id, title, x (x-axis label), y (left axis label), y2 (right axis
//     label, optional), log (a logarithmic left axis), note (optional),
//     and either  series: [{label, axis (0 left, 1 right)}...],
//                 data:   [[x...], [y...]...]    (one x shared by all)
//     or          overlay: [{label, x: [...], y: [...]}...]
//                 (several runs, each with its own x; joined here) }
// Every chart goes into the element with id "chart-" + chart.id.
//
// For the browser check: window.basaltCharts holds the uPlot instances,
// window.basaltFirstChart the performance.now() of the first chart drawn,
// window.basaltChartErrors the charts that could not be drawn.
(function () {
  "use strict";
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf"];
  window.basaltCharts = [];
  window.basaltFirstChart = null;
  window.basaltChartErrors = [];

  function num(v) {
    if (v === null || v === undefined) return "-";
    var a = Math.abs(v);
    if (a >= 1e7) return (v / 1e6).toFixed(0) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 100 || v === Math.trunc(v)) return v.toFixed(0);
    if (a >= 1) return v.toFixed(1);
    return v.toFixed(2);
  }

  function axisValues(u, splits) {
    return splits.map(num);
  }

  function drawn(u) {
    if (window.basaltFirstChart === null) {
      window.basaltFirstChart = performance.now();
    }
    u.basaltDrawn = true;
  }

  function build(c, el) {
    var table;
    var series = [{ label: c.x }];
    var right = false;
    if (c.overlay) {
      table = uPlot.join(c.overlay.map(function (o) { return [o.x, o.y]; }));
      c.overlay.forEach(function (o, i) {
        series.push({
          label: o.label,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.5,
          spanGaps: true,
          value: function (u, v) { return num(v); }
        });
      });
    } else {
      table = c.data;
      c.series.forEach(function (s, i) {
        var axis2 = s.axis === 1;
        right = right || axis2;
        series.push({
          label: s.label,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.25,
          spanGaps: false,
          scale: axis2 ? "y2" : "y",
          value: function (u, v) { return num(v); }
        });
      });
    }
    var axes = [
      { label: c.x, values: axisValues },
      { label: c.y, values: axisValues, size: 60 }
    ];
    var scales = { x: { time: false } };
    if (c.log) {
      scales.y = { distr: 3 };
    }
    if (right) {
      axes.push({ label: c.y2 || "", scale: "y2", side: 1, values: axisValues,
        size: 60, grid: { show: false } });
      scales.y2 = { auto: true };
    }
    var width = Math.max(320, el.clientWidth - 14);
    var u = new uPlot({
      title: c.title,
      width: width,
      height: 300,
      scales: scales,
      series: series,
      axes: axes,
      legend: { live: true },
      hooks: { draw: [drawn] }
    }, table, el);
    if (c.note) {
      var n = document.createElement("div");
      n.className = "note";
      n.textContent = c.note;
      el.appendChild(n);
    }
    return u;
  }

  var node = document.getElementById("bench-data");
  var data = node ? JSON.parse(node.textContent) : { charts: [] };
  (data.charts || []).forEach(function (c) {
    var el = document.getElementById("chart-" + c.id);
    if (!el) return;
    try {
      window.basaltCharts.push(build(c, el));
    } catch (e) {
      window.basaltChartErrors.push(c.id + ": " + e);
      el.textContent = "chart " + c.title + " could not be drawn: " + e;
    }
  });

  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      window.basaltCharts.forEach(function (u) {
        var w = Math.max(320, u.root.parentNode.clientWidth - 14);
        u.setSize({ width: w, height: 300 });
      });
    }, 100);
  });
})();
