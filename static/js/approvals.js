/* Approvals pages: decisions through the API, live state of an item, a self-refreshing queue.
 *
 *   <section id="decision" data-decision-url="/api/v1/outbox/out_…/decision"
 *            data-item-url="/approvals/out_…/">
 *     <form data-decision="approve|reject"> with fields marked data-field="subject|text|note"
 *                                posts JSON to the decision endpoint with the session and the
 *                                CSRF token, shows the API's error in plain words, then opens
 *                                the decided item. Without JavaScript the form posts to the
 *                                dashboard's own decide view instead.
 *   <div data-outbox-wait="/api/v1/outbox/out_…?wait=110">
 *                                long-polls the item (the service releases waiters on every
 *                                change) and says so when someone else decides or it expires.
 *   <div id="approval-queue" data-approvals-queue>
 *                                re-reads the queue every 15 s while the tab is visible (the
 *                                inbox event stream carries no outbound events).
 */
(function () {
  "use strict";

  var QUEUE_REFRESH_MS = 15000;
  var RETRY_MS = 10000;
  var leaving = false;

  window.addEventListener("pagehide", function () { leaving = true; });

  // --- same-origin API calls with the session ----------------------------------------------
  function cookie(name) {
    var found = null;
    document.cookie.split(";").forEach(function (part) {
      var pair = part.trim().split("=");
      if (pair[0] === name) { found = decodeURIComponent(pair.slice(1).join("=")); }
    });
    return found;
  }

  function csrfToken(form) {
    var field = form ? form.querySelector("input[name=csrfmiddlewaretoken]") : null;
    return cookie("csrftoken") || (field ? field.value : "");
  }

  function postJson(url, body, form) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "X-CSRFToken": csrfToken(form)
      },
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.text().then(function (text) {
        var payload = null;
        try { payload = text ? JSON.parse(text) : null; } catch (e) { payload = null; }
        return { status: response.status, ok: response.ok, payload: payload };
      });
    });
  }

  // --- plain words for the API's answers ------------------------------------------------------
  var OUTCOME = {
    sent: "approved and handed to delivery",
    rejected: "rejected",
    failed: "approved, but delivery failed",
    expired: "left undecided until it expired"
  };

  function describe(result) {
    var error = result.payload && result.payload.error;
    if (result.status === 401) {
      return "Your session has ended. Sign in again, then retry.";
    }
    if (!error) {
      return "The server could not record the decision (status " + result.status + "). Try again in a moment.";
    }
    var message = error.message || "The decision was refused.";
    if (error.issues && error.issues.length) {
      message += " " + error.issues.map(function (issue) {
        return (issue.path ? issue.path + ": " : "") + issue.message;
      }).join(" ");
    }
    if (error.code === "invalid_state") {
      message += " Someone else may have decided it, or it expired.";
    }
    return message;
  }

  // --- the decision forms ------------------------------------------------------------------------
  function decisionBody(form) {
    var body = { decision: form.getAttribute("data-decision") };
    var note = form.querySelector('[data-field="note"]');
    if (note && note.value.trim()) { body.note = note.value.trim(); }
    ["subject", "text"].forEach(function (name) {
      var field = form.querySelector('[data-field="' + name + '"]');
      // Only real edits are sent: an untouched field keeps the agent's version byte for byte.
      if (field && field.value !== field.defaultValue) { body[name] = field.value; }
    });
    return body;
  }

  function setBusy(section, busy, active) {
    section.setAttribute("aria-busy", busy ? "true" : "false");
    section.querySelectorAll("button[type=submit]").forEach(function (button) {
      button.disabled = busy;
      if (button.form === active) {
        if (busy) {
          button.setAttribute("data-label", button.textContent);
          button.textContent = active.getAttribute("data-decision") === "approve" ? "Approving…" : "Rejecting…";
        } else if (button.getAttribute("data-label")) {
          button.textContent = button.getAttribute("data-label");
        }
      }
    });
  }

  function showError(section, message, withLink) {
    var box = section.querySelector("#decision-error");
    box.textContent = message;
    if (withLink) {
      var link = document.createElement("a");
      link.href = section.getAttribute("data-item-url");
      link.textContent = "Show its current state";
      box.appendChild(document.createTextNode(" "));
      box.appendChild(link);
    }
    box.hidden = false;
    box.focus();
  }

  function setUpDecision(section) {
    var url = section.getAttribute("data-decision-url");
    section.querySelectorAll("form[data-decision]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        if (section.getAttribute("aria-busy") === "true") { return; }
        section.querySelector("#decision-error").hidden = true;
        section.setAttribute("data-deciding", "1");
        setBusy(section, true, form);
        postJson(url, decisionBody(form), form).then(function (result) {
          if (result.ok) {
            stopWatching();
            window.location.assign(section.getAttribute("data-item-url"));
            return;
          }
          section.removeAttribute("data-deciding");
          setBusy(section, false, form);
          var code = result.payload && result.payload.error && result.payload.error.code;
          showError(section, describe(result), code === "invalid_state");
        }, function () {
          section.removeAttribute("data-deciding");
          setBusy(section, false, form);
          showError(section, "Could not reach Pigeonhole. Check your connection and try again.", false);
        });
      });
    });
  }

  // --- live state of one item (long-poll on GET /outbox/{id}?wait=) -----------------------------
  var controller = null;

  function stopWatching() {
    leaving = true;
    if (controller) { controller.abort(); }
  }

  function announceChange(el, item) {
    var section = document.getElementById("decision");
    if (section && section.getAttribute("data-deciding")) { return; }  // our own decision
    if (section) {
      section.querySelectorAll("button[type=submit], input, textarea").forEach(function (field) {
        field.disabled = true;
      });
    }
    var notice = document.createElement("div");
    notice.className = "notice notice-info";
    notice.setAttribute("role", "status");
    notice.setAttribute("data-changed", item.status);
    var who = item.decided_by ? " by " + item.decided_by : "";
    notice.textContent = "This message was just " + (OUTCOME[item.status] || item.status) +
      (item.status === "expired" ? "" : who) + ". ";
    var link = document.createElement("a");
    link.href = window.location.pathname;
    link.textContent = "Show its current state";
    notice.appendChild(link);
    el.insertBefore(notice, el.firstChild);
  }

  function watch(el) {
    var url = el.getAttribute("data-outbox-wait");
    if (!window.fetch || !window.AbortController) { return; }

    function again(delay) {
      if (!leaving) { window.setTimeout(poll, delay); }
    }

    function poll() {
      if (leaving) { return; }
      controller = new AbortController();
      var started = Date.now();
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" }, signal: controller.signal })
        .then(function (response) {
          if (response.status === 200 || response.status === 202) {
            return response.json().then(function (item) {
              if (item.status !== "pending") {
                announceChange(el, item);
              } else {
                // A server that does not hold the request (no wait support) is not hammered.
                again(Date.now() - started < 1000 ? RETRY_MS : 0);
              }
            });
          }
          if (response.status === 429 || response.status >= 500) { again(RETRY_MS * 3); }
          // 401/403/404: the session or the item is gone; the page says enough.
          return null;
        })
        .catch(function () { again(RETRY_MS); });
    }

    poll();
  }

  // --- the queue re-reads itself ---------------------------------------------------------------
  function signature(root) {
    return Array.prototype.map.call(root.querySelectorAll("[data-item]"), function (el) {
      return el.getAttribute("data-item");
    }).join(" ");
  }

  function swap(from, selector) {
    var fresh = from.querySelector(selector);
    var current = document.querySelector(selector);
    if (fresh && current) { current.innerHTML = fresh.innerHTML; }
  }

  function refreshQueue(el) {
    if (document.hidden || leaving) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById(el.id);
        if (!fresh || signature(fresh) === signature(el)) { return; }
        el.innerHTML = fresh.innerHTML;  // only when the queue changed: keeps focus otherwise
        swap(doc, '.nav a[href="/approvals/"]');
        swap(doc, "[data-menu-toggle]");  // the phone menu's button repeats the count
        swap(doc, ".tabs");
        if (window.pigeonhole) { window.pigeonhole.tick(); }
      })
      .catch(function () { /* the next round retries */ });
  }

  // --- what goes out when the text is edited ----------------------------------------------------
  // The decision service replaces the HTML part with the edited text rendered as HTML
  // (outbox.parts.text_as_html); this mirrors it character for character, so the frame shows
  // the HTML part that will go out before the approver clicks.
  function escapeHtml(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
  }

  function textAsHtml(text) {
    text = text.replace(/\r\n/g, "\n").replace(/\r/g, "\n");
    return text.split(/\n{2,}/).map(function (paragraph) {
      return "<p>" + escapeHtml(paragraph).replace(/\n/g, "<br>") + "</p>";
    }).join("\n\n");
  }

  function previewEdits(section) {
    var field = section.querySelector('form[data-decision="approve"] [data-field="text"]');
    var textPart = document.querySelector("[data-part-text]");
    if (field && textPart) {  // the text part shown is the one that will go out
      var originalText = textPart.textContent;
      field.addEventListener("input", function () {
        textPart.textContent = field.value !== field.defaultValue ? field.value : originalText;
      });
    }
    var frame = document.querySelector("iframe[data-part-html]");
    var notice = document.querySelector("[data-html-replaced]");
    if (!field || !frame || !notice || !section.querySelector("[data-html-edit-notice]")) { return; }
    var original = frame.getAttribute("srcdoc");
    // The same default stylesheet as the server's document (outbox.parts.html_document).
    var linked = /<link rel="stylesheet" href="[^"]*">/.exec(original || "");
    var sheet = linked ? linked[0] : "";
    field.addEventListener("input", function () {
      var edited = field.value !== field.defaultValue;
      notice.hidden = !edited;
      frame.setAttribute("data-edited", edited ? "1" : "0");
      frame.srcdoc = edited
        ? '<!doctype html>\n<html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">' + sheet + '</head>\n<body>' + textAsHtml(field.value) + "</body></html>\n"
        : original;
    });
  }

  function start() {
    var section = document.getElementById("decision");
    if (section) { setUpDecision(section); previewEdits(section); }
    document.querySelectorAll("[data-outbox-wait]").forEach(watch);
    document.querySelectorAll("[data-approvals-queue]").forEach(function (el) {
      window.setInterval(function () { refreshQueue(el); }, QUEUE_REFRESH_MS);
      document.addEventListener("visibilitychange", function () { refreshQueue(el); });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
