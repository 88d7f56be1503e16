// Writes the page's import map from this script tag's data-map, so that
// ?build=threads can point the diagnostics package at its threaded build (a
// cross-origin isolated page only) and ?build=relaxed at its relaxed build
// (any page). A classic script, loaded before any
// module: an import map must precede the imports it maps.
{
  const map = JSON.parse(document.currentScript.dataset.map);
  const build = new URLSearchParams(location.search).get("build");
  if (build === "threads" || build === "relaxed") {
    map.imports["/pkg-diagnostics/readout.js"] = `/pkg-diagnostics/${build}/readout.js`;
  }
  const s = document.createElement("script");
  s.type = "importmap";
  s.textContent = JSON.stringify(map);
  document.currentScript.after(s);
}
