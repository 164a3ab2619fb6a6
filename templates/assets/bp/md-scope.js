/* mkdocs-material's bootstrap (partials/javascripts/base.html), as a file rather than an inline
   script: the pages' Content-Security-Policy runs scripts from this site only. The scope is the
   site root, found from this file's own address (assets/bp/md-scope.js). */
__md_scope = new URL("../../", document.currentScript.src);
__md_hash = function (e) { return [...e].reduce(function (e, t) { return (e << 5) - e + t.charCodeAt(0); }, 0); };
__md_get = function (e, t, n) {
  t = t || localStorage; n = n || __md_scope;
  return JSON.parse(t.getItem(n.pathname + "." + e));
};
__md_set = function (e, t, n, r) {
  n = n || localStorage; r = r || __md_scope;
  try { n.setItem(r.pathname + "." + e, JSON.stringify(t)); } catch (err) { /* storage full or off */ }
};
