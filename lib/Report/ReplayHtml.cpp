//===- ReplayHtml.cpp - a replay's report as one HTML page -----------------===//
//
// `planproof replay --format html`: whether the plan stayed within the error model's
// tolerance, the first plan op that leaves it (with the plan excerpt), every output's
// errors, and per output a heat-map of each element's error over its tolerance (green
// within, red beyond; outputs of more than 64 x 64 elements binned, each cell the
// largest ratio of its bin). Like the verification page: inline CSS and SVG only.
//
//===----------------------------------------------------------------------===//
#include "Report/HtmlInternal.h"

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace planproof;
using html::esc;
using html::num;

namespace {

/// A colour for error/tolerance `r`: shades of green up to 1, then of red (log scale).
std::string shade(float r) {
  if (!(r <= 1)) {
    double t = std::isfinite(r) ? std::min(1.0, std::log10(r) / 6.0) : 1.0;
    int g = (int)(200 - 170 * t);
    char c[16];
    std::snprintf(c, sizeof c, "#%02x%02x%02x", 230 - (int)(40 * t), g, g);
    return c;
  }
  int v = (int)(245 - 90 * r);
  char c[16];
  std::snprintf(c, sizeof c, "#%02xf0%02x", v, v);
  return c;
}

std::string heatmap(const ReplayOutput &o) {
  if (o.ratio.empty())
    return "<p class=\"note\">(" + std::to_string(o.elements) + " elements: no map kept)</p>";
  int64_t cols = o.shape.empty() ? 1 : o.shape.back();
  int64_t rows = cols ? (int64_t)o.ratio.size() / cols : 0;
  int64_t binR = (rows + 63) / 64, binC = (cols + 63) / 64;
  int64_t nr = rows ? (rows + binR - 1) / binR : 0, nc = cols ? (cols + binC - 1) / binC : 0;
  const int cell = std::max<int>(4, std::min<int>(24, 320 / (int)std::max<int64_t>(1, std::max(nr, nc))));
  std::ostringstream svg;
  svg << "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"heatmap\" width=\""
      << nc * cell << "\" height=\"" << nr * cell << "\">";
  int64_t beyond = 0;
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t j = 0; j < nc; ++j) {
      float worst = 0;
      for (int64_t a = i * binR; a < std::min(rows, (i + 1) * binR); ++a)
        for (int64_t b = j * binC; b < std::min(cols, (j + 1) * binC); ++b)
          worst = std::max(worst, o.ratio[a * cols + b]);
      beyond += !(worst <= 1);
      svg << "<rect x=\"" << j * cell << "\" y=\"" << i * cell << "\" width=\"" << cell
          << "\" height=\"" << cell << "\" fill=\"" << shade(worst) << "\""
          << (!(worst <= 1) ? " class=\"beyond\"" : "") << "><title>" << num(worst)
          << " x tolerance</title></rect>";
    }
  std::string dims;
  for (int64_t s : o.shape)
    dims += (dims.empty() ? "" : " x ") + std::to_string(s);
  svg << "</svg><figcaption>" << esc(o.name) << " [" << dims << "]: error over tolerance per "
      << (binR * binC > 1 ? "bin of " + std::to_string(binR) + " x " + std::to_string(binC) +
                                " elements"
                          : std::string("element"))
      << " (rows: all but the last dimension); " << beyond << " beyond</figcaption></figure>";
  return svg.str();
}

std::string outputsTable(const ReplayResult &r) {
  std::ostringstream out;
  out << "<table class=\"outputs\"><tr><th>output</th><th>elements</th><th>max abs error</th>"
         "<th>max rel error</th><th>worst element (rank): plan vs reference</th><th></th></tr>";
  for (const ReplayOutput &o : r.outputs) {
    std::string worst;
    for (size_t k = 0; k < o.worst.size(); ++k)
      worst += (k ? "," : "") + std::to_string(o.worst[k]);
    out << "<tr><td>" << esc(o.name) << "</td><td>" << o.elements << "</td><td>"
        << num(o.maxAbsError) << "</td><td>" << num(o.maxRelError) << "</td><td>[" << worst
        << "] " << esc(o.worstRank) << ": " << num(o.worstPlan) << " vs "
        << num(o.worstReference) << " (tolerance " << num(o.worstTolerance) << ")</td><td"
        << (o.within ? ">within" : " class=\"diff\">beyond") << "</td></tr>";
  }
  return out.str() + "</table>";
}

} // namespace

std::string planproof::renderReplayHtml(const Spec &spec, const ReplayResult &r,
                                        const std::string &setting) {
  bool diverged = r.diverged();
  std::ostringstream out;
  out << html::head(spec.path + (diverged ? " diverged" : " within tolerance"))
      << "<h1>planproof replay: " << esc(spec.path) << "</h1><div><span class=\"verdict "
      << (diverged ? "violated" : "verified") << "\" id=\"verdict\">"
      << (diverged ? "diverged" : "within tolerance") << "</span> <span class=\"note\">"
      << esc(setting) << ", " << esc(r.device) << "</span></div>";
  const ReplayDivergence &f = r.first;
  if (f.found) {
    out << "<h2>First divergence</h2><section class=\"card violation\" id=\"divergence\"><div>"
        << "<span class=\"kind\">numerics</span> `" << esc(f.op) << "`";
    if (!f.value.empty()) {
      std::string local, global;
      for (size_t k = 0; k < f.local.size(); ++k)
        local += (k ? "," : "") + std::to_string(f.local[k]);
      for (size_t k = 0; k < f.global.size(); ++k)
        global += (k ? "," : "") + std::to_string(f.global[k]);
      out << " holds reference `" << esc(f.value) << "`, but on rank " << esc(f.rank)
          << " its element [" << local << "] (" << esc(f.value) << "[" << global << "]) is "
          << num(f.plan) << " against " << num(f.reference) << " (tolerance "
          << num(f.tolerance) << ")";
    } else {
      out << ": " << esc(f.note);
    }
    out << "</div><div class=\"note\">at " << esc(f.location.str()) << "</div>"
        << html::excerpt(spec, f.location) << "</section>";
  } else if (diverged && !f.note.empty()) {
    out << "<p class=\"note\">" << esc(f.note) << "</p>";
  }
  out << "<h2>Outputs</h2>" << outputsTable(r) << "<h2>Error over tolerance</h2>"
      << "<div class=\"pictures\">";
  // The outputs beyond tolerance first; at most 12 maps.
  std::vector<const ReplayOutput *> order;
  for (const ReplayOutput &o : r.outputs)
    if (!o.within)
      order.push_back(&o);
  for (const ReplayOutput &o : r.outputs)
    if (o.within)
      order.push_back(&o);
  for (size_t i = 0; i < order.size() && i < 12; ++i)
    out << heatmap(*order[i]);
  out << "</div></body></html>\n";
  return out.str();
}
