//===- Report.cpp - rendering verification results -------------*- C++ -*-===//
#include "Report/Report.h"
#include "Support/Diagnostic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

using namespace planproof;
using json = nlohmann::ordered_json;

namespace {
std::string num(double v) {
  // Integers (seeds, counters, token ids) print in full.
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string((long long)v);
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

std::string caret(const Spec &spec, const SourceLoc &loc) {
  unsigned col = loc.col;
  std::string line = printable(snippetWindow(spec.snippet(loc), col), false);
  if (line.empty())
    return "";
  std::string out = "  " + line + "\n  ";
  for (unsigned i = 1; i < col && i <= line.size(); ++i)
    out += line[i - 1] == '\t' ? '\t' : ' ';
  return out + "^\n";
}

/// A loader's errors (Support/Diagnostic.h), each note on a line of its own after the
/// message (a note's source excerpt left out); "bad input" at `path` when there are none.
std::vector<Diagnostic> loaderErrors(const std::string &path, const Diagnostics &errors) {
  std::vector<Diagnostic> out = errors.list();
  for (Diagnostic &d : out) {
    if (d.at.file.empty())
      d.at.file = path;
    for (const std::string &note : d.notes)
      d.message += "\n" + note.substr(0, note.find('\n'));
  }
  if (out.empty())
    out.push_back(Diagnostic{SourceLoc{path}, "bad input", {}, ""});
  return out;
}

std::string where(const Spec &spec, const SourceLoc &loc) {
  return planproof::printable(loc.known() ? loc.str() : (loc.file.empty() ? spec.path : loc.file),
                              false);
}

json locJson(const Spec &spec, const SourceLoc &loc) {
  return {{"file", loc.file.empty() ? spec.path : loc.file}, {"line", loc.line}, {"col", loc.col}};
}

json counterexampleJson(const Counterexample &c) {
  json inputs = json::object();
  for (auto &[n, v] : c.inputs)
    inputs[n] = v;
  json ranks = json::object();
  for (auto &[r, v] : c.rankValues)
    ranks[r] = v;
  return {{"element", c.element},   {"inputs", inputs},
          {"other_inputs", 0},      {"reference", c.reference},
          {"plan", c.plan},         {"rank_values", ranks},
          {"from_solver", c.fromSolver}};
}
} // namespace

std::string planproof::snippetWindow(const std::string &line, unsigned &col, size_t width) {
  if (line.size() <= width)
    return line;
  size_t c = col ? col - 1 : 0, half = width / 2;
  size_t start = c > half ? c - half : 0;
  if (start + width > line.size())
    start = line.size() > width ? line.size() - width : 0;
  std::string out = (start ? "..." : "") + line.substr(start, width) +
                    (start + width < line.size() ? "..." : "");
  col = (unsigned)(c - start + 1 + (start ? 3 : 0));
  return out;
}

std::string planproof::renderErrorJson(const std::string &path, const Diagnostics &errors) {
  json list = json::array();
  for (const Diagnostic &e : loaderErrors(path, errors))
    list.push_back({{"message", e.message},
                    {"location", {{"file", e.at.file}, {"line", e.at.line}, {"col", e.at.col}}}});
  json j = {{"spec", path},         {"verdict", "error"},    {"exit_status", 2},
            {"errors", list},       {"violations", json::array()},
            {"inconclusive", json::array()}};
  return jsonEscapeHidden(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
}

std::string planproof::renderErrorSarif(const std::string &path, const Diagnostics &errors) {
  json notes = json::array();
  for (const Diagnostic &e : loaderErrors(path, errors)) {
    json region = json::object();
    if (e.at.line)
      region = {{"startLine", e.at.line}, {"startColumn", std::max(1u, e.at.col)}};
    notes.push_back({{"level", "error"},
                     {"message", {{"text", e.message}}},
                     {"locations",
                      json::array({{{"physicalLocation",
                                     {{"artifactLocation", {{"uri", uriEncode(e.at.file)}}},
                                      {"region", region}}}}})}});
  }
  json sarif = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", json::array({{{"tool", {{"driver", {{"name", "planproof"}}}}},
                             {"invocations", json::array({{{"executionSuccessful", false},
                                                           {"exitCode", 2},
                                                           {"toolExecutionNotifications", notes}}})},
                             {"results", json::array()}}})}};
  return jsonEscapeHidden(sarif.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
}

