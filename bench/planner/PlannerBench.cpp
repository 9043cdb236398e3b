//===- PlannerBench.cpp - a planner's loop through the public API --------===//
//
//   planproof-bench-planner SPEC.mlir CANDIDATES
//
// SPEC is a reference and a plan (as `planproof plan` writes them). The loop makes
// CANDIDATES candidate plans, each one op away from the plan: candidate i makes the
// (i/2)-th change, in the plan's order, that Session::edit can make in place -- a
// collective's other reduction ("sum" <-> "avg") or its other axis ("dp" <-> "tp") --
// and every other candidate is the plan itself again, as a planner alternates between a
// change and its undo. (In these plans, which derive their backward pass, a forward
// collective's change is made on its derived adjoint too; a reduce_scatter's reduction,
// which the derivation reads, cannot change in place.) Each candidate is verified by the
// layout engine three ways:
//
//   edit    Session::edit on the loaded spec (the undo edits for the odd candidates)
//           and Session::verify in the same session: only the states the edited op
//           reaches are derived again;
//   reuse   Session::loadPlan of the candidate's text against the loaded spec (the
//           reference neither parsed nor derived again) and Session::verify in the same
//           session (the reference's run and every plan state seen before reused);
//   fresh   a new Session, the whole text loaded and verified.
//
// Prints one line per way: the median and quartiles of the per-candidate wall time in
// ms (edit or load, then verify), the verdicts, and the share of plan states reused.
// The three ways must agree on every candidate's verdict.
//
//===----------------------------------------------------------------------===//
#include "planproof/planproof.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace planproof::api;

namespace {

double ms(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

/// One change of a collective: its result's name, the attribute and its new value, and
/// where in the plan's text the old value's `width` characters are, with the new text.
struct Site {
  std::string value, attribute, to;
  size_t at, width;
  std::string text;
};

/// Per collective: the other reduction ("sum" <-> "avg"), and the other axis of a
/// collective over one of "dp" and "tp" (the same group size on these meshes, so the
/// shapes still fit).
std::vector<Site> sites(const std::string &plan) {
  std::vector<Site> out;
  for (size_t line = 0; line < plan.size();) {
    size_t end = plan.find('\n', line);
    if (end == std::string::npos)
      end = plan.size();
    std::string text = plan.substr(line, end - line);
    size_t eq = text.find(" = dist."), name = text.find('%');
    if (eq != std::string::npos && name < eq) {
      std::string value = text.substr(name, eq - name);
      for (auto [from, to] : {std::pair<const char *, const char *>{"] \"sum\"", "\"avg\""},
                              {"] \"avg\"", "\"sum\""}})
        if (size_t at = text.find(from); at != std::string::npos)
          out.push_back({value, "kind", to, line + at + 2, 5, to});
      for (auto [from, to] : {std::pair<const char *, const char *>{"over [\"tp\"]", "[\"dp\"]"},
                              {"over [\"dp\"]", "[\"tp\"]"}})
        if (size_t at = text.find(from); at != std::string::npos)
          out.push_back({value, "axes", to, line + at + 5, 6, to});
    }
    line = end + 1;
  }
  return out;
}

/// `plan` with `site` changed.
std::string changed(const std::string &plan, const Site &site) {
  std::string out = plan;
  out.replace(site.at, site.width, site.text);
  return out;
}

struct Way {
  std::vector<double> times;
  int verified = 0, other = 0;
  long reused = 0, ops = 0;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(q * (v.size() - 1) + 0.5))];
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: planproof-bench-planner SPEC.mlir CANDIDATES\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string whole = buf.str();
  size_t mesh = whole.find("\n  dist.mesh");
  if (mesh == std::string::npos) {
    std::fprintf(stderr, "%s: no `dist.mesh` line\n", argv[1]);
    return 2;
  }
  std::string refText = whole.substr(0, mesh + 1), planBody = whole.substr(mesh + 1);
  std::string planText = "module {\n" + planBody;
  int n = std::atoi(argv[2]);
  Options o;
  o.engine = Options::Engine::Layout;
  o.threads = 1;

