/* The overview page: re-renders #overview from the server every minute while the tab is visible
 * and at once when it becomes visible again (the SSE stream is per inbox, the overview is per
 * workspace, so a cheap periodic refresh it is). Opened <details> stay open across refreshes.
 * On a narrow screen the mail chart scrolls sideways; it starts at the newest hours. */
(function () {
  "use strict";

  var PERIOD = 60000;

  function start() {
    var root = document.getElementById("overview");
    if (!root || !window.pigeonhole) { return; }
    var open = [];

    function showNewest() {
      root.querySelectorAll(".chart-scroll").forEach(function (box) {
        box.scrollLeft = box.scrollWidth;
      });
    }
    showNewest();

    function refresh() {
      open = Array.prototype.map.call(root.querySelectorAll("details[open]"), function (d) {
        return d.className;
      });
      window.pigeonhole.refresh(root);
    }

    root.addEventListener("pigeonhole:refreshed", function () {
      open.forEach(function (name) {
        var details = name && root.querySelector("details." + name.split(" ").join("."));
        if (details) { details.open = true; }
      });
      showNewest();
      root.setAttribute("data-refreshed-at", new Date().toISOString());
    });

    window.setInterval(function () {
      if (!document.hidden) { refresh(); }
    }, PERIOD);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) { refresh(); }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
