/* The email page: its parts (HTML, text, headers, raw, attachments) become tabs.
 * Without JavaScript every part is shown one after the other; the tab links are plain anchors.
 * Keyboard: Tab reaches the tab links, Enter opens one, Left/Right move between them. */
(function () {
  "use strict";

  function setup(nav) {
    var links = Array.prototype.slice.call(nav.querySelectorAll("[data-tab]"));
    if (!links.length) { return; }
    var container = nav.parentElement;
    container.classList.add("js-tabs");

    function show(id, focus) {
      links.forEach(function (link) {
        var active = link.getAttribute("data-tab") === id;
        link.setAttribute("aria-selected", active ? "true" : "false");
        var panel = document.getElementById(link.getAttribute("data-tab"));
        if (panel) { panel.hidden = !active; }
      });
      if (focus) {
        var panel = document.getElementById(id);
        if (panel) { panel.focus(); }
      }
    }

    nav.setAttribute("role", "tablist");
    links.forEach(function (link, index) {
      link.setAttribute("role", "tab");
      var panel = document.getElementById(link.getAttribute("data-tab"));
      if (panel) {
        panel.setAttribute("role", "tabpanel");
        panel.setAttribute("aria-label", link.textContent.trim());
      }
      link.addEventListener("click", function (event) {
        event.preventDefault();
        var id = link.getAttribute("data-tab");
        show(id, false);
        if (window.history && window.history.replaceState) {
          window.history.replaceState(null, "", window.location.pathname + window.location.search + "#" + id);
        }
      });
      link.addEventListener("keydown", function (event) {
        var step = event.key === "ArrowRight" ? 1 : (event.key === "ArrowLeft" ? -1 : 0);
        if (!step) { return; }
        event.preventDefault();
        var next = links[(index + step + links.length) % links.length];
        next.focus();
        next.click();
      });
    });

    var wanted = window.location.hash.replace("#", "");
    var initial = links.some(function (l) { return l.getAttribute("data-tab") === wanted; })
      ? wanted : links[0].getAttribute("data-tab");
    show(initial, false);
  }

  function start() {
    document.querySelectorAll("[data-tabs]").forEach(setup);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
