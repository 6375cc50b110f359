/* Fleetwatch charts: the stored series (SPEC 9) drawn with the vendored uPlot.
 *
 * A chart group (section[data-charts]) names its data URL (data-src) and
 * range (data-range); each figure[data-chart] in it holds a spec: unit, an
 * optional fixed maximum, and the series keys to draw. The data URL answers
 * columns {t: [...], <key>: [...]}; nulls stay gaps (null is "unknown",
 * never 0). Groups reload on the live controller's ticks, at most once per
 * resolution step of their range, and redraw on a theme change or resize.
 */
(function () {
  "use strict";

  var HEIGHT = 170;

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function format(value, unit) {
    if (value === null || value === undefined || isNaN(value)) return "–";
    var digits = Math.abs(value) >= 100 || unit === "" ? 0 : 1;
    return value.toFixed(digits) + (unit ? " " + unit : "");
  }

  // Axis ticks: short numbers ("200k", "1.5k"), the unit only where it is one character ("%").
  function tick(value, unit) {
    var text;
    if (Math.abs(value) >= 1000) {
      var thousands = value / 1000;
      text = (Math.round(thousands) === thousands ? String(thousands) : thousands.toFixed(1)) + "k";
    } else {
      text = String(Math.round(value * 10) / 10);
    }
    return unit === "%" ? text + "%" : text;
  }

  // The y axis as wide as its longest label, so none is clipped ("200k", not "00k").
  // uPlot calls it again with the values it settles on; past the second cycle it keeps its size.
  // Measured on a canvas of its own: uPlot keeps track of the font its own canvas has set.
  var AXIS_PADDING = 6;
  var measurer = document.createElement("canvas").getContext("2d");
  function axisSize(u, values, axisIndex, cycle) {
    var axis = u.axes[axisIndex];
    if (cycle > 1) return axis._size;
    var size = axis.ticks.size + axis.gap + AXIS_PADDING;
    if (values && values.length) {
      measurer.font = axis.font[0];  // in device pixels (uPlot scales it by its pxRatio)
      var widest = values.reduce(function (most, v) { return Math.max(most, measurer.measureText(v).width); }, 0);
      size += widest / (window.uPlot.pxRatio || 1);
    }
    return Math.ceil(size);
  }

  // A series younger than its range is drawn over its own span (at least a minute), not squeezed
  // into the right edge of a 15-minute axis; an older one over the whole range.
  var MIN_SPAN_S = 60;
  function xBounds(data) {
    var from = data.now - data.range_s;
    if (data.t.length && data.t[0] > from) from = Math.min(data.t[0], data.now - MIN_SPAN_S);
    return { from: from, to: data.now };
  }

  var COUNT_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

  function two(n) { return (n < 10 ? "0" : "") + n; }

  function localTime(seconds) {
    var d = new Date(seconds * 1000);
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  // The x axis: "18:20" at each tick ("18:20:10" when ticks are seconds apart), and the day ("Dec 4") under
  // the first label shown and wherever the day changes. A label that would reach past the chart's edge
  // is left out (uPlot centres each on its tick, and cuts what the canvas does not hold), so none is clipped.
  function timeLabels(u, splits, axisIndex, space, increment) {
    var axis = u.axes[axisIndex];
    var canvasWidth = u.ctx.canvas.width;  // device pixels, as the font and valToPos(…, true) are
    measurer.font = axis.font[0];
    var shownDay = null;
    return splits.map(function (t) {
      var d = new Date(t * 1000);
      var time = two(d.getHours()) + ":" + two(d.getMinutes()) + (increment < 60 ? ":" + two(d.getSeconds()) : "");
      var day = d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
      var text = day === shownDay ? time : time + "\n" + day;
      var half = Math.max(measurer.measureText(time).width, measurer.measureText(day).width) / 2;
      var centre = u.valToPos(t, "x", true);
      if (centre - half < 0 || centre + half > canvasWidth) return "";
      shownDay = day;
      return text;
    });
  }

  function Chart(figure) {
    this.figure = figure;
    this.plot = figure.querySelector("[data-chart-plot]");
    this.spec = JSON.parse(figure.getAttribute("data-chart"));
    this.uplot = null;
    this.empty = null;
  }

  Chart.prototype.options = function (bounds) {
    var spec = this.spec;
    var colours = [cssVar("--chart-1"), cssVar("--chart-2"), cssVar("--chart-3")];
    var text = cssVar("--muted");
    var grid = cssVar("--chart-grid");
    var series = [{ label: "time", value: function (u, t) { return t === null ? "–" : localTime(t); } }];
    spec.series.forEach(function (s, i) {
      series.push({
        label: s.label,
        stroke: colours[i % colours.length],
        width: 1.5,
        spanGaps: false,
        points: { size: 4 },  // uPlot shows them only where points are sparse: a lone sample stays visible
        value: function (u, v) { return format(v, spec.unit); }
      });
    });
    return {
      width: Math.max(200, this.plot.clientWidth),
      height: HEIGHT,
      series: series,
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true, range: function () { return [bounds.from, bounds.to]; } },
        y: {
          range: function (u, min, max) {
            if (spec.max) return [0, spec.max];
            var top = max > 0 ? max * 1.15 : 1;
            return [0, top];
          }
        }
      },
      axes: [
        { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, space: 60, values: timeLabels },
        {
          stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: axisSize,
          incrs: spec.unit === "" ? COUNT_STEPS : undefined,
          values: function (u, ticks) { return ticks.map(function (v) { return tick(v, spec.unit); }); }
        }
      ]
    };
  };

  Chart.prototype.draw = function (data, bounds, rebuild) {
    var columns = [data.t];
    var measured = false;
    this.spec.series.forEach(function (s) {
      var values = data[s.key] || [];
      if (values.some(function (v) { return v !== null; })) measured = true;
      columns.push(values);
    });
    if (!measured) {
      this.destroy();
      if (!this.empty) {
        this.empty = document.createElement("div");
        this.empty.className = "chart__empty";
        this.plot.appendChild(this.empty);
      }
      // The server says why a range holds no point ("no report for 53 min"); a range with points measured nothing.
      this.empty.textContent = data.t.length ? "not measured in this range" : (data.empty || "no data in this range yet");
      return;
    }
    if (this.empty) {
      this.empty.remove();
      this.empty = null;
    }
    if (this.uplot && rebuild) this.destroy();
    if (this.uplot) {
      this.uplot.setData(columns);
    } else {
      this.uplot = new window.uPlot(this.options(bounds), columns, this.plot);
    }
  };

  Chart.prototype.destroy = function () {
    if (this.uplot) {
      this.uplot.destroy();
      this.uplot = null;
    }
  };

  Chart.prototype.resize = function () {
    if (this.uplot) this.uplot.setSize({ width: Math.max(200, this.plot.clientWidth), height: HEIGHT });
  };

  function Group(section) {
    var self = this;
    this.section = section;
    this.src = section.getAttribute("data-src");
    this.range = section.getAttribute("data-range");
    this.note = section.querySelector("[data-charts-note]");
    this.charts = Array.prototype.map.call(section.querySelectorAll("figure[data-chart]"), function (f) {
      return new Chart(f);
    });
    this.bounds = { from: 0, to: 1 };
    this.last = null;
    this.loadedAt = 0;
    this.loading = false;
    this.resolution = 1;

    section.querySelectorAll("[data-range-choice]").forEach(function (button) {
      button.addEventListener("click", function () { self.choose(button.getAttribute("data-range-choice")); });
    });
    if (window.ResizeObserver) {
      var observer = new ResizeObserver(function () { self.charts.forEach(function (c) { c.resize(); }); });
      this.charts.forEach(function (c) { observer.observe(c.plot); });
    }
  }

  Group.prototype.choose = function (range) {
    this.range = range;
    this.section.setAttribute("data-range", range);
    this.section.querySelectorAll("[data-range-choice]").forEach(function (button) {
      var current = button.getAttribute("data-range-choice") === range;
      button.classList.toggle("is-current", current);
      button.setAttribute("aria-pressed", current ? "true" : "false");
    });
    var url = new URL(window.location.href);
    url.searchParams.set("range", range);
    window.history.replaceState(window.history.state, "", url);
    this.load(true);
  };

  Group.prototype.load = function (rebuild) {
    var self = this;
    if (this.loading) return;
    this.loading = true;
    var url = this.src + "?range=" + encodeURIComponent(this.range);
    fetch(url, {
      headers: { "Accept": "application/json", "HX-Request": "true", "HX-Current-URL": window.location.href },
      credentials: "same-origin"
    }).then(function (response) {
      var redirect = response.headers.get("HX-Redirect");
      if (redirect) {
        window.location.assign(redirect);
        throw new Error("login required");
      }
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    }).then(function (data) {
      self.loading = false;
      self.loadedAt = Date.now();
      self.resolution = data.resolution_s || 1;
      var bounds = xBounds(data);
      self.bounds.from = bounds.from;
      self.bounds.to = bounds.to;
      self.last = data;
      self.section.classList.remove("is-stale");
      if (self.note) {
        self.note.textContent = data.t.length + (data.t.length === 1 ? " point" : " points") +
          ", every " + format(self.resolution, "s");
      }
      self.charts.forEach(function (chart) { chart.draw(data, self.bounds, rebuild); });
      if (window.fleetwatchLive) window.fleetwatchLive.ok();
    }).catch(function (error) {
      self.loading = false;
      self.section.classList.add("is-stale");
      if (self.note) self.note.textContent = "could not load: " + error.message;
      if (window.fleetwatchLive) window.fleetwatchLive.failed(null);
    });
  };

  Group.prototype.tick = function (interval) {
    var due = Math.max(interval, Math.min(this.resolution, 60)) * 1000 - 250;
    if (Date.now() - this.loadedAt >= due) this.load(false);
  };

  Group.prototype.redraw = function () {
    var self = this;
    if (!this.last) return;
    this.charts.forEach(function (chart) { chart.draw(self.last, self.bounds, true); });
  };

  document.addEventListener("DOMContentLoaded", function () {
    if (!window.uPlot) return;
    var groups = Array.prototype.map.call(document.querySelectorAll("section[data-charts]"), function (s) {
      return new Group(s);
    });
    window.fleetwatchCharts = groups;  // for a look from the console (and the browser tests)
    groups.forEach(function (g) { g.load(true); });
    document.addEventListener("fw:tick", function (event) {
      groups.forEach(function (g) { g.tick(event.detail.interval); });
    });
    document.addEventListener("fw:theme", function () {
      groups.forEach(function (g) { g.redraw(); });
    });
  });
})();
