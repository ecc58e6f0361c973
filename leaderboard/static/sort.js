// Sortable tables for the KernelBench leaderboard (progressive enhancement: the server-rendered
// order is already the ranking; this only lets a reader re-sort by another column), and opening
// the kernel source a "view" link points at.
(function () {
  "use strict";

  function cellValue(row, index, kind) {
    var cell = row.cells[index];
    if (!cell) { return kind === "number" ? -Infinity : ""; }
    var raw = cell.getAttribute("data-value");
    if (raw === null) { raw = cell.textContent.trim(); }
    if (kind === "number") {
      var v = parseFloat(raw);
      return isNaN(v) ? -Infinity : v;
    }
    return raw.toLowerCase();
  }

  function sortTable(table, th, index) {
    var kind = th.getAttribute("data-sort");
    var current = th.getAttribute("aria-sort");
    var first = th.getAttribute("data-first") || (kind === "number" ? "descending" : "ascending");
    var next = current === "none" || current === null ? first
      : (current === "ascending" ? "descending" : "ascending");
    var headers = table.tHead.rows[0].cells;
    for (var i = 0; i < headers.length; i++) {
      if (headers[i].hasAttribute("data-sort")) { headers[i].setAttribute("aria-sort", "none"); }
    }
    th.setAttribute("aria-sort", next);
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var sign = next === "ascending" ? 1 : -1;
    rows.forEach(function (r, i) { r.setAttribute("data-pos", String(i)); });
    rows.sort(function (a, b) {
      var va = cellValue(a, index, kind), vb = cellValue(b, index, kind);
      if (va < vb) { return -sign; }
      if (va > vb) { return sign; }
      return parseInt(a.getAttribute("data-pos"), 10) - parseInt(b.getAttribute("data-pos"), 10);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  function enhance(table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, index) {
      if (!th.hasAttribute("data-sort")) { return; }
      var button = document.createElement("button");
      button.type = "button";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      th.appendChild(button);
      if (!th.hasAttribute("aria-sort")) { th.setAttribute("aria-sort", "none"); }
      button.addEventListener("click", function () { sortTable(table, th, index); });
    });
  }

  // "view" links point at a collapsed <details> holding a kernel's source: open it on arrival.
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === "DETAILS") { el.open = true; }
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), enhance);
    openTarget();
  });
  window.addEventListener("hashchange", openTarget);
})();
