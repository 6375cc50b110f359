"""What the browser tests read of the drawn charts (static/fleetwatch/charts.js, uPlot)."""

from playwright.sync_api import expect

# Each drawn chart's axes, measured as uPlot drew them:
# - y: its labels, the widest in CSS pixels and the room the axis leaves for labels;
# - x: each label shown, its left and right edge (centred on its tick) and the canvas width, in canvas pixels.
CHART_AXES = """() => {
    const measure = document.createElement("canvas").getContext("2d");
    const width = (text) => Math.max(0, ...String(text).split("\\n").map((line) => measure.measureText(line).width));
    const found = [];
    for (const group of window.fleetwatchCharts || []) {
        for (const chart of group.charts) {
            const u = chart.uplot;
            if (!u) continue;
            const [x, y] = u.axes;
            measure.font = y.font[0];
            const labels = y._values || [];
            const widest = Math.max(0, ...labels.map((v) => width(v) / uPlot.pxRatio));
            measure.font = x.font[0];
            const times = (x._values || []).map((text, i) => {
                const centre = u.valToPos(x._splits[i], "x", true);
                return {text: text, left: centre - width(text) / 2, right: centre + width(text) / 2};
            }).filter((label) => label.text !== "");
            found.push({title: chart.figure.querySelector(".chart__title").textContent.trim(), labels: labels,
                        widest: widest, room: y._size - y.ticks.size - y.gap, times: times,
                        canvas: u.ctx.canvas.width});
        }
    }
    return found;
}"""


def wait_for_charts(page):
    """Until every chart of the page is drawn, or says why it is not."""
    if page.locator("section[data-charts]").count():
        expect(page.locator(".chart .uplot, .chart .chart__empty")).to_have_count(page.locator("figure.chart").count())
