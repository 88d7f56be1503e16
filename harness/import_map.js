// Writes the page's import map from this script tag's data-map, so that
// ?build=threads can point the diagnostics package at its threaded build (a
// cross-origin isolated page only). A classic script, loaded before any
// module: an import map must precede the imports it maps.
{
  const map = JSON.parse(document.currentScript.dataset.map);
  if (new URLSearchParams(location.search).get("build") === "threads") {
    map.imports["/pkg-diagnostics/readout.js"] = "/pkg-diagnostics/threads/readout.js";
  }
  const s = document.createElement("script");
  s.type = "importmap";
  s.textContent = JSON.stringify(map);
  document.currentScript.after(s);
}
