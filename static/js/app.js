/* Pigeonhole dashboard behaviour: progressive enhancement only, no build, no inline scripts.
 *
 *   <button data-copy="text">             copies text (clipboard API, textarea fallback), "Copied"
 *   <form data-confirm="Sure?">            asks before submitting (also on a submit button)
 *   <time data-countdown="ISO">            "expires in 12 min" / "expired", kept current
 *   <time data-relative datetime="ISO">    "3 min ago" / "in 5 min", full time in the title
 *   <div id="x" data-stream="/api/v1/inboxes/inb_…/stream" [data-stream-events="a b"]
 *        [data-stream-refresh]>            listens to the service's SSE stream; fires a
 *                                          "pigeonhole:event" CustomEvent on the element and,
 *                                          with data-stream-refresh, re-renders #x from the page
 *   <header data-topbar> + [data-menu-toggle]  on a phone the navigation folds behind the button
 *   .table-wrap table                      each cell gets data-label="<its column's name>", which
 *                                          the phone layout shows beside it (app.css)
 */
(function () {
  "use strict";

  // --- copy -------------------------------------------------------------------------------
  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "sr-only";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }

  function copy(button) {
    var text = button.getAttribute("data-copy");
    var label = button.getAttribute("data-copy-label") || button.textContent;
    button.setAttribute("data-copy-label", label);
    function done(ok) {
      button.textContent = ok ? "Copied" : "Press Ctrl+C to copy";
      button.classList.toggle("copied", ok);
      window.setTimeout(function () {
        button.textContent = label;
        button.classList.remove("copied");
      }, 2000);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); },
        function () { done(fallbackCopy(text)); });
    } else {
      done(fallbackCopy(text));
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (button) {
      event.preventDefault();
      copy(button);
    }
  });

  // --- confirm ----------------------------------------------------------------------------
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter;
    var message = (submitter && submitter.getAttribute("data-confirm")) ||
      form.getAttribute("data-confirm");
    if (message && !window.confirm(message)) {
      event.preventDefault();
    }
  });

  // --- the phone menu -----------------------------------------------------------------------
  // Without this the header shows everything, wrapped; with it, app.css folds the navigation and
  // the account row behind the Menu button on narrow screens (the button is hidden on wide ones).
  function setupMenu() {
    var bar = document.querySelector("[data-topbar]");
    var button = bar && bar.querySelector("[data-menu-toggle]");
    if (!button) { return; }
    bar.classList.add("js-menu");
    button.addEventListener("click", function () {
      var open = !bar.classList.contains("menu-open");
      bar.classList.toggle("menu-open", open);
      button.setAttribute("aria-expanded", open ? "true" : "false");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && bar.classList.contains("menu-open")) {
        bar.classList.remove("menu-open");
        button.setAttribute("aria-expanded", "false");
        button.focus();
      }
    });
  }

  // --- table cells named after their column ------------------------------------------------
  function labelCells(root) {
    (root || document).querySelectorAll(".table-wrap table").forEach(function (table) {
      var head = table.tHead && table.tHead.rows[0];
      if (!head) { return; }
      var names = [];
      Array.prototype.forEach.call(head.cells, function (cell) {
        var name = cell.textContent.trim();
        for (var i = 0; i < (cell.colSpan || 1); i++) { names.push(cell.colSpan > 1 ? "" : name); }
      });
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (row) {
          var index = 0;
          Array.prototype.forEach.call(row.cells, function (cell) {
            // A cell spanning columns (a row of details under a row) has no one name.
            var name = cell.colSpan > 1 ? "" : (names[index] || "");
            if (!cell.hasAttribute("data-label")) { cell.setAttribute("data-label", name); }
            index += cell.colSpan || 1;
          });
        });
      });
    });
  }

  // --- times ------------------------------------------------------------------------------
  function span(seconds) {
    var s = Math.abs(seconds);
    if (s < 60) { return Math.max(1, Math.round(s)) + " s"; }
    var m = Math.round(s / 60);
    if (m < 60) { return m + " min"; }
    var h = Math.floor(m / 60);
    if (h < 48) { return h + " h" + (m % 60 ? " " + (m % 60) + " min" : ""); }
    return Math.round(h / 24) + " days";
  }

  function parse(el, attr) {
    var value = el.getAttribute(attr) || el.getAttribute("datetime");
    var when = value ? Date.parse(value) : NaN;
    return isNaN(when) ? null : when;
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var when = parse(el, "data-countdown");
      if (when === null) { return; }
      var left = (when - now) / 1000;
      var label = el.getAttribute("data-countdown-label") || "expires in";
      el.textContent = left > 0 ? label + " " + span(left) : (el.getAttribute("data-countdown-done") || "expired");
      el.classList.toggle("expired", left <= 0);
      if (!el.title) { el.title = new Date(when).toLocaleString(); }
    });
    document.querySelectorAll("[data-relative]").forEach(function (el) {
      var when = parse(el, "data-relative");
      if (when === null) { return; }
      var diff = (when - now) / 1000;
      el.textContent = Math.abs(diff) < 10 ? "just now" : (diff < 0 ? span(diff) + " ago" : "in " + span(diff));
      if (!el.title) { el.title = new Date(when).toLocaleString(); }
    });
  }

  // --- live updates over the service's SSE stream ------------------------------------------
  var DEFAULT_EVENTS = ["email.received", "email.updated", "email.deleted", "email.labeled",
    "mail.rejected", "inbox.created", "inbox.expired",
    "outbound.pending", "outbound.sent", "outbound.rejected", "outbound.failed"];

  function refresh(el) {
    if (el.getAttribute("data-refreshing")) {
      el.setAttribute("data-refresh-again", "1");
      return;
    }
    el.setAttribute("data-refreshing", "1");
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(el.id);
        if (fresh) {
          el.innerHTML = fresh.innerHTML;
          labelCells(document);
          tick();
          el.dispatchEvent(new CustomEvent("pigeonhole:refreshed", { bubbles: true }));
        }
      })
      .catch(function () { /* the next event retries */ })
      .then(function () {
        el.removeAttribute("data-refreshing");
        if (el.getAttribute("data-refresh-again")) {
          el.removeAttribute("data-refresh-again");
          refresh(el);
        }
      });
  }

  function listen(el) {
    if (!window.EventSource || (!el.id && el.hasAttribute("data-stream-refresh"))) { return; }
    var source = new EventSource(el.getAttribute("data-stream"), { withCredentials: true });
    var names = (el.getAttribute("data-stream-events") || "").split(/\s+/).filter(Boolean);
    (names.length ? names : DEFAULT_EVENTS).forEach(function (name) {
      source.addEventListener(name, function (message) {
        var data = null;
        try { data = JSON.parse(message.data); } catch (e) { data = message.data; }
        el.dispatchEvent(new CustomEvent("pigeonhole:event", { bubbles: true, detail: { type: name, data: data, id: message.lastEventId } }));
        if (el.hasAttribute("data-stream-refresh")) { refresh(el); }
      });
    });
    source.addEventListener("open", function () { el.setAttribute("data-stream-state", "open"); });
    source.addEventListener("error", function () { el.setAttribute("data-stream-state", "reconnecting"); });
    window.addEventListener("pagehide", function () { source.close(); });
  }

  // For elements a page adds after load: window.pigeonhole.listen(el), .refresh(el), .tick(),
  // .labelCells(el).
  window.pigeonhole = { listen: listen, refresh: refresh, tick: tick, labelCells: labelCells };

  function start() {
    setupMenu();
    labelCells(document);
    tick();
    window.setInterval(tick, 1000);
    document.querySelectorAll("[data-stream]").forEach(listen);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
