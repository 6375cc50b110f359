/* Fleetwatch pages: live refresh, ages and local times, copy buttons, the theme toggle.
 *
 * Live refresh: every element marked [data-live] is an htmx fragment that
 * re-fetches itself on the "fw-refresh" event. This script fires that event
 * every 1/3/5/10 s (the choice and pause are kept in localStorage), marks a
 * fragment whose refresh failed as stale, and tells the charts (event
 * "fw:tick" on document) when to reload. Nothing here needs a build step.
 */
(function () {
  "use strict";

  var INTERVALS = [1, 3, 5, 10];
  var KEY_INTERVAL = "fw.refresh.interval";
  var KEY_PAUSED = "fw.refresh.paused";
  var KEY_THEME = "fw.theme";

  function stored(key, fallback) {
    try {
      var value = localStorage.getItem(key);
      return value === null ? fallback : value;
    } catch (e) {
      return fallback;
    }
  }

  function store(key, value) {
    try { localStorage.setItem(key, value); } catch (e) { /* private mode: not remembered */ }
  }

  // --- ages and local times ------------------------------------------------------------

  var seenAt = new WeakMap();

  function ageText(seconds) {
    seconds = Math.max(0, seconds);
    if (seconds < 120) return Math.round(seconds) + " s ago";
    if (seconds < 7200) return Math.round(seconds / 60) + " min ago";
    if (seconds < 172800) return (seconds / 3600).toFixed(1) + " h ago";
    return Math.round(seconds / 86400) + " d ago";
  }

  function two(n) { return (n < 10 ? "0" : "") + n; }

  function localText(date) {
    var zone = "";
    try {
      zone = date.toLocaleTimeString(undefined, { timeZoneName: "short" }).split(" ").pop();
    } catch (e) { /* no zone name */ }
    return date.getFullYear() + "-" + two(date.getMonth() + 1) + "-" + two(date.getDate()) + " " +
      two(date.getHours()) + ":" + two(date.getMinutes()) + ":" + two(date.getSeconds()) + (zone ? " " + zone : "");
  }

  function localise(root) {
    root.querySelectorAll("time.local:not([data-localised])").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (!isNaN(date)) {
        el.textContent = localText(date);
        el.title = el.getAttribute("datetime");
      }
      el.setAttribute("data-localised", "");
    });
    root.querySelectorAll("time.ago").forEach(function (el) {
      if (!seenAt.has(el)) seenAt.set(el, { at: Date.now(), text: el.textContent });
      if (!el.hasAttribute("data-localised")) {
        var date = new Date(el.getAttribute("datetime"));
        if (!isNaN(date)) el.title = localText(date);
        el.setAttribute("data-localised", "");
      }
    });
  }

  // An age keeps growing between refreshes (and while paused): the server's
  // age at render time plus the time this element has been on the page, so a
  // browser clock that is off does not matter.
  function tickAges() {
    document.querySelectorAll("time.ago[data-t][data-now]").forEach(function (el) {
      var seen = seenAt.get(el);
      if (!seen) return;
      var age = parseFloat(el.getAttribute("data-now")) - parseFloat(el.getAttribute("data-t")) +
        (Date.now() - seen.at) / 1000;
      if (!isNaN(age)) el.textContent = ageText(age);
    });
  }

  // --- live refresh -------------------------------------------------------------------

  var controls, stateLabel, updatedLabel, toggleButton, intervalSelect;
  var interval = parseInt(stored(KEY_INTERVAL, "1"), 10);
  if (INTERVALS.indexOf(interval) < 0) interval = 1;
  var paused = stored(KEY_PAUSED, "0") === "1";
  var timer = null;
  var lastOk = null;
  var failing = false;

  function liveElements() {
    return document.querySelectorAll("[data-live]");
  }

  function render() {
    if (!controls) return;
    controls.classList.toggle("is-paused", paused);
    controls.classList.toggle("is-failing", failing);
    stateLabel.textContent = failing ? "Update failed" : (paused ? "Paused" : "Live");
    toggleButton.textContent = paused ? "Resume" : "Pause";
    toggleButton.setAttribute("aria-pressed", paused ? "true" : "false");
    intervalSelect.value = String(interval);
    if (lastOk === null) {
      updatedLabel.textContent = "";
    } else {
      var seconds = Math.round((Date.now() - lastOk) / 1000);
      updatedLabel.textContent = "updated " + (seconds < 1 ? "just now" : ageText(seconds));
    }
  }

  function refresh() {
    if (window.htmx) {
      liveElements().forEach(function (el) { window.htmx.trigger(el, "fw-refresh"); });
    }
    document.dispatchEvent(new CustomEvent("fw:tick", { detail: { interval: interval } }));
  }

  function schedule() {
    if (timer) clearTimeout(timer);
    timer = setTimeout(function () {
      if (!paused && !document.hidden) refresh();
      schedule();
    }, interval * 1000);
  }

  function setPaused(value) {
    paused = value;
    store(KEY_PAUSED, paused ? "1" : "0");
    render();
    if (!paused) refresh();
  }

  function isLive(el) {
    return el && el.closest && el.closest("[data-live]") === el;
  }

  function markOk() {
    lastOk = Date.now();
    failing = false;
    render();
  }

  function markFailed(el) {
    if (el) el.classList.add("is-stale");
    failing = true;
    render();
  }

  // Charts report their own fetches the same way.
  window.fleetwatchLive = { ok: markOk, failed: markFailed, isPaused: function () { return paused; } };

  // --- <details> that stay open across refreshes ------------------------------------------

  var openChoice = {};

  document.addEventListener("toggle", function (event) {
    var el = event.target;
    if (el.tagName === "DETAILS" && el.id && el.hasAttribute("data-keep-open") && el.isConnected) {
      openChoice[el.id] = el.open;
    }
  }, true);

  function keepOpen(root) {
    root.querySelectorAll("details[data-keep-open][id]").forEach(function (el) {
      if (Object.prototype.hasOwnProperty.call(openChoice, el.id)) el.open = openChoice[el.id];
    });
  }

  // --- copy buttons -------------------------------------------------------------------------

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { return fallbackCopy(text); });
    }
    return Promise.resolve(fallbackCopy(text));
  }

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    copyText(source.textContent).then(function (ok) {
      button.textContent = ok === false ? "Select and copy" : "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    });
  });

  // --- theme ------------------------------------------------------------------------------

  function toggleTheme() {
    var next = document.documentElement.getAttribute("data-theme") === "dark" ? "light" : "dark";
    document.documentElement.setAttribute("data-theme", next);
    store(KEY_THEME, next);
    document.dispatchEvent(new CustomEvent("fw:theme", { detail: { theme: next } }));
  }

  // --- wiring -----------------------------------------------------------------------------

  document.addEventListener("htmx:afterSwap", function (event) {
    if (isLive(event.detail.elt) || isLive(event.detail.target)) markOk();
  });
  ["htmx:responseError", "htmx:sendError", "htmx:timeout"].forEach(function (name) {
    document.addEventListener(name, function (event) {
      var el = event.detail.elt;
      if (isLive(el)) markFailed(el);
    });
  });
  document.addEventListener("htmx:load", function (event) {
    localise(event.detail.elt);
    keepOpen(event.detail.elt);
  });

  document.addEventListener("DOMContentLoaded", function () {
    controls = document.querySelector("[data-live-controls]");
    if (controls) {
      stateLabel = controls.querySelector("[data-live-state]");
      updatedLabel = controls.querySelector("[data-live-updated]");
      toggleButton = controls.querySelector("[data-live-toggle]");
      intervalSelect = controls.querySelector("[data-live-interval]");
      toggleButton.addEventListener("click", function () { setPaused(!paused); });
      controls.querySelector("[data-live-now]").addEventListener("click", refresh);
      intervalSelect.addEventListener("change", function () {
        var chosen = parseInt(intervalSelect.value, 10);
        if (INTERVALS.indexOf(chosen) >= 0) {
          interval = chosen;
          store(KEY_INTERVAL, String(interval));
          schedule();
          render();
        }
      });
    }
    var themeButton = document.querySelector("[data-theme-toggle]");
    if (themeButton) themeButton.addEventListener("click", toggleTheme);
    localise(document);
    lastOk = Date.now();  // the page itself is the first update
    render();
    schedule();
    setInterval(function () { tickAges(); render(); }, 1000);
  });
})();
