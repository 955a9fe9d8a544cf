// jobstore console: refreshes the page's <main> every few seconds (at most 5 s) without a
// reload, keeping the scroll position and open <details>. Pages work without it.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.hasAttribute("data-refresh")) { return; }
  var every = Math.min(parseInt(main.getAttribute("data-refresh"), 10) || 4000, 5000);
  function busy() {
    var a = document.activeElement;
    return a && main.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName);
  }
  function tick() {
    if (document.hidden || busy()) { return; }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
      .then(function (text) {
        if (!text) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        if (!fresh) { return; }
        var open = Array.prototype.map.call(
          main.querySelectorAll("details[open][id]"), function (d) { return d.id; });
        var x = window.scrollX, y = window.scrollY;
        main.innerHTML = fresh.innerHTML;
        open.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) { d.open = true; }
        });
        window.scrollTo(x, y);
        main.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* offline for a moment: the next tick tries again */ });
  }
  window.setInterval(tick, every);
})();
