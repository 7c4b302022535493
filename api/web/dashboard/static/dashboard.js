// flagsight dashboard: progressive enhancement only. Every page works without this file.
// 1. A copy button beside a newly created API key.
// 2. Moving and removing rules in the flag editor without a round trip (the form still
//    posts the whole draft; rows repeat their field names, so order is document order).
// 3. A confirmation before an irreversible or production-affecting action: a form with
//    data-confirm="question" asks it first (no inline script: the CSP stays strict). The
//    flag editor asks only when saving would disable or archive the flag (its checkboxes'
//    data-confirm-unchecked / data-confirm-checked), and the segment form only when its key
//    names an existing segment (the table row's data-replace-question).
// 4. The filter of a segment's member sample, as the visitor types.
// 5. A segment condition's values hint follows the operator chosen (the page renders the
//    hint of the operator it was loaded with).
"use strict";

function enableCopyButtons() {
  document.querySelectorAll("[data-copy-target]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy-target"));
    var status = button.parentElement.querySelector(".copy-status");
    if (!source) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      source.select();
      var done = function () { if (status) { status.textContent = "Copied"; } };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.value).then(done, function () {
          document.execCommand("copy"); done();
        });
      } else {
        document.execCommand("copy"); done();
      }
    });
  });
}

function renumberRules(list) {
  var rows = list.querySelectorAll("[data-rule]");
  rows.forEach(function (row, index) {
    row.querySelectorAll("[data-move]").forEach(function (button) {
      var verb = button.getAttribute("data-move");
      button.value = verb + ":" + index;
      var label = button.querySelector(".visually-hidden");
      if (label) { label.textContent = " rule " + (index + 1); }
      if (verb === "up") { button.disabled = index === 0; }
      if (verb === "down") { button.disabled = index === rows.length - 1; }
    });
  });
}

// The status line keeps its place whether empty or not, so announcing a draft never shifts
// the layout under the pointer.
function markDraft() {
  var status = document.querySelector("[data-draft-status]");
  if (status) { status.textContent = "Changes not saved yet: press \u201cSave flag\u201d."; }
}

function enableRuleEditor() {
  var form = document.querySelector("[data-rule-editor]");
  if (!form) { return; }
  var list = form.querySelector("[data-rules]");
  form.addEventListener("click", function (event) {
    var button = event.target.closest("[data-move]");
    if (!button || !list.contains(button)) { return; }
    event.preventDefault();
    var row = button.closest("[data-rule]");
    var verb = button.getAttribute("data-move");
    var focusTarget = null;
    if (verb === "up" && row.previousElementSibling) {
      list.insertBefore(row, row.previousElementSibling);
      focusTarget = row.querySelector('[data-move="up"]');
    } else if (verb === "down" && row.nextElementSibling) {
      list.insertBefore(row.nextElementSibling, row);
      focusTarget = row.querySelector('[data-move="down"]');
    } else if (verb === "remove") {
      var next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      focusTarget = next ? next.querySelector('[data-move="remove"]') : form.querySelector(".add-rules button");
    }
    renumberRules(list);
    markDraft();
    if (focusTarget && focusTarget.disabled) {
      focusTarget = row.querySelector('[data-move="remove"]');
    }
    if (focusTarget) { focusTarget.focus(); }
  });
  form.addEventListener("change", function () { markDraft(); });
}

// What saving the flag editor would switch off: only "Save flag" saves; the editor's other
// buttons (add, move, remove without script) only show the draft again.
function editorQuestions(form, submitter) {
  if (submitter && submitter.name === "op" && submitter.value !== "save") { return []; }
  var questions = [];
  form.querySelectorAll("input[data-confirm-unchecked]").forEach(function (box) {
    if (!box.checked) { questions.push(box.getAttribute("data-confirm-unchecked")); }
  });
  form.querySelectorAll("input[data-confirm-checked]").forEach(function (box) {
    if (box.checked) { questions.push(box.getAttribute("data-confirm-checked")); }
  });
  return questions;
}

function replaceQuestions(form) {
  var key = form.querySelector('[name="key"]');
  if (!form.hasAttribute("data-confirm-replace") || !key) { return []; }
  var wanted = key.value.trim();
  var questions = [];
  document.querySelectorAll("[data-segment]").forEach(function (row) {
    if (row.getAttribute("data-segment") === wanted) {
      questions.push(row.getAttribute("data-replace-question"));
    }
  });
  return questions;
}

function confirmationQuestions(form, submitter) {
  if (form.hasAttribute("data-confirm")) { return [form.getAttribute("data-confirm")]; }
  return editorQuestions(form, submitter).concat(replaceQuestions(form));
}

function enableConfirmations() {
  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form");
    if (!form) { return; }
    var questions = confirmationQuestions(form, event.submitter);
    if (questions.length && !window.confirm(questions.join("\n\n"))) {
      event.preventDefault();
    }
  });
}

function enableMemberFilter() {
  var input = document.querySelector("[data-member-filter]");
  var list = document.querySelector("[data-members]");
  if (!input || !list) { return; }
  var count = document.querySelector("[data-member-count]");
  input.addEventListener("input", function () {
    var needle = input.value.trim().toLowerCase();
    var shown = 0;
    list.querySelectorAll("li").forEach(function (item) {
      var match = item.textContent.toLowerCase().indexOf(needle) !== -1;
      item.hidden = !match;
      if (match) { shown += 1; }
    });
    if (count) { count.textContent = shown + " shown"; }
  });
}

function enableOperatorHints() {
  document.querySelectorAll("[data-condition-row]").forEach(function (row) {
    var select = row.querySelector("[data-operator]");
    var hint = row.querySelector("[data-operator-hint]");
    if (!select || !hint) { return; }
    select.addEventListener("change", function () {
      var chosen = select.options[select.selectedIndex];
      hint.textContent = chosen ? chosen.getAttribute("data-hint") : "";
    });
  });
}

document.addEventListener("DOMContentLoaded", function () {
  enableCopyButtons();
  enableRuleEditor();
  enableConfirmations();
  enableMemberFilter();
  enableOperatorHints();
});
