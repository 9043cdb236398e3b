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
//   bool integer(const Value &, int64_t &);  // an integer value known here (an offset)
//
// and optionally, for speed, `bool products(const ProductDims &, const Value *a,
// const Value *b, Value *out)`: a whole matrix product at once, which must equal the
// element-wise definition below (sum of `mul`s per output element) or return false to
// have it computed element by element (the numeric replay's kernels, Products.h).
//
// Each function returns an empty string on success, or the reason the op is not
// supported (the verifier turns that into *inconclusive*, never into a verdict).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_OPSEMANTICS_H
#define PLANPROOF_SEMANTICS_OPSEMANTICS_H

#include "Dist/DistDialect.h"
#include "Support/Rational.h"
#include "Ref/RefDialect.h"
#include "Semantics/Functions.h"
#include "Semantics/Layout.h"
#include "Semantics/Tensor.h"


#include <algorithm>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

namespace planproof {

/// Rational value of a float attribute: the exact rational the constant denotes
/// (exactConstant; spec loading rejects constants it cannot represent).
inline Rational attrRationalOf(double x) {
  Rational r;
  std::string why;
  if (!exactConstant(x, r, why))
    throw NumericLimit(why);
  return r;
}
inline Rational attrRational(mlir::FloatAttr a) { return attrRationalOf(a.getValueAsDouble()); }

/// A batch of matrix products over strided operands:
/// out[n, i, j] (contiguous N x I x J) = sum over k of A[n, i, k] * B[n, k, j], with
/// A[n, i, k] at a[n*aN + i*aI + k*aK] and B[n, k, j] at b[n*bN + k*bK + j*bJ].
struct ProductDims {
  int64_t N, I, J, K;
  int64_t aN, aI, aK, bN, bK, bJ;
};

/// Whether a domain computes whole matrix products itself (see the header comment).
template <class D, class = void> struct HasProducts : std::false_type {};
template <class D>
struct HasProducts<D, std::void_t<decltype(std::declval<D &>().products(
                          std::declval<const ProductDims &>(),
                          std::declval<const typename D::Value *>(),
                          std::declval<const typename D::Value *>(),
                          std::declval<typename D::Value *>()))>> : std::true_type {};

/// The products of `dims` by the definition: per output element, the `mul` of each
/// pair in k order, then their `sum` -- or by the domain's own `products` when it has
/// one and takes these operands.
template <class D>
void evalProducts(D &d, const ProductDims &p, const typename D::Value *a,
                  const typename D::Value *b, typename D::Value *out) {
  using V = typename D::Value;
  if constexpr (HasProducts<D>::value)
    if (d.products(p, a, b, out))
      return;
  std::vector<V> products;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t i = 0; i < p.I; ++i)
      for (int64_t j = 0; j < p.J; ++j) {
        products.clear();
        products.reserve(p.K);
        for (int64_t k = 0; k < p.K; ++k)
          products.push_back(
              d.mul(a[n * p.aN + i * p.aI + k * p.aK], b[n * p.bN + k * p.bK + j * p.bJ]));
        out[(n * p.I + i) * p.J + j] = d.sum(products);
      }
}

/// The scalar function an elementwise function op applies, if `op` is one
/// (ScalarFunctionOpInterface; the functions are defined in ScalarFunctions.def).
inline std::optional<Fn> unaryFunction(mlir::Operation *op) {
  if (auto f = mlir::dyn_cast<ref::ScalarFunctionOp>(op))
    return toFn(f.getFunction());
  return std::nullopt;
}

