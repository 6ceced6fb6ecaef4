/* Webhook delivery log: while a delivery is pending or retrying (a [data-busy] marker inside
 * #deliveries), re-render the log from the page every few seconds with pigeonhole.refresh, and
 * keep the attempts panels the reader opened or closed as they were. Deliveries have no SSE
 * stream of their own, so this is the one place the dashboard polls. */
(function () {
  "use strict";

  var INTERVAL = 2000;

  function start() {
    var log = document.getElementById("deliveries");
    if (!log || !window.pigeonhole) { return; }
    var chosen = {};  // delivery id -> open (true/false) as the reader left it

    log.addEventListener("toggle", function (event) {
      var panel = event.target;
      if (panel.matches && panel.matches("details[data-attempts]")) {
        chosen[panel.getAttribute("data-attempts")] = panel.open;
      }
    }, true);

    log.addEventListener("pigeonhole:refreshed", function () {
      log.querySelectorAll("details[data-attempts]").forEach(function (panel) {
        var id = panel.getAttribute("data-attempts");
        if (Object.prototype.hasOwnProperty.call(chosen, id)) { panel.open = chosen[id]; }
      });
    });

    function poll() {
      if (log.querySelector("[data-busy]") && !document.hidden) {
        window.pigeonhole.refresh(log);
      }
    }
    window.setInterval(poll, INTERVAL);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
