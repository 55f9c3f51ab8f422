// The report's only behaviour: filter the resource tree, expand and collapse it, and show a resource's inputs when it
// is opened (kept as JSON in the page, so that a large site stays a light page until someone looks).
"use strict";
(function () {
  const inputs = JSON.parse(document.getElementById("inputs-data").textContent);
  const resources = Array.from(document.querySelectorAll("#tree li.resource"));
  const filter = document.getElementById("filter");
  const shown = document.getElementById("filter-count");

  for (const item of resources) {
    const details = item.querySelector("details");
    details.addEventListener("toggle", function () {
      const pre = details.querySelector("pre.inputs");
      if (details.open && !pre.textContent) {
        pre.textContent = JSON.stringify(inputs[Number(item.dataset.index)], null, 2);
      }
    });
  }

  function applyFilter() {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    let count = 0;
    for (const item of resources) {
      const match = words.every(function (word) { return item.dataset.search.includes(word); });
      item.classList.toggle("hidden", !match);
      if (match) count += 1;
    }
    for (const group of document.querySelectorAll("#tree details.target, #tree details.component")) {
      const visible = group.querySelectorAll("li.resource:not(.hidden)").length;
      group.classList.toggle("hidden", visible === 0);
      group.querySelector(":scope > summary > .count").textContent = String(visible);
      if (words.length) group.open = visible > 0;
    }
    shown.textContent = count + " of " + resources.length;
  }

  filter.addEventListener("input", applyFilter);
  document.getElementById("expand-all").addEventListener("click", function () {
    for (const group of document.querySelectorAll("#tree details.target, #tree details.component")) group.open = true;
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    for (const group of document.querySelectorAll("#tree details")) group.open = false;
  });
})();