inline Shape resultShape(mlir::Operation *op) {
  auto t = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

namespace op_eval {
using namespace planproof::ref;
using mlir::dyn_cast;
using mlir::isa;

/// The evaluation of one rank-local op (evalRefOp), one member per op family.
template <class D> struct Evaluator {
  using V = typename D::Value;
  D &d;
  mlir::Operation *op;
  const std::vector<const Tensor<V> *> &in;
  Tensor<V> &out;
  const std::vector<V> &indices;
  std::string err;

  /// `out` = fn(i) for every element i of the shape of operand 0.
  template <class Fn> void elementwise(Fn fn) {
    out = Tensor<V>(in[0]->shape, d.constant(Rational(0)));
    for (size_t i = 0; i < out.data.size(); ++i)
      out.data[i] = fn(i);
  }

  /// The elementwise arithmetic, the MSE loss and its gradient, bias addition; false when `op` is none of them.
  bool arithmetic() {
    if (isa<AddOp>(op)) {
      elementwise([&](size_t i) { return d.add(in[0]->data[i], in[1]->data[i]); });
    } else if (isa<SubOp>(op)) {
      elementwise([&](size_t i) { return d.sub(in[0]->data[i], in[1]->data[i]); });
    } else if (isa<MulOp>(op)) {
      elementwise([&](size_t i) { return d.mul(in[0]->data[i], in[1]->data[i]); });
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
    } else {
      return false;
    }
    return true;
  }

  /// The matrix products and reductions; false when `op` is none of them.
  bool productsAndReductions() {
    if (auto m = dyn_cast<MatmulOp>(op)) {
      const Tensor<V> &a = *in[0], &b = *in[1];
      int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
      int64_t I = a.shape[1 - ld], J = b.shape[1 - rd], K = a.shape[ld];
      out = Tensor<V>({I, J}, d.constant(Rational(0)));
      // a[i, k] (lhs dim 1) or a[k, i] (lhs dim 0); b[k, j] (rhs dim 0) or b[j, k].
      ProductDims p{1, I, J, K, 0, ld == 1 ? a.shape[1] : 1, ld == 1 ? 1 : a.shape[1],
                    0, rd == 0 ? b.shape[1] : 1, rd == 0 ? 1 : b.shape[1]};
      evalProducts(d, p, a.data.data(), b.data.data(), out.data.data());
    } else if (isa<DotOp>(op)) {
      // One 1 x K by K x 1 product: the sum of the K products, in order.
      int64_t K = in[0]->shape[0];
      out = Tensor<V>(Shape{}, d.constant(Rational(0)));
      ProductDims p{1, 1, 1, K, 0, 0, 1, 0, 1, 0};
      evalProducts(d, p, in[0]->data.data(), in[1]->data.data(), out.data.data());
    } else if (isa<ReduceSumOp, ReduceMaxOp, ReduceMeanOp>(op)) {
      auto dims = op->getAttrOfType<mlir::DenseI64ArrayAttr>("dims").asArrayRef();
      const Tensor<V> &a = *in[0];
      out = Tensor<V>(resultShape(op), d.constant(Rational(0)));
      // Group the input elements by their index in the kept dimensions.
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
        out.data[o] = isa<ReduceMaxOp>(op)    ? d.apply(Fn::Max, parts[o])
                      : isa<ReduceSumOp>(op) ? d.sum(parts[o])
                                             : d.scale(d.sum(parts[o]),
                                                       Rational(1, (int64_t)parts[o].size()));
    } else {
      return false;
    }
    return true;
  }

  /// The random masks, powers, lookups, routing and constants; false when `op` is none of them.
  bool generators() {
    if (auto dm = dyn_cast<DropoutMaskOp>(op)) {
      // Element i draws the pair (key, counter + i), i its row-major linear index.
      Rational p = attrRational(dm.getPAttr());
      out = Tensor<V>(resultShape(op), d.constant(Rational(0)));
      for (size_t i = 0; i < out.data.size(); ++i)
        out.data[i] = d.apply(Fn::DropMask, {indices[0], d.add(indices[1], d.constant(Rational((int64_t)i))),
                                             d.constant(p)});
    } else if (auto pw = dyn_cast<PowerOp>(op)) {
      out = Tensor<V>(Shape{}, d.apply(Fn::Pow, {d.constant(attrRational(pw.getBaseAttr())),
                                                 indices[0]}));
    } else if (isa<EmbeddingOp, EmbeddingGradOp>(op)) {
      // Row v of the (local) table is global row offset + v; [id == offset + v] selects it.
      V offset = indices.empty() ? d.constant(Rational(0)) : indices[0];
      const Tensor<V> &ids = *in[1];
      int64_t T = ids.shape[0];
      bool lookup = isa<EmbeddingOp>(op);
      const Tensor<V> &dense = *in[0]; // table [rows, W] or gradient [T, W]
      int64_t W = dense.shape[1];
      int64_t rows = lookup ? dense.shape[0] : resultShape(op)[0];
      auto select = [&](int64_t t, int64_t v) {
        return d.apply(Fn::Eq, {ids.data[t], d.add(offset, d.constant(Rational(v)))});
      };
      out = Tensor<V>(lookup ? Shape{T, W} : Shape{rows, W}, d.constant(Rational(0)));
      for (int64_t a = 0; a < (lookup ? T : rows); ++a)
        for (int64_t w = 0; w < W; ++w) {
          std::vector<V> terms;
          for (int64_t b = 0; b < (lookup ? rows : T); ++b) {
            int64_t t = lookup ? a : b, v = lookup ? b : a;
            const V &x = lookup ? dense.data[v * W + w] : dense.data[t * W + w];
            terms.push_back(d.mul(select(t, v), x));
          }
          out.data[a * W + w] = d.sum(terms);
        }
    } else if (isa<OneHotOp>(op)) {
      // Column j is global class offset + j: [id == offset + j].
      V offset = indices.empty() ? d.constant(Rational(0)) : indices[0];
      const Tensor<V> &ids = *in[0];
      Shape shape = resultShape(op);
      out = Tensor<V>(shape, d.constant(Rational(0)));
      for (int64_t t = 0; t < shape[0]; ++t)
        for (int64_t j = 0; j < shape[1]; ++j)
          out.data[t * shape[1] + j] =
              d.apply(Fn::Eq, {ids.data[t], d.add(offset, d.constant(Rational(j)))});
    } else if (auto tk = dyn_cast<TopkMaskOp>(op)) {
      // Element e of each row: topk(row..., e, k), a function of the whole row.
      const Tensor<V> &x = *in[0];
      int64_t n = x.shape.back(), rows = x.data.size() / std::max<int64_t>(n, 1);
      out = Tensor<V>(x.shape, d.constant(Rational(0)));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t e = 0; e < n; ++e) {
          std::vector<V> args(x.data.begin() + r * n, x.data.begin() + (r + 1) * n);
          args.push_back(d.constant(Rational(e)));
          args.push_back(d.constant(Rational((int64_t)tk.getK())));
          out.data[r * n + e] = d.apply(Fn::TopK, std::move(args));
        }
    } else if (auto cd = dyn_cast<CapacityDispatchOp>(op)) {
      // Token t of group g routed to e takes slot g*C + (earlier tokens of g routed to e).
      // Leading dimensions are batches, each dispatched on its own.
      const Tensor<V> &m = *in[0];
      size_t rank = m.shape.size();
      int64_t T = m.shape[rank - 2], E = m.shape[rank - 1], C = cd.getCapacity(),
              G = cd.getGroups();
      int64_t per = T / G, batches = (int64_t)m.data.size() / std::max<int64_t>(T * E, 1);
      Shape shape = m.shape;
      shape.push_back(G * C);
      out = Tensor<V>(shape, d.constant(Rational(0)));
      for (int64_t n = 0; n < batches; ++n) {
        const int64_t inBase = n * T * E, outBase = n * T * E * G * C;
        for (int64_t e = 0; e < E; ++e)
          for (int64_t g = 0; g < G; ++g) {
            std::vector<V> earlier;
            for (int64_t t = g * per; t < (g + 1) * per; ++t) {
              V pos = d.sum(earlier);
              for (int64_t c = 0; c < C; ++c)
                out.data[outBase + (t * E + e) * G * C + g * C + c] = d.mul(
                    m.data[inBase + t * E + e], d.apply(Fn::Eq, {pos, d.constant(Rational(c))}));
              earlier.push_back(m.data[inBase + t * E + e]);
            }
          }
      }
    } else if (isa<DetachOp>(op)) {
      out = *in[0];
    } else if (auto c = dyn_cast<ConstantOp>(op)) {
      out = Tensor<V>(resultShape(op), d.constant(attrRational(c.getValueAttr())));
    } else if (auto lit = dyn_cast<LiteralOp>(op)) {
      out = Tensor<V>(resultShape(op), d.constant(Rational(0)));
      for (size_t i = 0; i < out.data.size(); ++i) {
        Rational r;
        std::string why;
        if (!exactConstant(lit.getValues()[i], r, why))
          return err = "ref.literal: " + why, true;
        out.data[i] = d.constant(r);
      }
    } else {
      return false;
    }
    return true;
  }

  /// The scalar functions and the other nonlinear elementwise ops; false when `op` is none of them.
  bool functions() {
    if (auto fn = unaryFunction(op)) {
      elementwise([&](size_t i) { return d.apply(*fn, {in[0]->data[i]}); });
    } else if (isa<SiluGradOp>(op)) {
      elementwise([&](size_t i) {
        return d.mul(d.apply(Fn::SiluDeriv, {in[0]->data[i]}), in[1]->data[i]);
      });
    } else if (isa<DivOp>(op)) {
      elementwise([&](size_t i) { return d.mul(in[0]->data[i], d.apply(Fn::Recip, {in[1]->data[i]})); });
    } else if (isa<MaximumOp>(op)) {
      elementwise([&](size_t i) { return d.apply(Fn::Max, {in[0]->data[i], in[1]->data[i]}); });
    } else if (isa<MinimumOp>(op)) {
      elementwise([&](size_t i) {
        return d.scale(d.apply(Fn::Max, {d.scale(in[0]->data[i], Rational(-1)),
                                         d.scale(in[1]->data[i], Rational(-1))}),
                       Rational(-1));
      });
    } else {
      return false;
    }
    return true;
  }

  /// The layout ops and batched products; false when `op` is none of them.
  bool layoutOps() {
    if (auto t = dyn_cast<TransposeOp>(op)) {
      auto perm = t.getPerm();
      Shape shape;
      for (int64_t p : perm)
        shape.push_back(in[0]->shape[p]);
      out = Tensor<V>(shape, d.constant(Rational(0)));
      std::vector<int64_t> src(shape.size());
      for (int64_t l = 0; l < (int64_t)out.data.size(); ++l) {
        auto j = out.unravel(l);
        for (size_t k = 0; k < perm.size(); ++k)
          src[perm[k]] = j[k];
        out.data[l] = in[0]->at(src);
      }
    } else if (isa<ReshapeOp>(op)) {
      out = *in[0];
      out.shape = resultShape(op);
    } else if (auto b = dyn_cast<BroadcastOp>(op)) {
      auto dims = b.getDims();
      out = Tensor<V>(resultShape(op), d.constant(Rational(0)));
      std::vector<int64_t> src(dims.size());
      for (int64_t l = 0; l < (int64_t)out.data.size(); ++l) {
        auto j = out.unravel(l);
        for (size_t k = 0; k < dims.size(); ++k)
          src[k] = j[dims[k]];
        out.data[l] = in[0]->at(src);
      }
    } else if (auto sl = dyn_cast<SliceOp>(op)) {
      auto off = sl.getOffsets();
      out = Tensor<V>(Shape(sl.getSizes().begin(), sl.getSizes().end()), d.constant(Rational(0)));
      for (int64_t l = 0; l < (int64_t)out.data.size(); ++l) {
        auto j = out.unravel(l);
        for (size_t k = 0; k < j.size(); ++k)
          j[k] += off[k];
        out.data[l] = in[0]->at(j);
      }
    } else if (auto c = dyn_cast<ConcatOp>(op)) {
      int64_t dim = c.getDim();
      out = Tensor<V>(resultShape(op), d.constant(Rational(0)));
      int64_t base = 0;
      for (const Tensor<V> *part : in) {
        for (int64_t l = 0; l < (int64_t)part->data.size(); ++l) {
          auto j = part->unravel(l);
          j[dim] += base;
          out.at(j) = part->data[l];
        }
        base += part->shape[dim];
      }
    } else if (auto bm = dyn_cast<BatchMatmulOp>(op)) {
      const Tensor<V> &a = *in[0], &b = *in[1];
      int64_t ld = bm.getLhsDim(), rd = bm.getRhsDim();
      int64_t N = a.shape[0], I = a.shape[3 - ld], J = b.shape[3 - rd], K = a.shape[ld];
      out = Tensor<V>({N, I, J}, d.constant(Rational(0)));
      // a[n, i, k] (lhs dim 2) or a[n, k, i]; b[n, k, j] (rhs dim 1) or b[n, j, k].
      int64_t as = a.shape[2], bs = b.shape[2];
      ProductDims p{N, I, J, K, a.shape[1] * as, ld == 2 ? as : 1, ld == 2 ? 1 : as,
                    b.shape[1] * bs, rd == 1 ? bs : 1, rd == 1 ? 1 : bs};
      evalProducts(d, p, a.data.data(), b.data.data(), out.data.data());
    } else {
      return false;
    }
    return true;
  }

  /// The softmaxes and attention masks; false when `op` is none of them.
  bool attention() {
    if (isa<SoftmaxOp, CausalSoftmaxOp>(op)) {
      const Tensor<V> &x = *in[0];
      out = Tensor<V>(x.shape, d.constant(Rational(0)));
      int64_t cols = x.shape.back(), rows = x.data.size() / std::max<int64_t>(cols, 1);
      int64_t sq = x.shape.size() >= 2 ? x.shape[x.shape.size() - 2] : 1;
      bool causal = isa<CausalSoftmaxOp>(op);
      // Causal: query row i sees keys j <= offset + i (offset Sk - Sq by default).
      int64_t offset = cols - sq;
      if (causal && !indices.empty() && !d.integer(indices[0], offset))
        return err = "ref.causal_softmax: the offset must be an integer known on every rank (rank "
               "coordinates and constants), not a value of the step's inputs", true;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t allowed = causal ? scalar::causalAllowed(r % sq, offset, cols) : cols;
        if (allowed == 0)
          continue; // a query that sees no key: a row of zeros
        std::vector<V> row(x.data.begin() + r * cols, x.data.begin() + r * cols + allowed);
        V m = d.apply(Fn::Max, row);
        std::vector<V> e;
        for (const V &v : row)
          e.push_back(d.apply(Fn::Exp, {d.sub(v, m)}));
        V inv = d.apply(Fn::Recip, {d.sum(e)});
        for (int64_t j = 0; j < allowed; ++j)
          out.data[r * cols + j] = d.mul(e[j], inv);
      }
    } else if (auto pm = dyn_cast<PositionMaskOp>(op)) {
      int64_t q0, k0;
      if (!d.integer(indices[0], q0) || !d.integer(indices[1], k0))
        return err = "ref.position_mask: the offsets must be integers known on every rank (rank "
               "coordinates and constants), not values of the step's inputs", true;
      Shape s = resultShape(op);
      out = Tensor<V>(s, d.constant(Rational(0)));
      for (int64_t i = 0; i < s[0]; ++i)
        for (int64_t j = 0; j < s[1]; ++j)
          out.data[i * s[1] + j] = d.constant(Rational(
              scalar::positionVisible(q0 + i, k0 + j, pm.getCausal(), pm.getWindow()) ? 1 : 0));
    } else if (isa<DocumentMaskOp>(op)) {
      const Tensor<V> &q = *in[0], &k = *in[1];
      int64_t Sq = q.shape[0], Sk = k.shape[0];
      out = Tensor<V>({Sq, Sk}, d.constant(Rational(0)));
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < Sk; ++j)
          out.data[i * Sk + j] = d.apply(Fn::Eq, {q.data[i], k.data[j]});
    } else if (isa<MaskedSoftmaxOp>(op)) {
      const Tensor<V> &x = *in[0], &mask = *in[1];
      out = Tensor<V>(x.shape, d.constant(Rational(0)));
      int64_t cols = x.shape.back(), rows = x.data.size() / std::max<int64_t>(cols, 1);
      int64_t maskSize = mask.data.size();
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<V> shift, e;
        std::vector<int64_t> cand;
        for (int64_t j = 0; j < cols; ++j) {
          const V &mj = mask.data[(r * cols + j) % maskSize];
          int64_t known;
          if (d.integer(mj, known) && known == 0)
            continue; // known invisible: neither in the max nor in the sum
          shift.push_back(x.data[r * cols + j]);
          cand.push_back(j);
        }
        if (cand.empty())
          continue; // a row with no visible column: zeros
        V m = d.apply(Fn::Max, shift);
        for (int64_t j : cand)
          e.push_back(d.mul(mask.data[(r * cols + j) % maskSize],
                            d.apply(Fn::Exp, {d.sub(x.data[r * cols + j], m)})));
        V inv = d.apply(Fn::Recip, {d.sum(e)});
        for (size_t c = 0; c < cand.size(); ++c)
          out.data[r * cols + cand[c]] = d.mul(e[c], inv);
      }
    } else {
      return false;
    }
    return true;
  }

  /// The norms, rotary embeddings and cross-entropy; false when `op` is none of them.
  bool normsAndLosses() {
    if (isa<RmsNormOp, LayerNormOp>(op)) {
      const Tensor<V> &x = *in[0];
      Rational eps = attrRational(op->getAttrOfType<mlir::FloatAttr>("eps"));
      out = Tensor<V>(x.shape, d.constant(Rational(0)));
      int64_t width = x.shape.back(), rows = x.data.size() / std::max<int64_t>(width, 1);
      bool layer = isa<LayerNormOp>(op);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<V> centered(x.data.begin() + r * width, x.data.begin() + (r + 1) * width);
        if (layer) {
          V mu = d.scale(d.sum(centered), Rational(1, width));
          for (V &v : centered)
            v = d.sub(v, mu);
        }
        std::vector<V> squares;
        for (const V &v : centered)
          squares.push_back(d.mul(v, v));
        V rs = d.apply(Fn::Rsqrt,
                       {d.add(d.scale(d.sum(squares), Rational(1, width)), d.constant(eps))});
        for (int64_t j = 0; j < width; ++j) {
          V y = d.mul(d.mul(centered[j], rs), in[1]->data[j]);
          out.data[r * width + j] = layer ? d.add(y, in[2]->data[j]) : y;
        }
      }
    } else if (isa<RotaryOp>(op)) {
      const Tensor<V> &x = *in[0], &cs = *in[1], &sn = *in[2];
      out = Tensor<V>(x.shape, d.constant(Rational(0)));
      int64_t width = x.shape.back(), S = x.shape[x.shape.size() - 2], half = width / 2;
      for (int64_t l = 0; l < (int64_t)x.data.size(); ++l) {
        int64_t dd = l % width, s = (l / width) % S;
        V rot = dd < half ? d.scale(x.data[l + half], Rational(-1)) : x.data[l - half];
        out.data[l] = d.add(d.mul(x.data[l], cs.data[s * width + dd]),
                            d.mul(rot, sn.data[s * width + dd]));
      }
    } else if (isa<CrossEntropyOp, CrossEntropySumOp>(op)) {
      const Tensor<V> &x = *in[0], &labels = *in[1], &mask = *in[2];
      int64_t T = x.shape[0], Vs = x.shape[1];
      std::vector<V> losses;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<V> row(x.data.begin() + t * Vs, x.data.begin() + (t + 1) * Vs);
        V m = d.apply(Fn::Max, row);
        std::vector<V> e, picked;
        for (int64_t v = 0; v < Vs; ++v) {
          e.push_back(d.apply(Fn::Exp, {d.sub(row[v], m)}));
          picked.push_back(d.mul(labels.data[t * Vs + v], row[v]));
        }
        V lse = d.add(m, d.apply(Fn::Log, {d.sum(e)}));
        losses.push_back(d.mul(mask.data[t], d.sub(lse, d.sum(picked))));
      }
      out = isa<CrossEntropySumOp>(op)
                ? Tensor<V>({}, d.sum(losses))
                : Tensor<V>({}, d.mul(d.sum(losses), d.apply(Fn::Recip, {d.sum(mask.data)})));
    } else {
      return false;
    }
    return true;
  }
};
} // namespace op_eval

