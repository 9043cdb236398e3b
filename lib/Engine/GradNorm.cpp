//===- GradNorm.cpp - gradient-norm attribution -----------------*- C++ -*-===//
//
// Engine (Engine.h): gradient-norm violations attributed to the terms of the norm that are
// wrong (a replicated parameter counted per rank, a norm of local shards).
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

namespace planproof::engine {
namespace {

/// The terms of the reference's sum: the leaves of its tree of ref.add.
std::vector<Value> sumTerms(Value total) {
  std::vector<Value> terms, stack{total};
  while (!stack.empty()) {
    Value v = stack.back();
    stack.pop_back();
    if (auto add = v.getDefiningOp<ref::AddOp>()) {
      stack.push_back(add.getRhs());
      stack.push_back(add.getLhs());
    } else {
      terms.push_back(v);
    }
  }
  return terms;
}

/// The parameter whose sum of squares `term` is.
std::string paramName(const Spec &spec, Value term) {
  // sum(g * g) names the gradient g; a derived gradient d(%w).k names parameter %w.
  std::string n = spec.nameOf(term);
  if (auto r = term.getDefiningOp<ref::ReduceSumOp>())
    if (auto m = r.getInput().getDefiningOp<ref::MulOp>())
      if (m.getLhs() == m.getRhs()) {
        auto g = spec.gradientOf.find(m.getLhs());
        if (g != spec.gradientOf.end())
          return g->second;
        n = spec.nameOf(m.getLhs());
      }
  if (n.rfind("%d(", 0) == 0 && n.find(')') != std::string::npos)
    return n.substr(3, n.find(')') - 3);
  return n;
}

/// The coefficients c fitting y ~ A c, and the worst relative error of the fit over
/// the samples (rows of A); `ok` is false when the system is singular.
struct NormFit {
  bool ok;
  std::vector<double> c;
  double worst;
};

NormFit fitCoefficients(const std::vector<std::vector<double>> &A,
                        const std::vector<double> &y) {
  size_t samples = A.size(), n = A.front().size();
  // Least squares through the normal equations (n is small).
  std::vector<std::vector<double>> M(n, std::vector<double>(n + 1, 0));
  for (size_t k = 0; k < samples; ++k)
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j)
        M[i][j] += A[k][i] * A[k][j];
      M[i][n] += A[k][i] * y[k];
    }
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) {
    size_t piv = i;
    for (size_t j = i + 1; j < n; ++j)
      if (std::fabs(M[j][i]) > std::fabs(M[piv][i]))
        piv = j;
    std::swap(M[i], M[piv]);
    if (std::fabs(M[i][i]) < 1e-12) {
      ok = false;
      break;
    }
    for (size_t j = 0; j < n; ++j)
      if (j != i) {
        double f = M[j][i] / M[i][i];
        for (size_t c = i; c <= n; ++c)
          M[j][c] -= f * M[i][c];
      }
  }
  std::vector<double> c(n);
  for (size_t i = 0; ok && i < n; ++i)
    c[i] = M[i][n] / M[i][i];
  double worst = 0;
  for (size_t k = 0; ok && k < samples; ++k) {
    double fit = 0;
    for (size_t p = 0; p < n; ++p)
      fit += c[p] * A[k][p];
    worst = std::max(worst, std::fabs(fit - y[k]) / std::max(1.0, std::fabs(y[k])));
  }
  return {ok, std::move(c), worst};
}

/// What `fit` says about the plan's squared norm: the parameters it does not count
/// exactly once, or that it is no whole-parameter sum of squares.
std::string describeFit(const Spec &spec, const NormFit &fit, const std::vector<Value> &terms) {
  if (!fit.ok || fit.worst > 1e-6)
    return "is not a whole-parameter sum of squares (a rank-local or partial norm)";
  std::string line;
  for (size_t p = 0; p < terms.size(); ++p) {
    double rounded = std::round(fit.c[p] * 1000) / 1000;
    if (std::fabs(rounded - 1) > 1e-6) {
      std::ostringstream os;
      os << rounded;
      line += (line.empty() ? "counts " : ", ") + std::string("`") + paramName(spec, terms[p]) +
              "` " + os.str() + " times";
    }
  }
  if (line.empty())
    line = "counts every parameter once";
  return line;
}

} // namespace

/// For a grad-norm violation: how many times the plan's squared norm counts each
/// parameter's sum of squares. The reference's norm is sqrt(S_1 + ... + S_n), one S_p
/// per parameter; the plan's squared norm (the operand of its sqrt) is fitted as
/// sum_p c_p S_p on random evaluations, and parameters with c_p != 1 are named.
void Engine::attributeGradNorm() {
  Violation *target = nullptr;
  for (Violation &v : result.violations)
    if (v.kind == "grad-norm")
      target = &v;
  if (!target)
    return;
  Value refTotal, planTotal;
  spec.reference.walk([&](ref::SqrtOp op) {
    if (!refTotal)
      refTotal = op.getInput();
  });
  spec.plan.walk([&](ref::SqrtOp op) {
    if (!planTotal)
      planTotal = op.getInput();
  });
  if (!refTotal || !planTotal || !refTrace.values.count(refTotal) ||
      !planTrace.values.count(planTotal))
    return;
  std::vector<Value> terms = sumTerms(refTotal);
  size_t n = terms.size(), samples = n + 4;
  if (n == 0 || n > 64)
    return;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  Evaluator eval(pool);
  std::vector<std::string> perRank;
  std::string first;
  bool uniform = true;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    std::vector<std::vector<double>> A(samples, std::vector<double>(n));
    std::vector<double> y(samples);
    std::vector<double> point(pool.numInputs());
    for (size_t k = 0; k < samples; ++k) {
      for (double &x : point)
        x = dist(rng);
      eval.reset(point);
      for (size_t p = 0; p < n; ++p)
        A[k][p] = eval.poly(refTrace.values[terms[p]].data[0]);
      y[k] = eval.poly(planTrace.values[planTotal][r].data[0]);
    }
    std::string line = describeFit(spec, fitCoefficients(A, y), terms);
    if (r == 0)
      first = line;
    uniform = uniform && line == first;
    perRank.push_back(mesh.rankStr(r) + " " + line);
  }
  if (uniform)
    target->notes.push_back("gradient norm: the plan's squared norm " + first +
                            " (each parameter must count exactly once)");
  else
    for (const std::string &l : perRank)
      target->notes.push_back("gradient norm on rank " + l);
}

} // namespace planproof::engine