std::string planproof::renderText(const Spec &spec, const VerifyResult &r) {
  std::string out;
  for (const Violation &v : r.violations) {
    out += where(spec, v.location) + ": error: [" + v.kind + "] " + printable(v.message, false) + "\n";
    out += caret(spec, v.location);
    for (const std::string &n : v.notes)
      out += where(spec, v.location) + ": note: " + printable(n, false) + "\n";
    if (!v.hint.empty())
      out += where(spec, v.location) + ": note: fix: " + printable(v.hint, false) + "\n";
    if (v.hasCounterexample) {
      const Counterexample &c = v.counterexample;
      std::string in;
      for (auto &[n, val] : c.inputs)
        in += (in.empty() ? "" : ", ") + printable(n, false) + " = " + num(val);
      out += where(spec, v.location) + ": note: counterexample" +
             (c.fromSolver ? " (from Z3)" : "") + ": " + (in.empty() ? "all inputs 0" : in) +
             (in.empty() ? "" : ", all other inputs 0") + "\n";
      std::string ranks;
      for (auto &[rk, val] : c.rankValues)
        ranks += (ranks.empty() ? "" : ", ") + printable(rk, false) + " " + num(val);
      out += where(spec, v.location) + ": note:   reference " + printable(c.element, false) + " = " +
             num(c.reference) + "; plan gives " + num(c.plan) + " (rank values: " + ranks + ")\n";
    }
    for (auto &[loc, n] : v.locatedNotes) {
      out += where(spec, loc) + ": note: " + printable(n, false) + "\n";
      out += caret(spec, loc);
    }
  }
  for (auto &[loc, reason] : r.inconclusiveReasons) {
    out += where(spec, loc) + ": warning: [inconclusive] " + printable(reason, false) + "\n";
    out += caret(spec, loc);
  }
  for (const Violation &w : r.warnings) {
    out += where(spec, w.location) + ": warning: [" + w.kind + "] " + printable(w.message, false) + "\n";
    out += caret(spec, w.location);
  }
  std::string reduced;
  for (const ReducedDim &d : spec.reducedDims)
    if (d.used != d.full)
      reduced += (reduced.empty() ? "" : ", ") + d.name + "=" + std::to_string(d.used) + " (of " +
                 std::to_string(d.full) + ")";
  if (!reduced.empty())
    out += printable(spec.path, false) + ": note: decided at reduced sizes " + reduced +
           "; for this parametric spec the result holds at the full sizes "
           "(docs/shape-reduction.md)\n";
  for (const std::string &a : spec.assumptions)
    out += printable(spec.path, false) + ": note: assumed: " + printable(a, false) + "\n";
  out += printable(spec.path, false) + ": " + verdictName(r.verdict);
  if (r.verdict == Verdict::Violated)
    out += " (" + std::to_string(r.violations.size()) + " violation" +
           (r.violations.size() == 1 ? "" : "s") + ")";
  out += " -- " + std::to_string(r.stats.obligations) + " obligations on " +
         std::to_string(r.stats.ranks) + " ranks, " + std::to_string(r.stats.solverQueries) +
         " solver queries, " + num(r.stats.milliseconds) + " ms\n";
  if (r.stats.solverLimited > 0)
    out += printable(spec.path, false) + ": note: " + std::to_string(r.stats.solverLimited) + " solver quer" +
           (r.stats.solverLimited == 1 ? "y" : "ies") + " reached the resource limit of " +
           std::to_string(r.stats.solverBudget) +
           " units; --solver-budget raises it (counted work: the same on any machine)\n";
  // The proof trace (--explain-proof): per output, the engine and the rules that proved it.
  for (const VerifyResult::Proof &p : r.proof) {
    out += printable(spec.path, false) + ": note: proof of " + printable(p.output, false) +
           " (" + p.engine + " engine):";
    for (size_t i = 0; i < p.rules.size(); ++i) {
      const VerifyResult::ProofRule &k = p.rules[i];
      out += std::string(i ? ";" : "") + " " + printable(k.rule, false);
      if (k.count > 0)
        out += " x" + std::to_string(k.count);
    }
    out += "\n";
  }
  if (r.stats.summarizedCalls > 0)
    out += printable(spec.path, false) + ": note: the calls were kept: " +
           std::to_string(r.stats.summarizedCalls) + " plan calls proved by " +
           std::to_string(r.stats.functionBodies) +
           " function bodies run once per boundary state (docs/layout-engine.md, "
           "\"Repetition\")\n";
  return out;
}