/// Computes the result of the rank-local (or single-device) op `op` from its operands.
/// `in` holds the tensor operands in order; `indices` the values of the op's `index`
/// operands (an embedding's row offset, a random stream's key and counter, a step
/// count), in order, on the rank being evaluated, as scalars of the domain (integers).
template <class D>
std::string evalRefOp(D &d, mlir::Operation *op,
                      const std::vector<const Tensor<typename D::Value> *> &in,
                      Tensor<typename D::Value> &out,
                      const std::vector<typename D::Value> &indices = {}) {
  op_eval::Evaluator<D> e{d, op, in, out, indices, ""};
  if (e.arithmetic() || e.productsAndReductions() || e.generators() || e.functions() ||
      e.layoutOps() || e.attention() || e.normsAndLosses())
    return e.err;
  return "op '" + op->getName().getStringRef().str() + "' has no semantics in planproof yet";
}

/// Whether a domain sums a collective's group in its own order (`groupSum`: the numeric
/// replay's rank, ring and tree orders) rather than like any other sum.
template <class D, class = void> struct HasGroupSum : std::false_type {};
template <class D>
struct HasGroupSum<D, std::void_t<decltype(std::declval<D &>().groupSum(
                          std::declval<const std::vector<typename D::Value> &>()))>>
    : std::true_type {};

