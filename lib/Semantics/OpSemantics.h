//===- OpSemantics.h - the one definition of what each op computes -*- C++ -*-===//
//
// What every `ref` op and every `dist` collective computes, written once, generic over
// a scalar *domain*. The element engine instantiates it with canonical polynomials
// (SymbolicDomain), the numeric replay with doubles. A domain D provides:
//
//   using Value;
//   Value constant(const Rational &);
//   Value add(Value, Value);  Value sub(Value, Value);  Value mul(Value, Value);
//   Value sum(const std::vector<Value> &);   // n-ary sum, in order
//   Value scale(Value, const Rational &);
//   Value apply(Fn, std::vector<Value>);
//
// Each function returns an empty string on success, or the reason the op is not
// supported (the verifier turns that into *inconclusive*, never into a verdict).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_OPSEMANTICS_H
#define PLANPROOF_SEMANTICS_OPSEMANTICS_H

#include "Dist/DistDialect.h"
#include "Engine/Rational.h"
#include "Ref/RefDialect.h"
#include "Semantics/Functions.h"
#include "Semantics/Layout.h"
#include "Semantics/Tensor.h"


#include <string>
#include <vector>

namespace planproof {

/// Rational value of a float attribute: constants are read as exact fractions.
inline Rational attrRational(mlir::FloatAttr a) {
  return Rational::fromDouble(a.getValueAsDouble());
}

/// Computes the result of the rank-local (or single-device) op `op` from its operands.
template <class D>
std::string evalRefOp(D &d, mlir::Operation *op,
                      const std::vector<const Tensor<typename D::Value> *> &in,
                      Tensor<typename D::Value> &out) {
  using V = typename D::Value;
  using namespace planproof::ref;
  using mlir::dyn_cast;
  using mlir::isa;
  auto elementwise = [&](auto fn) {
    out = Tensor<V>(in[0]->shape, d.constant(Rational(0)));
    for (size_t i = 0; i < out.data.size(); ++i)
      out.data[i] = fn(i);
  };
  if (isa<AddOp>(op)) {
    elementwise([&](size_t i) { return d.add(in[0]->data[i], in[1]->data[i]); });
  } else if (isa<SubOp>(op)) {
    elementwise([&](size_t i) { return d.sub(in[0]->data[i], in[1]->data[i]); });
  } else if (isa<MulOp>(op)) {
    elementwise([&](size_t i) { return d.mul(in[0]->data[i], in[1]->data[i]); });
  } else if (isa<GeluOp>(op)) {
    elementwise([&](size_t i) { return d.apply(Fn::Gelu, {in[0]->data[i]}); });
  } else if (isa<GeluGradOp>(op)) {
    elementwise([&](size_t i) {
      return d.mul(d.apply(Fn::GeluDeriv, {in[0]->data[i]}), in[1]->data[i]);
    });
  } else if (auto s = dyn_cast<ScaleOp>(op)) {
    Rational f = attrRational(s.getFactorAttr());
    elementwise([&](size_t i) { return d.scale(in[0]->data[i], f); });
  } else if (auto s = dyn_cast<SgdUpdateOp>(op)) {
    Rational lr = attrRational(s.getLrAttr());
    elementwise([&](size_t i) { return d.sub(in[0]->data[i], d.scale(in[1]->data[i], lr)); });
  } else if (isa<MseLossGradOp>(op)) {
    Rational c(2, numElements(in[0]->shape));
    elementwise([&](size_t i) { return d.scale(d.sub(in[0]->data[i], in[1]->data[i]), c); });
  } else if (isa<MseLossOp>(op)) {
    std::vector<V> squares;
    for (size_t i = 0; i < in[0]->data.size(); ++i) {
      V diff = d.sub(in[0]->data[i], in[1]->data[i]);
      squares.push_back(d.mul(diff, diff));
    }
    out = Tensor<V>({}, d.scale(d.sum(squares), Rational(1, numElements(in[0]->shape))));
  } else if (isa<BiasAddOp>(op)) {
    int64_t n = in[1]->shape[0];
    elementwise([&](size_t i) { return d.add(in[0]->data[i], in[1]->data[i % n]); });
  } else if (auto m = dyn_cast<MatmulOp>(op)) {
    const Tensor<V> &a = *in[0], &b = *in[1];
    int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
    int64_t I = a.shape[1 - ld], J = b.shape[1 - rd], K = a.shape[ld];
    out = Tensor<V>({I, J}, d.constant(Rational(0)));
    for (int64_t i = 0; i < I; ++i)
      for (int64_t j = 0; j < J; ++j) {
        std::vector<V> products;
        products.reserve(K);
        for (int64_t k = 0; k < K; ++k) {
          const V &x = ld == 1 ? a.data[i * a.shape[1] + k] : a.data[k * a.shape[1] + i];
          const V &y = rd == 0 ? b.data[k * b.shape[1] + j] : b.data[j * b.shape[1] + k];
          products.push_back(d.mul(x, y));
        }
        out.data[i * J + j] = d.sum(products);
      }
  } else if (auto r = dyn_cast<ReduceSumOp>(op)) {
    const Tensor<V> &a = *in[0];
    auto dims = r.getDims();
    Shape shape;
    for (int64_t k = 0; k < (int64_t)a.shape.size(); ++k)
      if (!llvm::is_contained(dims, k))
        shape.push_back(a.shape[k]);
    out = Tensor<V>(shape, d.constant(Rational(0)));
    std::vector<std::vector<V>> parts(out.data.size());
    for (int64_t l = 0; l < (int64_t)a.data.size(); ++l) {
      auto idx = a.unravel(l);
      std::vector<int64_t> o;
      for (int64_t k = 0; k < (int64_t)idx.size(); ++k)
        if (!llvm::is_contained(dims, k))
          o.push_back(idx[k]);
      parts[out.linear(o)].push_back(a.data[l]);
    }
    for (size_t o = 0; o < parts.size(); ++o)
      out.data[o] = d.sum(parts[o]);
  } else {
    return "op '" + op->getName().getStringRef().str() + "' has no semantics in planproof yet";
  }
  return "";
}

/// Reduces `vals` (the group's values of one element, in group order) by `kind`.
template <class D>
typename D::Value reduceValues(D &d, ReduceKind kind, const std::vector<typename D::Value> &vals) {
  if (kind == ReduceKind::Max)
    return d.apply(Fn::Max, vals);
  typename D::Value acc = d.sum(vals);
  if (kind == ReduceKind::Avg)
    acc = d.scale(acc, Rational(1, (int64_t)vals.size()));
  return acc;
}

/// The block of dimension `dim` of `t` at `position` out of `parts` equal blocks.
template <class V> Tensor<V> takeBlock(const Tensor<V> &t, int64_t dim, int64_t position, int64_t parts) {
  Tensor<V> out;
  out.shape = t.shape;
  out.shape[dim] /= parts;
  out.data.reserve(numElements(out.shape));
  for (int64_t l = 0; l < numElements(out.shape); ++l) {
    auto idx = out.unravel(l);
    idx[dim] += position * out.shape[dim];
    out.data.push_back(t.at(idx));
  }
  return out;
}

/// Mesh axis indices named by a collective's `axes` attribute.
inline std::vector<int> collectiveAxes(mlir::Operation *op, const Mesh &mesh) {
  std::vector<int> axes;
  for (mlir::Attribute a : op->getAttrOfType<mlir::ArrayAttr>("axes"))
    axes.push_back(mesh.axisIndex(mlir::cast<mlir::StringAttr>(a).getValue().str()));
  return axes;
}

/// Computes a collective for every rank at once: `in[r]` is rank r's operand, and
/// `out[r]` receives rank r's result.
template <class D>
std::string evalCollective(D &d, mlir::Operation *op, const Mesh &mesh,
                           const std::vector<const Tensor<typename D::Value> *> &in,
                           std::vector<Tensor<typename D::Value>> &out) {
  using V = typename D::Value;
  using namespace planproof::dist;
  if (!mlir::isa<AllReduceOp, AllGatherOp, ReduceScatterOp, ShardSliceOp>(op))
    return "op '" + op->getName().getStringRef().str() + "' has no semantics in planproof yet";
  std::vector<int> axes = collectiveAxes(op, mesh);
  int64_t n = mesh.groupSize(axes), ranks = mesh.numRanks();
  ReduceKind kind = ReduceKind::Sum;
  if (auto k = op->getAttrOfType<mlir::StringAttr>("kind"))
    parseReduceKind(k.getValue().str(), kind);
  int64_t dim = 0;
  if (auto a = op->getAttrOfType<mlir::IntegerAttr>("dim"))
    dim = a.getInt();
  out.assign(ranks, Tensor<V>());
  // Each group is computed once, by its first rank in group order.
  for (int64_t r = 0; r < ranks; ++r) {
    if (mlir::isa<ShardSliceOp>(op)) {
      out[r] = takeBlock(*in[r], dim, mesh.positionInGroup(r, axes), n);
      continue;
    }
    std::vector<int64_t> group = mesh.group(r, axes);
    if (group[0] != r)
      continue;
    Tensor<V> result;
    if (mlir::isa<AllGatherOp>(op)) {
      const Tensor<V> &piece = *in[r];
      result.shape = piece.shape;
      result.shape[dim] *= n;
      result.data.resize(numElements(result.shape), d.constant(Rational(0)));
      for (int64_t p = 0; p < n; ++p) {
        const Tensor<V> &src = *in[group[p]];
        for (int64_t l = 0; l < (int64_t)src.data.size(); ++l) {
          auto idx = src.unravel(l);
          idx[dim] += p * piece.shape[dim];
          result.at(idx) = src.data[l];
        }
      }
    } else {
      result = *in[r];
      std::vector<V> vals(n, d.constant(Rational(0)));
      for (size_t l = 0; l < result.data.size(); ++l) {
        for (int64_t p = 0; p < n; ++p)
          vals[p] = in[group[p]]->data[l];
        result.data[l] = reduceValues(d, kind, vals);
      }
    }
    for (int64_t p = 0; p < n; ++p) {
      int64_t member = group[p];
      out[member] = mlir::isa<ReduceScatterOp>(op) ? takeBlock(result, dim, p, n) : result;
    }
  }
  return "";
}

} // namespace planproof

#endif
