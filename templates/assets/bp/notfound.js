/* 404.html: a config's permalink with no page (the config does not fit) goes to its row.
 *
 * /<base>/gpu/<gpu>/<model>/<quant>/<ctx>/[kv-<dtype>/] becomes
 * /<base>/gpu/<gpu>/<model>/#<quant>-<ctx>[-kv-<dtype>] (generator/site/links.py).
 * Every segment must be a catalog id (catalog/fields.py ID_PATTERN) and the
 * target is a path on this origin: nothing else is ever followed, so no address
 * typed or linked can send a reader off the site.
 */
(function () {
  "use strict";
  var ID = "[a-z0-9][a-z0-9._-]{0,79}";
  var CTX = "[0-9]{1,7}k?";
  var PERMALINK = new RegExp(
    "^((?:/" + ID + ")*)/gpu/(" + ID + ")/(" + ID + ")/(" + ID + ")/(" + CTX + ")/" +
      "(?:kv-(" + ID + ")/)?(?:index\\.html)?$"
  );

  function target(pathname) {
    var m = typeof pathname === "string" ? PERMALINK.exec(pathname) : null;
    if (!m) return null;
    var anchor = m[4] + "-" + m[5] + (m[6] ? "-kv-" + m[6] : "");
    var path = m[1] + "/gpu/" + m[2] + "/" + m[3] + "/";
    var url = new URL(path + "#" + anchor, window.location.origin);
    if (url.origin !== window.location.origin || url.pathname !== path) return null;
    return url.pathname + url.hash;
  }

  window.bpNotFoundTarget = target;
  var to = target(window.location.pathname);
  if (to === null) return;
  var link = document.getElementById("bp-moved-link");
  if (link) {
    link.setAttribute("href", to);
    link.textContent = to;
    link.parentNode.hidden = false;
  }
  window.location.replace(to);
})();