/// Reduces `vals` (the group's values of one element, in group order) by `kind`.
template <class D>
typename D::Value reduceValues(D &d, ReduceKind kind, const std::vector<typename D::Value> &vals) {
  if (kind == ReduceKind::Max)
    return d.apply(Fn::Max, vals);
  typename D::Value acc;
  if constexpr (HasGroupSum<D>::value)
    acc = d.groupSum(vals);
  else
    acc = d.sum(vals);
  if (kind == ReduceKind::Avg)
    acc = d.scale(acc, Rational(1, (int64_t)vals.size()));
  return acc;
}

/// The global value of element `l` of rank `rank`'s block under `layout`: the element
/// itself, or for partial layouts the reduction over the rank's partial group (sums
/// and averages combined, or maxima). Returns false for layouts that mix max with
/// sum/avg. One definition for the proofs (gathering outputs, localization) and the
/// numeric replay.
template <class D>
bool gatherPartial(D &d, const Mesh &mesh, const Layout &layout,
                   const std::vector<Tensor<typename D::Value>> &perRank, int64_t rank,
                   int64_t l, typename D::Value &out) {
  if (!layout.isPartial()) {
    out = perRank[rank].data[l];
    return true;
  }
  bool anyMax = false, allMax = true;
  Rational scale(1);
  for (auto &[axis, kind] : layout.partial) {
    anyMax |= kind == ReduceKind::Max;
    allMax &= kind == ReduceKind::Max;
    if (kind == ReduceKind::Avg)
      scale = scale * Rational(1, mesh.shape[axis]);
  }
  if (anyMax && !allMax)
    return false;
  std::vector<typename D::Value> vals;
  for (int64_t member : mesh.group(rank, layout.partialAxes()))
    vals.push_back(perRank[member].data[l]);
  out = allMax ? reduceValues(d, ReduceKind::Max, vals)
               : d.scale(reduceValues(d, ReduceKind::Sum, vals), scale);
  return true;
}

