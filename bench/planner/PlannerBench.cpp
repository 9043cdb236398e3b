//===- PlannerBench.cpp - a planner's loop through the public API --------===//
//
//   planproof-bench-planner SPEC.mlir CANDIDATES
//
// SPEC is a reference and a plan (as `planproof plan` writes them). The loop makes
// CANDIDATES candidate plans, each one op away from the plan: candidate i changes the
// reduction of the i-th collective that has one ("sum" <-> "avg"), and every other
// candidate is the plan itself again, as a planner alternates between a change and its
// undo. Each candidate is verified by the layout engine two ways:
//
//   reuse   Session::loadPlan against the loaded spec (the reference neither parsed nor
//           derived again) and Session::verify in the same session (the reference's
//           run and every plan state seen before reused);
//   fresh   a new Session, the whole text loaded and verified.
//
// Prints one line per way: the median and quartiles of the per-candidate wall time in
// ms (load + verify), the verdicts, and the share of plan states reused.
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

/// Candidate i: `plan` with the reduction of the (i/2)-th collective flipped (odd i:
/// the plan unchanged).
std::string candidate(const std::string &plan, size_t i, std::string &what) {
  what = "unchanged";
  if (i % 2 == 1)
    return plan;
  std::vector<size_t> sites;
  for (size_t at = plan.find("] \"sum\""); at != std::string::npos; at = plan.find("] \"sum\"", at + 1))
    sites.push_back(at + 2);
  for (size_t at = plan.find("] \"avg\""); at != std::string::npos; at = plan.find("] \"avg\"", at + 1))
    sites.push_back(at + 2);
  if (sites.empty())
    return plan;
  std::sort(sites.begin(), sites.end());
  size_t at = sites[(i / 2) % sites.size()];
  std::string out = plan;
  bool isSum = out.compare(at, 5, "\"sum\"") == 0;
  out.replace(at, 5, isSum ? "\"avg\"" : "\"sum\"");
  size_t line = out.rfind('\n', at);
  what = out.substr(line + 1, out.find('\n', at) - line - 1);
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

  Way reuse, fresh;
  for (int i = 0; i < n; ++i) {
    std::string what, plan = candidate(planText, i, what);
    auto t = std::chrono::steady_clock::now();
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
    if (f.verdict != r.verdict) {
      std::fprintf(stderr, "candidate %d (%s): verdicts differ\n", i, what.c_str());
      return 1;
    }
  }
  std::printf("base: %s, %lld plan ops, %lld reference ops, loaded and verified in %.1f ms\n",
              verdictName(first.verdict), (long long)first.stats.planOps,
              (long long)first.stats.referenceOps, baseMs);
  for (auto [name, w] : {std::pair<const char *, Way *>{"reuse", &reuse}, {"fresh", &fresh}})
    std::printf("%s: median %.2f ms (quartiles %.2f, %.2f) over %d candidates; %d verified, "
                "%d not; plan states reused %.0f%%\n",
                name, quantile(w->times, 0.5), quantile(w->times, 0.25),
                quantile(w->times, 0.75), n, w->verified, w->other,
                w->ops ? 100.0 * w->reused / w->ops : 0.0);
  return 0;
}
