/* The email page: its parts (HTML, text, headers, raw, attachments) become tabs.
 * Without JavaScript every part is shown one after the other; the tab links are plain anchors.
 * Keyboard: Tab reaches the tab links, Enter opens one, Left/Right move between them.
 * <iframe data-fit-frame> (the mail's HTML) is kept as tall as the mail it shows, measured on
 * the hidden <iframe data-measure-frame> beside it. */
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

  // --- the HTML frame as tall as the mail ---------------------------------------------------
  // The frame that shows the mail is sandboxed without scripts in an opaque origin: this page
  // cannot read it. Beside it lies a hidden copy of the same document at the same width
  // (?measure=1: sandboxed without scripts, same-origin, fetching nothing; docs/security.md,
  // "The HTML frame"). A ResizeObserver watches the copy's root, whose box is the mail's own
  // height at the frame's width, and the copy itself (a narrower window, the tab shown): every
  // change to either sizes the frame, so images that decode late or a re-wrap are followed as
  // they happen. The frame's data-sized attribute says the height it was given last.
  function fitFrame(frame) {
    var box = frame.parentElement;
    var copy = box ? box.querySelector("iframe[data-measure-frame]") : null;
    if (!copy) { return; }
    var observer = window.ResizeObserver ? new ResizeObserver(function () { measure(); }) : null;
    var observed = null;

    function measure() {
      var doc = null;
      try { doc = copy.contentDocument; } catch (e) { doc = null; }
      if (!doc || !doc.documentElement || doc.URL === "about:blank") { return; }
      // Not while it still loads: a half-parsed copy is shorter than the mail (the load event
      // measures it whole, the observer every change after).
      if (doc.readyState !== "complete") { return; }
      var root = doc.documentElement;
      if (observer && observed !== root) {
        observer.observe(root);
        observed = root;
      }
      if (!copy.clientWidth) { return; }  // in a hidden tab: measured when shown
      // The mail's height, plus room for a horizontal scrollbar when it is wider than the frame,
      // plus the frame's own border.
      var content = Math.ceil(root.getBoundingClientRect().height);
      var scrollbar = root.scrollWidth > root.clientWidth ? 20 : 0;
      var height = content + scrollbar + (frame.offsetHeight - frame.clientHeight);
      if (frame.getAttribute("height") !== String(height)) {
        frame.setAttribute("height", String(height));
      }
      if (frame.getAttribute("data-sized") !== String(height)) {
        frame.setAttribute("data-sized", String(height));
      }
    }

    copy.addEventListener("load", measure);
    if (observer) {
      observer.observe(copy);
    } else {
      window.addEventListener("resize", measure);
    }
    measure();  // the copy may have loaded before this script ran
  }

  function start() {
    document.querySelectorAll("[data-tabs]").forEach(setup);
    document.querySelectorAll("iframe[data-fit-frame]").forEach(fitFrame);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
