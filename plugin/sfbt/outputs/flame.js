// The script inside `sfbt flame`'s SVG: zoom (click a frame; "Reset zoom"
// or Escape), search (Ctrl-F or "Search": frames whose names match a
// regular expression are highlighted and the share of samples under them
// is shown), and a width that follows the window.  Each frame is a
// <g class="f"> with data-name, data-s (its first sample), data-v (its
// samples) and data-d (its depth); positions are percentages of the
// graph's width, so the drawing is right before the script runs, and
// without it.
"use strict";

var HIGHLIGHT = "rgb(230,0,230)";

// Where a frame goes when the graph is zoomed on ``focus``: {x, w} as
// fractions of the width (dim: a caller of the focus, drawn below it), or
// null when it is not shown.
function zoomed(frame, focus) {
  var inside = frame.s >= focus.s && frame.s + frame.v <= focus.s + focus.v;
  var span = focus.v || 1;  // a graph of no samples
  if (inside && frame.d >= focus.d) {
    return {x: (frame.s - focus.s) / span, w: frame.v / span, dim: false};
  }
  var around = frame.s <= focus.s && frame.s + frame.v >= focus.s + focus.v;
  if (around && frame.d < focus.d) return {x: 0, w: 1, dim: true};
  return null;
}

// The samples under frames whose names match, each sample counted once
// (a matching frame inside another adds nothing).
function matchedSamples(frames, matches) {
  var spans = frames.filter(function (f) { return matches(f.name); })
    .map(function (f) { return [f.s, f.s + f.v]; })
    .sort(function (a, b) { return a[0] - b[0]; });
  var total = 0, end = -Infinity;
  spans.forEach(function (span) {
    if (span[1] > end) {
      total += span[1] - Math.max(span[0], end);
      end = span[1];
    }
  });
  return total;
}

// A test of names: the term as a regular expression, or as plain text
// when it is not one.
function nameTest(term) {
  var pattern;
  try {
    pattern = new RegExp(term);
  } catch (error) {
    pattern = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  }
  return function (name) { return pattern.test(name); };
}

// The name cut to what fits ``pixels`` (as flame.py cuts the first labels).
function fitted(name, pixels) {
  var room = Math.floor((pixels - 6) / 7);
  if (room < 3) return "";
  return name.length <= room ? name : name.substring(0, room - 2) + "..";
}

function matchedText(count, total) {
  return "Matched: " + (100 * count / total).toFixed(2) + "% (" + count + " of " +
    total + " samples)";
}

function percent(fraction) {
  return (100 * fraction).toFixed(4) + "%";
}

function start(document, window) {
  var svg = document.documentElement;
  var total = +svg.getAttribute("data-total"), margin = +svg.getAttribute("data-margin");
  var bands = Array.prototype.slice.call(document.querySelectorAll("svg.band"));
  var unzoom = document.getElementById("unzoom"), search = document.getElementById("search");
  var matched = document.getElementById("matched"), status = document.getElementById("status");
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f")).map(function (g) {
    var rect = g.querySelector("rect");
    return {g: g, rect: rect, text: g.querySelector("text"), fill: rect.getAttribute("fill"),
            tip: g.querySelector("title").textContent, name: g.getAttribute("data-name"),
            s: +g.getAttribute("data-s"), v: +g.getAttribute("data-v"),
            d: +g.getAttribute("data-d")};
  });
  var focus = frames[0], matches = null, width = 0, hint = status.textContent;

  function draw() {
    frames.forEach(function (f) {
      var place = zoomed(f, focus);
      f.g.style.display = place && place.w * width >= 0.5 ? "" : "none";
      if (!place) return;
      f.rect.setAttribute("x", percent(place.x));
      f.rect.setAttribute("width", percent(place.w));
      f.rect.setAttribute("fill", matches && matches(f.name) ? HIGHLIGHT : f.fill);
      f.text.setAttribute("x", percent(place.x));
      f.text.textContent = fitted(f.name, place.w * width);
      f.g.style.opacity = place.dim ? 0.6 : 1;
    });
    unzoom.style.display = focus === frames[0] ? "none" : "";
  }

  function resize() {
    width = Math.max(svg.getBoundingClientRect().width - 2 * margin, 1);
    bands.forEach(function (band) { band.setAttribute("width", width); });
    draw();
  }

  function find(term) {
    matches = term ? nameTest(term) : null;
    matched.textContent = matches ? matchedText(matchedSamples(frames, matches), total) : "";
    search.textContent = matches ? "Reset search" : "Search";
    draw();
  }

  function ask() {
    find(window.prompt("Search for (a regular expression):", "") || "");
  }

  frames.forEach(function (f) {
    f.g.addEventListener("click", function () { focus = f; draw(); });
    f.g.addEventListener("mouseover", function () { status.textContent = f.tip; });
    f.g.addEventListener("mouseout", function () { status.textContent = hint; });
  });
  unzoom.addEventListener("click", function () { focus = frames[0]; draw(); });
  search.addEventListener("click", function () { if (matches) find(""); else ask(); });
  document.addEventListener("keydown", function (event) {
    if ((event.ctrlKey || event.metaKey) && event.key === "f") {
      event.preventDefault();  // the browser's own search does not see the frames
      ask();
    } else if (event.key === "Escape") {
      focus = frames[0];
      find("");
    }
  });
  window.addEventListener("resize", resize);
  svg.setAttribute("width", "100%");
  resize();
}

start(document, window);
