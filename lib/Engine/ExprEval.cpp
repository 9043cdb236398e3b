//===- ExprEval.cpp - evaluating canonical polynomials at a point ----*- C++ -*-===//
//
// Evaluator (a cached walk of the expression DAG) and Tape (the DAG flattened once, for
// the counterexample search's many points), both in doubles with the same operations in
// the same order, so that their values are bit-identical (Engine/Expr.h).
//
//===----------------------------------------------------------------------===//
#include "Engine/Expr.h"

#include <vector>

using namespace planproof;

/// Whether slot `id` of a generation-stamped cache holds a value of `generation`;
/// grows the cache to `size` first.
static bool cachedAt(std::vector<uint32_t> &gens, std::vector<double> &values, uint32_t id,
                     size_t size, uint32_t generation) {
  if (id >= gens.size()) {
    gens.resize(size, 0);
    values.resize(size, 0.0);
  }
  return gens[id] == generation;
}

double Evaluator::poly(PolyId p) {
  if (cachedAt(polyGen, polyValue, p, pool.numPolys(), generation))
    return polyValue[p];
  double sum = 0;
  for (auto &[m, c] : pool.poly(p).terms) {
    double prod = c.toDouble();
    for (auto &[a, e] : pool.mono(m).factors) {
      double v = atom(a);
      for (uint32_t k = 0; k < e; ++k)
        prod *= v;
    }
    sum += prod;
  }
  polyGen[p] = generation;
  polyValue[p] = sum;
  return sum;
}

double Evaluator::atom(AtomId a) {
  if (cachedAt(atomGen, atomValue, a, pool.numAtoms(), generation))
    return atomValue[a];
  const Atom &at = pool.atom(a);
  double v;
  if (at.isInput) {
    v = (*inputs)[at.input];
  } else {
    std::vector<double> args;
    args.reserve(at.args.size());
    for (PolyId q : at.args)
      args.push_back(poly(q));
    v = evalFn(at.fn, args);
  }
  atomGen[a] = generation;
  atomValue[a] = v;
  return v;
}

Tape::Tape(const ExprPool &pool, const std::vector<PolyId> &rootIds) {
  polySlot.assign(pool.numPolys(), ~0u);
  atomSlot.assign(pool.numAtoms(), ~0u);
  for (PolyId p : rootIds)
    roots.push_back(visitPoly(pool, p));
  values.assign(nodes.size(), 0.0);
  // The lookup tables are only needed while the tape is built.
  polySlot = {};
  atomSlot = {};
}

// Recursion depth: one poly and one atom frame per level of function nesting, which
// the pool bounds (ExprPool::kMaxDepth), as for Evaluator.
uint32_t Tape::visitPoly(const ExprPool &pool, PolyId p) {
  if (polySlot[p] != ~0u)
    return polySlot[p];
  const Poly &poly = pool.poly(p);
  // Children first (their slots), then this node's terms.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> termFactors;
  termFactors.reserve(poly.terms.size());
  for (auto &[m, c] : poly.terms) {
    std::vector<std::pair<uint32_t, uint32_t>> fs;
    for (auto &[a, e] : pool.mono(m).factors)
      fs.push_back({visitAtom(pool, a), e});
    termFactors.push_back(std::move(fs));
  }
  Node n{Sum, Fn::Gelu, 0, (uint32_t)terms.size(), 0};
  for (size_t t = 0; t < poly.terms.size(); ++t) {
    uint32_t b = factors.size();
    factors.insert(factors.end(), termFactors[t].begin(), termFactors[t].end());
    terms.push_back({poly.terms[t].second.toDouble(), b, (uint32_t)factors.size()});
  }
  n.end = terms.size();
  nodes.push_back(n);
  return polySlot[p] = nodes.size() - 1;
}

uint32_t Tape::visitAtom(const ExprPool &pool, AtomId a) {
  if (atomSlot[a] != ~0u)
    return atomSlot[a];
  const Atom &at = pool.atom(a);
  Node n{Input, at.fn, at.input, 0, 0};
  if (!at.isInput) {
    std::vector<uint32_t> slots;
    for (PolyId q : at.args)
      slots.push_back(visitPoly(pool, q));
    n.kind = Function;
    n.begin = args.size();
    args.insert(args.end(), slots.begin(), slots.end());
    n.end = args.size();
  }
  nodes.push_back(n);
  return atomSlot[a] = nodes.size() - 1;
}

void Tape::run(const std::vector<double> &inputs) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node &n = nodes[i];
    switch (n.kind) {
    case Input:
      values[i] = inputs[n.input];
      break;
    case Function:
      scratch.clear();
      for (uint32_t k = n.begin; k < n.end; ++k)
        scratch.push_back(values[args[k]]);
      values[i] = evalFn(n.fn, scratch);
      break;
    case Sum: {
      double sum = 0;
      for (uint32_t t = n.begin; t < n.end; ++t) {
        const Term &term = terms[t];
        double prod = term.coefficient;
        for (uint32_t f = term.begin; f < term.end; ++f) {
          double v = values[factors[f].first];
          for (uint32_t k = 0; k < factors[f].second; ++k)
            prod *= v;
        }
        sum += prod;
      }
      values[i] = sum;
      break;
    }
    }
  }
}
