/* API keys page: next to each scope checkbox, say which ticked scope already includes it.
 * The implication table comes from the server (data-implied-scopes on the form), so it stays
 * the model's table (apikeys.models.IMPLIED_SCOPES). Progressive: without it nothing is lost.
 */
(function () {
  "use strict";

  function setup(form) {
    var implied;
    try { implied = JSON.parse(form.getAttribute("data-implied-scopes") || "{}"); } catch (e) { return; }
    var boxes = Array.prototype.slice.call(form.querySelectorAll('input[type="checkbox"][name="scopes"]'));
    var notes = {};
    boxes.forEach(function (box) {
      var note = document.createElement("span");
      note.className = "implied";
      note.setAttribute("aria-live", "polite");
      box.parentNode.appendChild(note);
      notes[box.value] = note;
    });
    function update() {
      var by = {};
      boxes.forEach(function (box) {
        if (!box.checked) { return; }
        (implied[box.value] || []).forEach(function (scope) {
          (by[scope] = by[scope] || []).push(box.value);
        });
      });
      boxes.forEach(function (box) {
        var note = notes[box.value];
        note.textContent = !box.checked && by[box.value] ? "(included with " + by[box.value].join(", ") + ")" : "";
      });
    }
    form.addEventListener("change", update);
    update();
  }

  function start() {
    document.querySelectorAll("form[data-implied-scopes]").forEach(setup);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