  Session session;
  auto t0 = std::chrono::steady_clock::now();
  auto base = session.load(argv[1], o);
  if (!base) {
    std::fprintf(stderr, "%s\n", base.error().diagnostics.c_str());
    return 2;
  }
  Result first = session.verify(*base, o);
  double baseMs = ms(t0);
  // The sites an edit may change (trying each once on a spec of its own).
  std::vector<Site> editable;
  {
    Session probe;
    auto spec = probe.load(argv[1], o);
    if (!spec) {
      std::fprintf(stderr, "%s\n", spec.error().diagnostics.c_str());
      return 2;
    }
    for (const Site &site : sites(planText)) {
      auto undo = probe.edit(*spec, {{site.value, site.attribute, site.to}});
      if (undo)
        editable.push_back(site);
      if (undo && !probe.edit(*spec, *undo)) {
        std::fprintf(stderr, "%s: the undo edit failed\n", site.value.c_str());
        return 1;
      }
    }
  }
  if (editable.empty()) {
    std::fprintf(stderr, "%s: no change an edit can make\n", argv[1]);
    return 2;
  }

  // The edit way in a session of its own (a session's layout cache keeps the last plan
  // run, which the other ways' candidates would replace).
  Session editing;
  auto edited = editing.load(argv[1], o);
  if (!edited) {
    std::fprintf(stderr, "%s\n", edited.error().diagnostics.c_str());
    return 2;
  }
  editing.verify(*edited, o);
  Way edit, reuse, fresh;
  std::vector<PlanEdit> undo;
  for (int i = 0; i < n; ++i) {
    const Site &site = editable[(i / 2) % editable.size()];
    std::string plan = i % 2 ? planText : changed(planText, site);
    auto t = std::chrono::steady_clock::now();
    auto edits = editing.edit(*edited, i % 2 ? undo
                                             : std::vector<PlanEdit>{{site.value, site.attribute,
                                                                      site.to}});
    if (!edits) {
      std::fprintf(stderr, "candidate %d: %s\n", i, edits.error().message.c_str());
      return 1;
    }
    undo = *edits;
    Result e = editing.verify(*edited, o);
    edit.times.push_back(ms(t));
    (e.verdict == Verdict::Verified ? edit.verified : edit.other)++;
    edit.reused += e.stats.reusedStates;
    edit.ops += e.stats.planOps;

    t = std::chrono::steady_clock::now();
    auto spec = session.loadPlan(*base, "candidate.mlir", plan, o);
    if (!spec) {
      std::fprintf(stderr, "candidate %d: %s\n", i, spec.error().message.c_str());
      return 1;
    }
    Result r = session.verify(*spec, o);
    reuse.times.push_back(ms(t));
    (r.verdict == Verdict::Verified ? reuse.verified : reuse.other)++;
    reuse.reused += r.stats.reusedStates;
    reuse.ops += r.stats.planOps;

    t = std::chrono::steady_clock::now();
    Session alone;
    auto whole2 = alone.loadText("candidate.mlir", refText + plan.substr(9), o);
    if (!whole2) {
      std::fprintf(stderr, "candidate %d: %s\n", i, whole2.error().message.c_str());
      return 1;
    }
    Result f = alone.verify(*whole2, o);
    fresh.times.push_back(ms(t));
    (f.verdict == Verdict::Verified ? fresh.verified : fresh.other)++;
    fresh.ops += f.stats.planOps;
    // The same reasons, but for the file name the loaded text went by.
    auto reasons = [&](const Result &x) {
      std::string all;
      for (const auto &[at, why] : x.inconclusive)
        all += at.str() + ": " + why + "\n";
      for (size_t at = all.find("candidate.mlir"); at != std::string::npos;
           at = all.find("candidate.mlir", at + 1))
        all.replace(at, 14, argv[1]);
      return all;
    };
    std::string named = reasons(f);
    if (f.verdict != r.verdict || f.verdict != e.verdict || named != reasons(e)) {
      std::fprintf(stderr, "candidate %d (%s): the ways' reports differ\n--- edit:\n%s\n--- "
                           "fresh:\n%s\n", i, site.value.c_str(), reasons(e).c_str(), named.c_str());
      return 1;
    }
  }
  std::printf("base: %s, %lld plan ops, %lld reference ops, loaded and verified in %.1f ms; "
              "%zu changes an edit can make\n",
              verdictName(first.verdict), (long long)first.stats.planOps,
              (long long)first.stats.referenceOps, baseMs, editable.size());
  for (auto [name, w] : {std::pair<const char *, Way *>{"edit", &edit}, {"reuse", &reuse},
                         {"fresh", &fresh}})
    std::printf("%s: median %.2f ms (quartiles %.2f, %.2f) over %d candidates; %d verified, "
                "%d not; plan states reused %.2f%%\n",
                name, quantile(w->times, 0.5), quantile(w->times, 0.25),
                quantile(w->times, 0.75), n, w->verified, w->other,
                w->ops ? 100.0 * w->reused / w->ops : 0.0);
  return 0;
}
