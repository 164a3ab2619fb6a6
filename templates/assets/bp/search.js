/* Pagefind search box: a static index under /pagefind/, no network beyond this site. */
(function () {
  "use strict";
  var box = document.getElementById("bp-search");
  if (!box || !window.PagefindUI) return;
  // The hubs and the GPU x model pages are indexed; a config page is reached from them.
  var ui = new window.PagefindUI({
    element: "#bp-search",
    showImages: false,
    showSubResults: false,
    resetStyles: false,
    pageSize: 8,
    translations: { placeholder: "Search: e.g. 4090 llama 3.1 8b q4" }
  });
  var q = new URLSearchParams(window.location.search).get("q");
  if (q) ui.triggerSearch(q);
})();
