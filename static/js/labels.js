/* Label editor: the inline tester (POST /api/v1/labels/test with the session and the CSRF
 * token, the label as typed sent as an unsaved draft) and "Use this example" for the rule.
 * No inline scripts: the page's CSP allows scripts from this origin only. */
(function () {
  "use strict";

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) { return decodeURIComponent(match[1]); }
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function value(form, name) {
    var field = form ? form.elements.namedItem(name) : null;
    return field ? field.value : "";
  }

  // "rules.conditions.0.op" -> "Condition 1, "op"" (as the server-side form says it).
  function where(path) {
    var rest = path.replace(/^label\./, "");
    var found = rest.match(/^rules\.conditions\.(\d+)(?:\.(\w+))?$/);
    if (found) {
      return "Condition " + (Number(found[1]) + 1) + (found[2] ? ", \u201c" + found[2] + "\u201d" : "");
    }
    if (rest === "rules") { return "The rule"; }
    return "\u201c" + rest.replace(/^label\./, "") + "\u201d";
  }

  function showError(box, title, lines) {
    box.replaceChildren();
    var notice = el("div", "notice notice-error");
    notice.setAttribute("data-test-error", "");
    notice.appendChild(el("p", "", title));
    if (lines && lines.length) {
      var list = el("ul");
      lines.forEach(function (line) { list.appendChild(el("li", "", line)); });
      notice.appendChild(list);
    }
    box.appendChild(notice);
  }

  function describe(result) {
    if (!result.matched) {
      return "Not matched \u2014 " + result.reason;
    }
    var by = result.source === "classifier" ? "classifier" : "rule";
    return "Matched by " + by + " \u2014 " + result.reason;
  }

  function showResults(box, results, key) {
    box.replaceChildren();
    var mine = null;
    var others = [];
    results.forEach(function (r) { if (r.key === key) { mine = r; } else { others.push(r); } });
    if (mine) {
      var card = el("div", "test-verdict " + (mine.matched ? "is-match" : "is-miss"));
      card.setAttribute("data-test-result", "");
      card.setAttribute("data-matched", mine.matched ? "true" : "false");
      var badge = el("span", "badge " + (mine.matched ? "badge-ok" : "badge-muted"),
        mine.matched ? "Matched" : "Not matched");
      var head = el("p", "verdict-head");
      head.appendChild(badge);
      head.appendChild(document.createTextNode(" " + key));
      card.appendChild(head);
      card.appendChild(el("p", "verdict-reason", describe(mine)));
      if (mine.source === "classifier") {
        card.appendChild(el("p", "help", "Classifier verdict: " + (mine.matched ? "yes" : "no") +
          ", confidence " + Number(mine.confidence).toFixed(2) + "."));
      }
      box.appendChild(card);
    }
    if (others.length) {
      var details = el("details", "other-results");
      details.appendChild(el("summary", "", "Other labels of the workspace (" + others.length + ")"));
      var list = el("ul");
      others.forEach(function (r) {
        var item = el("li");
        item.appendChild(el("span", "mono", r.key));
        item.appendChild(document.createTextNode(": " + describe(r)));
        list.appendChild(item);
      });
      details.appendChild(list);
      box.appendChild(details);
    }
    if (!mine && !others.length) {
      box.appendChild(el("p", "empty", "There is no enabled label to test."));
    }
  }

  function start() {
    var labelForm = document.getElementById("label-form");
    var testForm = document.getElementById("label-test-form");
    var box = document.getElementById("test-result");

    var example = document.querySelector("[data-use-example]");
    if (example && labelForm) {
      example.addEventListener("click", function () {
        var rules = labelForm.elements.namedItem("rules");
        rules.value = document.getElementById("rule-example").textContent;
        rules.focus();
      });
    }

    if (!testForm || !box) { return; }
    var picker = testForm.elements.namedItem("email_id");
    function syncSample() {
      var stored = picker && picker.value;
      testForm.querySelectorAll("[data-sample-field]").forEach(function (field) {
        field.hidden = Boolean(stored);
      });
    }
    if (picker) { picker.addEventListener("change", syncSample); syncSample(); }

    testForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var key = value(labelForm, "key") || (labelForm && labelForm.getAttribute("data-label-key")) || "draft";
      var draft = { key: key };
      var rulesText = value(labelForm, "rules").trim();
      if (rulesText) {
        try {
          draft.rules = JSON.parse(rulesText);
        } catch (e) {
          showError(box, "The rule is not valid JSON, so it cannot be tested.", [String(e.message || e)]);
          return;
        }
      } else {
        draft.rules = {};
      }
      draft.instructions = value(labelForm, "instructions");
      var threshold = parseFloat(value(labelForm, "threshold"));
      if (!isNaN(threshold)) { draft.threshold = threshold; }
      var body = { label: draft };
      if (picker && picker.value) {
        body.email_id = picker.value;
      } else {
        if (value(testForm, "from").trim()) { body.from = value(testForm, "from").trim(); }
        body.subject = value(testForm, "subject");
        body.text = value(testForm, "text");
      }
      var button = testForm.querySelector("button[type=submit]");
      button.disabled = true;
      box.replaceChildren(el("p", "muted", "Testing\u2026"));
      fetch(testForm.getAttribute("data-test-url"), {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify(body)
      }).then(function (response) {
        return response.json().then(function (data) { return { ok: response.ok, data: data }; },
          function () { return { ok: false, data: null }; });
      }).then(function (answer) {
        if (answer.ok) {
          showResults(box, answer.data.results || [], key);
          return;
        }
        var error = answer.data && answer.data.error;
        if (!error) {
          showError(box, "The test could not run. Try again in a moment.");
          return;
        }
        var lines = (error.issues || []).map(function (issue) {
          return where(issue.path) + ": " + issue.message + " (" + issue.path.replace(/^label\./, "") + ")";
        });
        showError(box, error.code === "validation_error" ? "The rule has a problem:" : error.message, lines);
      }).catch(function () {
        showError(box, "The test could not reach the server. Check your connection and try again.");
      }).then(function () {
        button.disabled = false;
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