/// The block of dimension `dim` of `t` at `position` out of `parts` equal blocks.
/// With `inner` > 0 the blocks are zigzag, `inner` the ranks of the minor axis
/// (Layout.h's blockToWhole).
template <class V>
Tensor<V> takeBlock(const Tensor<V> &t, int64_t dim, int64_t position, int64_t parts,
                    int64_t inner = 0) {
  Tensor<V> out;
  out.shape = t.shape;
  out.shape[dim] /= parts;
  out.data.reserve(numElements(out.shape));
  for (int64_t l = 0; l < numElements(out.shape); ++l) {
    auto idx = out.unravel(l);
    idx[dim] = blockToWhole(idx[dim], t.shape[dim], position, parts, inner);
    out.data.push_back(t.at(idx));
  }
  return out;
}

/// What a dist.save or dist.load touches: the checkpoint entry `key` of global `shape`,
/// at `offsets` (index values), with a piece of type `type` whose elements form the
/// `local` block (an index value is one element).
struct CheckpointAccess {
  bool saving;
  std::string key;
  Shape shape, local;
  mlir::ValueRange offsets;
  mlir::Type type;
};
inline CheckpointAccess checkpointAccess(mlir::Operation &op) {
  CheckpointAccess a{mlir::isa<dist::SaveOp>(op), "", {}, {}, {}, {}};
  auto shapeAttr = a.saving ? mlir::cast<dist::SaveOp>(op).getShape() : mlir::cast<dist::LoadOp>(op).getShape();
  a.shape.assign(shapeAttr.begin(), shapeAttr.end());
  a.key = a.saving ? mlir::cast<dist::SaveOp>(op).getKey().str() : mlir::cast<dist::LoadOp>(op).getKey().str();
  a.offsets = a.saving ? mlir::ValueRange(mlir::cast<dist::SaveOp>(op).getOffsets())
                       : mlir::ValueRange(mlir::cast<dist::LoadOp>(op).getOffsets());
  a.type = a.saving ? mlir::cast<dist::SaveOp>(op).getValue().getType() : op.getResult(0).getType();
  if (auto t = mlir::dyn_cast<mlir::RankedTensorType>(a.type))
    a.local.assign(t.getShape().begin(), t.getShape().end());
  else
    a.local.assign(a.shape.size(), 1);
  return a;
}

