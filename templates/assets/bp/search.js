/* Pagefind search box: static indexes under /pagefind/ and /pagefind-configs/, no network beyond this site. */
(function () {
  "use strict";
  var box = document.getElementById("bp-search");
  if (!box || !window.PagefindUI) return;
  // The config pages have a bundle of their own beside /pagefind/ (see
  // generator/site_search.py); every query searches both.
  var script = document.querySelector('script[src$="pagefind/pagefind-ui.js"]');
  var configs = script ? script.src.replace(/pagefind\/pagefind-ui\.js$/, "pagefind-configs/") : null;
  var ui = new window.PagefindUI({
    element: "#bp-search",
    mergeIndex: configs ? [{ bundlePath: configs }] : [],
    showImages: false,
    showSubResults: false,
    resetStyles: false,
    pageSize: 8,
    translations: { placeholder: "Search: e.g. 4090 llama 3.1 8b q4" }
  });
  var q = new URLSearchParams(window.location.search).get("q");
  if (q) ui.triggerSearch(q);
})();
