// cshare dashboard: live fragments, confirmations and uploads. No library.
// A page names its event topics on <body data-topics>; each element with
// data-frag="NAME" is re-fetched from the same page with ?frag=NAME when an
// event arrives on GET /v1/events (server-sent events), or every 5 s when
// the stream is not there (or fails).
//
// window.cshareLive counts the fragment refreshes done, by cause ("event":
// the stream said something changed; "poll": the fallback timer), so that
// a test can tell which one brought a change. A test may set
// window.csharePollMs before this script runs (the browser's
// add-script-on-new-document): the fallback's period, 0 for none.
(function () {
  "use strict";
  var body = document.body;
  var live = document.getElementById("live");
  var say = function (s) { if (live) live.textContent = "live: " + s; };
  var frags = document.querySelectorAll("[data-frag]");
  var busy = false, again = null;
  var counts = window.cshareLive = { event: 0, poll: 0 };
  var pollMs = typeof window.csharePollMs === "number" ? window.csharePollMs : 5000;

  function refresh(cause) {
    if (busy) { again = again || cause; return; }
    busy = true;
    var jobs = Array.prototype.map.call(frags, function (el) {
      var u = new URL(window.location.href);
      u.searchParams.set("frag", el.getAttribute("data-frag"));
      return fetch(u.toString(), { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
        .then(function (r) {
          if (r.status === 401) { say("signed out"); stop(); return null; }
          return r.text();
        })
        .then(function (html) { if (html !== null && html !== undefined) el.innerHTML = html; });
    });
    Promise.all(jobs).then(function () { counts[cause]++; }, function () { say("node unreachable, retrying"); }).then(function () {
      busy = false;
      if (again) { var c = again; again = null; refresh(c); }
    });
  }

  var timer = null, es = null;
  function stop() { if (timer) clearInterval(timer); timer = null; if (es) es.close(); es = null; }
  function poll() {
    if (pollMs <= 0) { say("stream interrupted; no polling"); return; } // a test's: the stream reconnects by itself
    if (es) { es.close(); es = null; }
    if (!timer) { timer = setInterval(function () { refresh("poll"); }, pollMs); say("polling every " + pollMs / 1000 + " s"); }
  }

  var topics = body.getAttribute("data-topics");
  if (frags.length && topics) {
    if (window.EventSource) {
      es = new EventSource("/v1/events?topics=" + encodeURIComponent(topics));
      es.onopen = function () { say("event stream"); };
      es.onmessage = function () { refresh("event"); };
      es.onerror = poll; // no stream (404), or it failed: poll instead
      // The stream's event types (event: TYPE); each refreshes the page's
      // fragments, and the overview lists it.
      ["ledger.entry", "machine.online", "machine.offline", "machine.pending", "machine.approved",
       "machine.rejected", "machine.removed", "machine.capped", "job.submitted", "job.done", "job.failed", "job.cancelled",
       "item.done", "item.failed", "contract.created", "contract.started", "contract.stopped",
       "contract.ending", "member.joined", "member.removed", "settings.changed"].forEach(function (t) {
        es.addEventListener(t, function (e) { note(t, e.data); refresh("event"); });
      });
    } else {
      poll();
    }
  } else {
    say("static page");
  }

  // note adds an event to the overview's list of recent events.
  function note(type, data) {
    var ul = document.getElementById("live-events");
    if (!ul) return;
    var li = document.createElement("li");
    li.textContent = "just now " + type + (data ? " " + data.slice(0, 200) : "");
    ul.insertBefore(li, ul.firstChild);
    while (ul.children.length > 20) ul.removeChild(ul.lastChild);
  }

  // Forms with data-confirm ask first.
  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });

  // Dataset upload with progress.
  var up = document.getElementById("upload-form");
  if (up) {
    up.addEventListener("submit", function (e) {
      e.preventDefault();
      var bar = document.getElementById("upload-progress");
      var status = document.getElementById("upload-status");
      var x = new XMLHttpRequest();
      x.open("POST", up.action);
      x.setRequestHeader("X-CSRF-Token", body.getAttribute("data-csrf"));
      bar.hidden = false;
      x.upload.onprogress = function (p) {
        if (p.lengthComputable) { bar.value = Math.round(100 * p.loaded / p.total); status.textContent = bar.value + "% sent"; }
      };
      x.onload = function () {
        var a = {};
        try { a = JSON.parse(x.responseText); } catch (err) { a = { error: "upload: the node answered " + x.status }; }
        if (a.error) { status.textContent = a.error; bar.hidden = true; return; }
        status.textContent = "added " + a.added.name;
        window.location.reload();
      };
      x.onerror = function () { status.textContent = "upload: the node could not be reached"; };
      var fd = new FormData(up);
      fd.delete("csrf");
      var f = fd.get("file"); fd.delete("file"); fd.append("file", f); // the file last: the name comes first
      x.send(fd);
    });
  }
})();
