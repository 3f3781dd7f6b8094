// Runs the script of an `sfbt flame` SVG under node in a small stand-in
// for the browser's DOM, and reports what it drew after each step.
//
// stdin: {"tree": the SVG as {tag, attrs, text, children}, "script": its
// script, "steps": [{do: "resize", width} | {do: "key", key, ctrl, answer}
// | {do: "click", frame: index | id: "element id", answer}
// | {do: "hover", frame: index}]}
// stdout: one state per step (after the first drawing, then after each):
// {frames: [{name, s, shown, x, width, text, fill, opacity}], svgWidth, bands,
//  ids: {id: {text, shown}}, prevented}
"use strict";
const vm = require("vm");

class Element {
  constructor(node, parent) {
    this.tag = node.tag;
    this.attrs = Object.assign({}, node.attrs);
    this.ownText = node.text || "";
    this.parent = parent;
    this.style = {};
    this.listeners = {};
    this.children = (node.children || []).map((child) => new Element(child, this));
    if (this.attrs.style === "display: none") this.style.display = "none";
  }
  getAttribute(name) { return name in this.attrs ? this.attrs[name] : null; }
  setAttribute(name, value) { this.attrs[name] = String(value); }
  get textContent() {
    return this.ownText + this.children.map((child) => child.textContent).join("");
  }
  set textContent(value) { this.ownText = String(value); this.children = []; }
  matches(selector) {
    const [tag, cls] = selector.split(".");
    const classes = (this.attrs.class || "").split(" ");
    return (!tag || tag === this.tag) && (!cls || classes.includes(cls));
  }
  querySelectorAll(selector) {
    const found = [];
    const walk = (element) => element.children.forEach((child) => {
      if (child.matches(selector)) found.push(child);
      walk(child);
    });
    walk(this);
    return found;
  }
  querySelector(selector) { return this.querySelectorAll(selector)[0] || null; }
  addEventListener(type, listener) {
    (this.listeners[type] = this.listeners[type] || []).push(listener);
  }
  dispatch(type, event) { (this.listeners[type] || []).forEach((l) => l(event)); }
}

const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const root = new Element(input.tree, null);
let innerWidth = 1200, answer = null, prompts = 0;
root.getBoundingClientRect = () => ({width: innerWidth});
const document = new Element({tag: "#document"}, null);
document.documentElement = root;
document.querySelectorAll = (selector) =>
  (root.matches(selector) ? [root] : []).concat(root.querySelectorAll(selector));
document.querySelector = (selector) => document.querySelectorAll(selector)[0] || null;
document.getElementById = (id) =>
  [root].concat(root.querySelectorAll("")).find((e) => e.attrs.id === id) || null;
const window = new Element({tag: "#window"}, null);
window.prompt = () => { prompts += 1; return answer; };

const shown = (element) => {
  for (let e = element; e; e = e.parent) if (e.style.display === "none") return false;
  return true;
};
const state = (prevented) => ({
  frames: root.querySelectorAll("g.f").map((g) => ({
    name: g.getAttribute("data-name"),
    s: +g.getAttribute("data-s"),
    shown: shown(g),
    x: g.querySelector("rect").getAttribute("x"),
    width: g.querySelector("rect").getAttribute("width"),
    text: g.querySelector("text").textContent,
    fill: g.querySelector("rect").getAttribute("fill"),
    opacity: g.style.opacity === undefined ? 1 : +g.style.opacity,
  })),
  svgWidth: root.getAttribute("width"),
  bands: root.querySelectorAll("svg.band").map((band) => band.getAttribute("width")),
  ids: Object.fromEntries(["unzoom", "search", "matched", "status", "details"].map((id) => {
    const e = document.getElementById(id);
    return [id, {text: e.textContent, shown: shown(e)}];
  })),
  prevented, prompts,
});

const context = vm.createContext({document, window});
vm.runInContext(input.script, context);
const states = [state(false)];
for (const step of input.steps) {
  let prevented = false;
  const event = {key: step.key, ctrlKey: !!step.ctrl, metaKey: false,
                 preventDefault: () => { prevented = true; }};
  answer = step.answer === undefined ? null : step.answer;
  const frames = root.querySelectorAll("g.f");
  if (step.do === "resize") {
    innerWidth = step.width;
    window.dispatch("resize", {});
  } else if (step.do === "key") {
    document.dispatch("keydown", event);
  } else if (step.do === "click") {
    const target = step.id ? document.getElementById(step.id) : frames[step.frame];
    target.dispatch("click", event);
  } else if (step.do === "hover") {
    frames[step.frame].dispatch("mouseover", event);
  }
  states.push(state(prevented));
}
// the script's own functions, on cases the drawing above does not reach
const logic = vm.runInContext(`({
  plain: nameTest("a(b")("xa(by"),
  regex: nameTest("^comp")("compute") && !nameTest("^comp")("recompute"),
  nested: matchedSamples([{name: "f", s: 0, v: 10}, {name: "f", s: 2, v: 3},
                          {name: "f", s: 12, v: 4}], function () { return true; }),
  fit: [fitted("compute", 20), fitted("compute", 50), fitted("compute", 200)],
})`, context);
process.stdout.write(JSON.stringify({states, logic}));
