// The entity graph: nodes are entities (size = memories naming them), edges join entities
// named by the same memory. Data from /api/graph; drawn with the vendored Cytoscape.js.
(function () {
  "use strict";
  var box = document.getElementById("graph");
  if (!box || typeof cytoscape !== "function") { return; }
  var colours = { technology: "#3559e0", file: "#168a55", concept: "#c2780a", person: "#d1363b",
                  project: "#7a4fd6" };
  var project = box.getAttribute("data-project") || "";
  fetch("/api/graph?project=" + encodeURIComponent(project), { credentials: "same-origin" })
    .then(function (r) { return r.json(); })
    .then(function (data) {
      if (!data.nodes || !data.nodes.length) {
        box.textContent = "No entities yet.";
        box.classList.add("empty");
        return;
      }
      var max = Math.max.apply(null, data.nodes.map(function (n) { return n.memories; }));
      var elements = data.nodes.map(function (n) {
        return { data: { id: "e" + n.id, entity: n.id, label: n.name, type: n.type,
                         size: 14 + 36 * Math.sqrt(n.memories / max) } };
      }).concat(data.edges.map(function (e) {
        return { data: { id: "r" + e.source + "-" + e.target, source: "e" + e.source, target: "e" + e.target,
                         weight: e.weight } };
      }));
      var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
      var cy = cytoscape({
        container: box,
        elements: elements,
        wheelSensitivity: 0.3,
        minZoom: 0.2,
        maxZoom: 4,
        style: [
          { selector: "node", style: {
              "background-color": function (n) { return colours[n.data("type")] || "#667085"; },
              "width": "data(size)", "height": "data(size)", "label": "data(label)",
              "font-size": 11, "color": dark ? "#e6e8ee" : "#1d2330",
              "text-valign": "bottom", "text-margin-y": 4,
              "text-outline-width": 2, "text-outline-color": dark ? "#1c1f26" : "#ffffff" } },
          { selector: "edge", style: {
              "width": function (e) { return Math.min(6, 0.6 + e.data("weight") * 0.6); },
              "line-color": dark ? "#3a4150" : "#cfd5df", "curve-style": "haystack", "opacity": 0.8 } },
          { selector: "node:selected", style: { "border-width": 3, "border-color": "#111" } }
        ],
        layout: { name: "cose", animate: false, randomize: false, nodeRepulsion: 9000, idealEdgeLength: 90,
                  numIter: 1200 }
      });
      cy.on("tap", "node", function (evt) {
        window.location.href = "/entity/" + evt.target.data("entity");
      });
      box.setAttribute("data-ready", String(data.nodes.length));
    })
    .catch(function (err) { box.textContent = "Could not load the graph: " + err; });
})();