std::string planproof::renderJson(const Spec &spec, const VerifyResult &r) {
  json violations = json::array();
  for (const Violation &v : r.violations) {
    json notes = v.notes;
    for (auto &[loc, n] : v.locatedNotes)
      notes.push_back(where(spec, loc) + ": " + n);
    json j = {{"kind", v.kind},   {"message", v.message},
              {"location", locJson(spec, v.location)},
              {"op", v.at},       {"value", v.value},
              {"hint", v.hint},
              {"ranks", v.ranks}, {"notes", notes}};
    j["counterexample"] = v.hasCounterexample ? counterexampleJson(v.counterexample) : json();
    violations.push_back(j);
  }
  json reasons = json::array();
  for (auto &[loc, reason] : r.inconclusiveReasons)
    reasons.push_back({{"location", locJson(spec, loc)}, {"reason", reason}});
  json warnings = json::array();
  for (const Violation &w : r.warnings)
    warnings.push_back({{"kind", w.kind}, {"message", w.message}, {"location", locJson(spec, w.location)},
                        {"op", w.at}});
  json dims = json::object();
  for (const ReducedDim &d : spec.reducedDims)
    dims[d.name] = {{"full", d.full}, {"decided_at", d.used}};
  json j = {{"spec", spec.path},
            {"verdict", verdictName(r.verdict)},
            {"dims", dims},
            {"assumptions", spec.assumptions},
            {"violations", violations},
            {"inconclusive", reasons},
            {"warnings", warnings},
            {"stats",
             {{"obligations", r.stats.obligations},
              {"decided_by_canonical_form", r.stats.decidedCanonical},
              {"solver_queries", r.stats.solverQueries},
              {"ranks", r.stats.ranks},
              {"reference_ops", r.stats.referenceOps},
              {"plan_ops", r.stats.planOps},
              {"expressions", r.stats.expressions},
              {"expression_terms", r.stats.expressionTerms},
              {"function_bodies", r.stats.functionBodies},
              {"summarized_calls", r.stats.summarizedCalls},
              // The counted budgets a verdict depends on, and how much of them it used.
              {"solver_work", r.stats.solverWork},
              {"solver_work_max", r.stats.solverWorkMax},
              {"solver_budget", r.stats.solverBudget},
              {"solver_limited", r.stats.solverLimited},
              {"fix_checks", r.stats.fixChecks},
              {"milliseconds", r.stats.milliseconds}}}};
  if (!r.proof.empty()) { // (--explain-proof)
    json proof = json::array();
    for (const VerifyResult::Proof &p : r.proof) {
      json rules = json::array();
      for (const VerifyResult::ProofRule &k : p.rules)
        rules.push_back({{"rule", k.rule}, {"count", k.count}});
      proof.push_back({{"output", p.output}, {"engine", p.engine}, {"rules", rules}});
    }
    j["proof"] = proof;
  }
  return jsonEscapeHidden(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
}

std::string planproof::renderSarif(const Spec &spec, const VerifyResult &r) {
  json results = json::array();
  auto physical = [&](const SourceLoc &loc) {
    json region = json::object();
    if (loc.line)
      region = {{"startLine", loc.line}, {"startColumn", std::max(1u, loc.col)}};
    return json{{"physicalLocation",
                 {{"artifactLocation", {{"uri", uriEncode(loc.file.empty() ? spec.path : loc.file)}}},
                  {"region", region}}}};
  };
  for (const Violation &v : r.violations) {
    std::string text = "[" + v.kind + "] " + v.message;
    for (const std::string &n : v.notes)
      text += "\n" + n;
    if (!v.hint.empty())
      text += "\nfix: " + v.hint;
    results.push_back({{"ruleId", "planproof/" + v.kind},
                       {"level", "error"},
                       {"message", {{"text", text}}},
                       {"locations", json::array({physical(v.location)})}});
  }
  for (auto &[loc, reason] : r.inconclusiveReasons)
    results.push_back({{"ruleId", "planproof/inconclusive"},
                       {"level", "warning"},
                       {"message", {{"text", reason}}},
                       {"locations", json::array({physical(loc)})}});
  for (const Violation &w : r.warnings)
    results.push_back({{"ruleId", "planproof/" + w.kind},
                       {"level", "warning"},
                       {"message", {{"text", "[" + w.kind + "] " + w.message}}},
                       {"locations", json::array({physical(w.location)})}});
  json rules = json::array();
  for (const char *k : {"sharding", "reduction", "rng", "grad-norm", "loss-normalization",
                        "optimizer", "checkpoint", "schedule", "masking", "routing", "dataflow",
                        "inconclusive"})
    rules.push_back({{"id", std::string("planproof/") + k},
                     {"shortDescription", {{"text", std::string(k) + " semantics"}}}});
  json run = {{"tool", {{"driver", {{"name", "planproof"}, {"rules", rules}}}}},
              {"results", results}};
  if (!spec.assumptions.empty()) // what every result holds under (the spec's assumptions)
    run["properties"] = {{"assumptions", spec.assumptions}};
  json sarif = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", json::array({run})}};
  return jsonEscapeHidden(sarif.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
}
