//===- Html.cpp - the report as one self-contained HTML page ---------------===//
//
// `planproof verify --format html`: the verdict; for each violation its kind, message
// and place, the plan excerpt with the culprit's line marked, the notes, the checked fix,
// the counterexample as tables (the nonzero inputs; the reference's and the plan's value;
// every involved rank's value), and pictures of the layouts involved -- which rank holds
// which block of the reference value, partial axes named -- in the manner of JAX's
// visualize_array_sharding, next to the layout the reference needs; the reasons of an
// inconclusive verdict; the warnings. Inline CSS and SVG only: nothing is fetched when
// it is viewed, and no script runs. Every text from the spec is escaped.
//
//===----------------------------------------------------------------------===//
#include "Report/HtmlInternal.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

using namespace planproof;

std::string html::esc(const std::string &raw) {
  // (Newlines too: a page's source lines are read by log scrapers as well.)
  std::string s = printable(raw, false);
  std::string out;
  for (char c : s)
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  return out;
}

std::string html::num(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

const char *const html::kStyle = R"(
body{font-family:system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1100px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:18px 0 6px}
.verdict{display:inline-block;padding:4px 12px;border-radius:6px;color:#fff;font-weight:600}
.verified{background:#1f883d}.violated{background:#cf222e}.inconclusive{background:#9a6700}
.card{border:1px solid #d0d7de;border-radius:8px;padding:12px 16px;margin:14px 0}
.kind{font-family:monospace;background:#eef;padding:1px 6px;border-radius:4px}
pre.src{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:13px;line-height:1.45}
pre.src .culprit{background:#ffebe9;display:block;border-left:3px solid #cf222e}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}
th{background:#f6f8fa} .diff{color:#cf222e;font-weight:600}
.pictures{display:flex;flex-wrap:wrap;gap:18px} figure{margin:0}
figcaption{font-size:12px;max-width:420px;color:#57606a}
.note{font-size:13px;color:#57606a;margin:2px 0} .hint{color:#1f883d}
)";

std::string html::head(const std::string &title) {
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>planproof: " +
         esc(title) + "</title><style>" + kStyle + "</style></head><body>";
}

std::string html::excerpt(const Spec &spec, const SourceLoc &loc) {
  auto it = spec.sources.find(loc.file);
  if (!loc.line || it == spec.sources.end() || loc.line > it->second.size())
    return "";
  const std::vector<std::string> &lines = it->second;
  size_t from = loc.line > 3 ? loc.line - 3 : 1, to = std::min(lines.size(), (size_t)loc.line + 2);
  std::string out = "<pre class=\"src\">";
  for (size_t l = from; l <= to; ++l) {
    unsigned col = l == loc.line ? loc.col : 1;
    std::string text = snippetWindow(lines[l - 1], col);
    std::string row = esc(std::to_string(l) + "  " + text);
    out += l == loc.line ? "<span class=\"culprit\" data-culprit=\"1\">" + row + "</span>"
                         : row + "\n";
  }
  return out + "</pre>";
}

namespace {
using html::esc;
using html::num;
using html::excerpt;

/// The block of dimension `d` that rank coordinates `c` hold under `layout`, of
/// `parts` blocks (1: the whole dimension).
int64_t blockOf(const Mesh &mesh, const Layout &layout, size_t d, const std::vector<int64_t> &c,
                int64_t &parts) {
  parts = 1;
  int64_t index = 0;
  if (d < layout.dims.size())
    for (int a : layout.dims[d]) {
      index = index * mesh.shape[a] + c[a];
      parts *= mesh.shape[a];
    }
  return index;
}

/// A picture of `p`: the reference value's first two dimensions as a grid of blocks,
/// each labelled with the ranks that hold it (a count where there are many).
std::string picture(const Mesh &mesh, const Violation::LayoutPicture &p) {
  int64_t rows = 1, cols = 1;
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> holders;
  for (int64_t r = 0; r < mesh.numRanks() && r < 4096; ++r) {
    std::vector<int64_t> c = mesh.coords(r);
    int64_t i = p.shape.size() > 0 ? blockOf(mesh, p.layout, 0, c, rows) : 0;
    int64_t j = p.shape.size() > 1 ? blockOf(mesh, p.layout, 1, c, cols) : 0;
    holders[{i, j}].push_back(r);
  }
  if (rows > 16 || cols > 16)
    return "<figure><figcaption>" + esc(p.title) + " (" + std::to_string(rows) + " x " +
           std::to_string(cols) + " blocks: too many to draw)</figcaption></figure>";
  const int w = 300, h = p.shape.size() > 1 ? 160 : 48;
  double bw = (double)w / cols, bh = (double)h / rows;
  bool partial = p.layout.isPartial();
  std::ostringstream svg;
  svg << "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w + 2 << "\" height=\""
      << h + 2 << "\" class=\"layout" << (partial ? " partial" : "") << "\">"
      << "<defs><pattern id=\"hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" "
         "stroke=\"#cf222e\" stroke-opacity=\"0.35\" stroke-width=\"3\"/></pattern></defs>";
  static const char *kColors[] = {"#ddf4ff", "#fff8c5", "#dafbe1", "#ffebe9", "#fbefff",
                                  "#fff1e5", "#eaeef2", "#d8f3f6"};
  for (auto &[ij, ranks] : holders) {
    double x = 1 + ij.second * bw, y = 1 + ij.first * bh;
    std::string label;
    if (ranks.size() <= 2)
      for (int64_t r : ranks)
        label += (label.empty() ? "" : " ") + mesh.rankStr(r);
    else
      label = mesh.rankStr(ranks[0]) + " +" + std::to_string(ranks.size() - 1);
    svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << bw << "\" height=\"" << bh
        << "\" fill=\"" << kColors[(ij.first * cols + ij.second) % 8] << "\" stroke=\"#57606a\"/>";
    // A partial value: each holder has a summand of the block, not the block: hatched.
    if (partial)
      svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << bw << "\" height=\"" << bh
          << "\" fill=\"url(#hatch)\"/>";
    svg << "<text x=\"" << x + bw / 2 << "\" y=\"" << y + bh / 2
        << "\" font-size=\"11\" text-anchor=\"middle\" dominant-baseline=\"middle\">" << esc(label)
        << "</text>";
  }
  svg << "</svg><figcaption>" << esc(p.title);
  std::string dims;
  for (int64_t s : p.shape)
    dims += (dims.empty() ? "" : " x ") + std::to_string(s);
  svg << " -- shape [" << esc(dims) << "]";
  if (p.layout.isPartial())
    svg << "; every block is a <b>partial value</b> over "
        << esc(p.layout.str(mesh).substr(p.layout.str(mesh).find("partial")));
  if (p.shape.size() > 2)
    svg << "; dimensions 0 and 1 drawn";
  svg << "</figcaption></figure>";
  return svg.str();
}

/// A pipeline deadlock as swim lanes: per stage its events left to right (matched ones
/// grey, the one it waits at red), an arrow from each waiting stage to the stage it
/// waits for, the wait cycle's arrows in red. At most 24 events a lane, around where
/// the stages stopped.
std::string timelinePicture(const Spec &spec, const Violation::Timeline &t) {
  size_t stages = t.events.size();
  int64_t lo = INT64_MAX;
  for (size_t s = 0; s < stages; ++s)
    lo = std::min<int64_t>(lo, t.done[s] < 0 ? (int64_t)t.events[s].size() : t.done[s]);
  int64_t first = std::max<int64_t>(0, lo - 6);
  const int kMax = 24, bw = 150, bh = 26, gap = 8, left = 70, lane = bh + 24;
  int width = left + kMax * (bw + gap) + 10, height = (int)stages * lane + 10;
  std::set<int64_t> inCycle(t.cycle.begin(), t.cycle.end());
  std::ostringstream svg;
  svg << "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\""
      << width << "\" height=\"" << height << "\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" "
      << "refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">"
      << "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#cf222e\"/></marker></defs>";
  auto boxX = [&](int64_t i) { return left + (int)(i - first) * (bw + gap); };
  for (size_t s = 0; s < stages; ++s) {
    int y = 5 + (int)s * lane;
    svg << "<text x=\"4\" y=\"" << y + bh / 2 + 4 << "\" font-size=\"12\" font-weight=\"600\">"
        << esc(spec.mesh.axes[spec.pipelineAxis] + "=" + std::to_string(s)) << "</text>";
    for (int64_t i = first; i < (int64_t)t.events[s].size() && i < first + kMax; ++i) {
      bool waiting = i == t.done[s], matched = t.done[s] < 0 || i < t.done[s];
      svg << "<rect x=\"" << boxX(i) << "\" y=\"" << y << "\" width=\"" << bw << "\" height=\""
          << bh << "\" rx=\"4\" fill=\"" << (waiting ? "#ffebe9" : matched ? "#eaeef2" : "#ffffff")
          << "\" stroke=\"" << (waiting ? "#cf222e" : "#8c959f") << "\""
          << (waiting ? " stroke-width=\"2\" class=\"waiting\"" : "") << "/><text x=\""
          << boxX(i) + bw / 2 << "\" y=\"" << y + bh / 2 + 4
          << "\" font-size=\"10\" text-anchor=\"middle\">" << esc(t.events[s][i]) << "</text>";
    }
  }
  for (size_t s = 0; s < stages; ++s) {
    int64_t to = t.waitsFor[s];
    if (to < 0 || t.done[s] < first || t.done[s] >= first + kMax)
      continue;
    int64_t target = t.done[to] < 0 ? (int64_t)t.events[to].size() - 1 : t.done[to];
    bool red = inCycle.count((int64_t)s) && inCycle.count(to);
    // Downward waits left of the middle, upward ones right of it: a two-stage cycle
    // shows two arrows.
    int shift = to > (int64_t)s ? -12 : 12;
    int x1 = boxX(t.done[s]) + bw / 2 + shift, y1 = 5 + (int)s * lane + (to > (int64_t)s ? bh : 0);
    int x2 = boxX(std::clamp<int64_t>(target, first, first + kMax - 1)) + bw / 2 + shift,
        y2 = 5 + (int)to * lane + (to > (int64_t)s ? 0 : bh);
    svg << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2
        << "\" stroke=\"" << (red ? "#cf222e" : "#8c959f") << "\" stroke-width=\"2\""
        << (red ? " class=\"cycle\" marker-end=\"url(#arrow)\"" : "") << "/>";
  }
  svg << "</svg><figcaption>each stage's sends and receives in program order (from event "
      << first << "): grey matched, red where the stage waits; the arrows say whom it waits "
      << "for, red where the waits close a cycle</figcaption></figure>";
  return svg.str();
}

std::string counterexampleTables(const Counterexample &c) {
  std::ostringstream out;
  out << "<h3>Counterexample</h3><table class=\"inputs\"><tr><th>input (others 0)</th>"
         "<th>value</th></tr>";
  for (auto &[name, v] : c.inputs)
    out << "<tr><td>" << esc(name) << "</td><td>" << num(v) << "</td></tr>";
  out << "</table><table class=\"values\"><tr><th>element</th><th>reference</th><th>plan</th>"
         "</tr><tr><td>"
      << esc(c.element) << "</td><td>" << num(c.reference) << "</td><td class=\"diff\">"
      << num(c.plan) << "</td></tr></table>";
  if (!c.rankValues.empty()) {
    out << "<table class=\"ranks\"><tr><th>rank</th><th>its value</th></tr>";
    for (auto &[rank, v] : c.rankValues)
      out << "<tr><td>" << esc(rank) << "</td><td>" << num(v) << "</td></tr>";
    out << "</table>";
  }
  return out.str();
}

std::string violationCard(const Spec &spec, const Violation &v, size_t i, const char *what) {
  std::ostringstream out;
  out << "<section class=\"card " << what << "\" id=\"" << what << "-" << i << "\"><div><span class=\"kind\">"
      << esc(v.kind) << "</span> " << esc(v.message) << "</div><div class=\"note\">at "
      << esc(v.location.known() ? v.location.str() : spec.path)
      << (v.at.empty() ? "" : " (" + esc(v.at) + ")") << "</div>";
  out << excerpt(spec, v.location);
  for (const std::string &n : v.notes)
    out << "<div class=\"note\">" << esc(n) << "</div>";
  for (auto &[loc, n] : v.locatedNotes)
    out << "<div class=\"note\">" << esc(loc.str()) << ": " << esc(n) << "</div>";
  if (!v.hint.empty())
    out << "<div class=\"note hint\">fix (checked): " << esc(v.hint) << "</div>";
  if (!v.ranks.empty()) {
    out << "<div class=\"note\">ranks:";
    for (const std::string &r : v.ranks)
      out << " " << esc(r);
    out << "</div>";
  }
  if (!v.pictures.empty()) {
    out << "<h3>Layouts</h3><div class=\"pictures\">";
    for (const Violation::LayoutPicture &p : v.pictures)
      out << picture(spec.mesh, p);
    out << "</div>";
  }
  if (v.timeline && spec.pipelineAxis >= 0)
    out << "<h3>Schedule</h3>" << timelinePicture(spec, *v.timeline);
  if (v.hasCounterexample)
    out << counterexampleTables(v.counterexample);
  out << "</section>";
  return out.str();
}

} // namespace

std::string planproof::renderHtml(const Spec &spec, const VerifyResult &result) {
  using namespace html;
  const char *verdict = verdictName(result.verdict);
  std::ostringstream out;
  out << head(spec.path + " " + verdict) << "<h1>planproof: " << esc(spec.path) << "</h1>"
      << "<div><span class=\"verdict " << verdict << "\" id=\"verdict\">" << verdict
      << "</span> <span class=\"note\">" << result.stats.obligations << " obligations on "
      << result.stats.ranks << " ranks";
  std::string mesh;
  for (size_t a = 0; a < spec.mesh.axes.size(); ++a)
    mesh += (a ? " x " : "") + spec.mesh.axes[a] + "=" + std::to_string(spec.mesh.shape[a]);
  out << (mesh.empty() ? "" : " (" + esc(mesh) + ")") << ", " << num(result.stats.milliseconds)
      << " ms</span></div>";
  for (const std::string &a : spec.assumptions)
    out << "<p class=\"note\" id=\"assumption\">assumed: " << esc(a) << "</p>";
  if (!result.violations.empty()) {
    out << "<h2>Violations</h2>";
    for (size_t i = 0; i < result.violations.size(); ++i)
      out << violationCard(spec, result.violations[i], i, "violation");
  }
  if (!result.inconclusiveReasons.empty()) {
    out << "<h2>Why inconclusive</h2>";
    for (auto &[loc, why] : result.inconclusiveReasons)
      out << "<section class=\"card inconclusive-reason\"><div>" << esc(why)
          << "</div><div class=\"note\">at " << esc(loc.known() ? loc.str() : spec.path)
          << "</div>" << excerpt(spec, loc) << "</section>";
  }
  if (!result.warnings.empty()) {
    out << "<h2>Warnings</h2>";
    for (size_t i = 0; i < result.warnings.size(); ++i)
      out << violationCard(spec, result.warnings[i], i, "warning");
  }
  out << "</body></html>\n";
  return out.str();
}