/// The rank that saves rank `r`'s piece under a dist.save `on = {axis = k, ...}`
/// filter: `r` itself when its coordinates match, else the rank with the `on`
/// coordinates and `r`'s own elsewhere (which `r` relies on holding the same value).
inline int64_t checkpointSaver(const Mesh &mesh, int64_t r, dist::SaveOp save) {
  auto on = save.getOnAttr();
  if (!on)
    return r;
  std::vector<int64_t> c = mesh.coords(r);
  for (mlir::NamedAttribute a : on)
    c[mesh.axisIndex(a.getName().str())] = mlir::cast<mlir::IntegerAttr>(a.getValue()).getInt();
  return mesh.rankOf(c);
}

/// Whether rank `r` takes the first operand of a dist.select_on: its coordinates equal
/// the op's `on` coordinates.
inline bool selectOnTaken(dist::SelectOnOp op, const Mesh &mesh, int64_t r) {
  std::vector<int64_t> c = mesh.coords(r);
  for (mlir::NamedAttribute a : op.getOn())
    if (c[mesh.axisIndex(a.getName().str())] != mlir::cast<mlir::IntegerAttr>(a.getValue()).getInt())
      return false;
  return true;
}

/// Mesh axis indices named by a collective's `axes` attribute.
inline std::vector<int> collectiveAxes(mlir::Operation *op, const Mesh &mesh) {
  std::vector<int> axes;
  for (mlir::Attribute a : mlir::cast<dist::CollectiveOp>(op).getAxesAttr())
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
  if (!mlir::isa<CollectiveOp>(op))
    return "op '" + op->getName().getStringRef().str() + "' has no semantics in planproof yet";
  std::vector<int> axes = collectiveAxes(op, mesh);
  int64_t n = mesh.groupSize(axes), ranks = mesh.numRanks();
  if (auto a2a = mlir::dyn_cast<AllToAllOp>(op)) {
    // Rank at group position q receives block q (of split_dim) from every member p,
    // placed at block p of concat_dim.
    int64_t sd = a2a.getSplitDim(), cdim = a2a.getConcatDim();
    out.assign(ranks, Tensor<V>());
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<int64_t> group = mesh.group(r, axes);
      int64_t q = mesh.positionInGroup(r, axes);
      Tensor<V> &res = out[r];
      res.shape = in[r]->shape;
      res.shape[sd] /= n;
      res.shape[cdim] *= n;
      res.data.assign(numElements(res.shape), d.constant(Rational(0)));
      // (With split_dim == concat_dim each received block is the sent block's size.)
      int64_t bs = in[r]->shape[sd] / n, bc = in[r]->shape[cdim];
      for (int64_t p = 0; p < n; ++p) {
        Tensor<V> piece = takeBlock(*in[group[p]], sd, q, n);
        for (int64_t l = 0; l < (int64_t)piece.data.size(); ++l) {
          auto idx = piece.unravel(l);
          idx[cdim] += p * (sd == cdim ? bs : bc);
          res.at(idx) = piece.data[l];
        }
      }
    }
    return "";
  }
  ReduceKind kind = ReduceKind::Sum;
  if (auto k = op->getAttrOfType<mlir::StringAttr>("kind"))
    parseReduceKind(k.getValue().str(), kind);
  int64_t dim = 0;
  if (auto a = op->getAttrOfType<mlir::IntegerAttr>("dim"))
    dim = a.getInt();
  // zigzag: the minor axis's ranks hold chunks p and 2n-1-p of the others' blocks.
  int64_t zigzag = op->hasAttr("zigzag") && !axes.empty() ? mesh.shape[axes.back()] : 0;
  out.assign(ranks, Tensor<V>());
  // Each group is computed once, by its first rank in group order.
  for (int64_t r = 0; r < ranks; ++r) {
    if (mlir::isa<ShardSliceOp>(op)) {
      out[r] = takeBlock(*in[r], dim, mesh.positionInGroup(r, axes), n, zigzag);
      continue;
    }
    if (mlir::isa<ShardPadOp>(op)) {
      // This rank's block of zeros-elsewhere: where shard_slice takes it from.
      const Tensor<V> &piece = *in[r];
      Tensor<V> whole;
      whole.shape = piece.shape;
      whole.shape[dim] *= n;
      whole.data.assign(numElements(whole.shape), d.constant(Rational(0)));
      int64_t p = mesh.positionInGroup(r, axes);
      for (int64_t l = 0; l < (int64_t)piece.data.size(); ++l) {
        auto idx = piece.unravel(l);
        idx[dim] = blockToWhole(idx[dim], whole.shape[dim], p, n, zigzag);
        whole.at(idx) = piece.data[l];
      }
      out[r] = std::move(whole);
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
          idx[dim] = blockToWhole(idx[dim], result.shape[dim], p, n, zigzag);
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
      out[member] = mlir::isa<ReduceScatterOp>(op) ? takeBlock(result, dim, p, n, zigzag) : result;
    }
  }
  return "";
}

} // namespace planproof

#endif
