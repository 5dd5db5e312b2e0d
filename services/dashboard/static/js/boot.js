// Runs first (a classic script in <head>): starts the two requests the curves need, the metric
// series (the largest answer) and the events (markers on the curves), while the page's modules
// load; app.js picks the answers up. Same headers as api.js: the tab's control token when it has
// one (needed under --read-policy token).
(function () {
  let token = "";
  try { token = sessionStorage.getItem("worldsample-dashboard-token") || ""; } catch (_) { /* storage off */ }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  // first about one point per pixel column of a chart (the grid's column width less the axes, at
  // the screen's pixel ratio) for a quick first paint; app.js then fetches three per column
  const cols = Math.max(1, Math.floor((innerWidth - 52) / 340));
  const px = Math.max(100, ((innerWidth - 52) / cols - 72) * (window.devicePixelRatio || 1));
  const path = (n) => `/api/metrics/series?max_points=${Math.max(200, Math.min(20000, Math.round(n)))}`;
  window.worldsampleEarly = {
    seriesPath: path(px),
    fullSeriesPath: path(3 * px),
    series: fetch(path(px), { headers }),
    events: fetch("/api/events?limit=300", { headers }),
  };
})();
