//===- LayoutFactorsTest.cpp - each op's layout rule against its semantics ----===//
//
// The certification of the ops' layout rules (dialects/Ref/LayoutFactors.h): for every
// ref op, on random shapes and values, each factor of its rule is cut into two blocks
// and the op is run on the blocks with the one op semantics (lib/Semantics); the
// factor's kind must say exactly what comes out -- the block of the result
// (pass-through; also on any positions in any order), n times it (counted), or a sum,
// mean or maximum of the blocks' results. A factor read whole is a near miss that must be refused: neither claim may
// hold for it. Every ref op must have a case here (elementwise ops without attributes
// are built from their traits), so an op added to the dialect is certified or fails.
// The same cases check each op's declared linearity (Linear, Multilinear, NonlinearOp's
// clear bits), which the layout engine's partial sums and factors rely on.
//
//===----------------------------------------------------------------------===//
#include "Ref/RefDialect.h"
#include "Semantics/OpSemantics.h"
#include "Spec/Spec.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <set>

using namespace planproof;
using ref::FactorKind;

namespace {

struct Numbers {
  using Value = double;
  Value constant(const Rational &c) { return c.toDouble(); }
  bool integer(const Value &v, int64_t &out) {
    out = (int64_t)std::llround(v);
    return (double)out == v;
  }
  Value add(Value a, Value b) { return a + b; }
  Value sum(const std::vector<Value> &v) {
    double s = 0;
    for (double x : v)
      s += x;
    return s;
  }
  Value sub(Value a, Value b) { return a - b; }
  Value mul(Value a, Value b) { return a * b; }
  Value scale(Value a, const Rational &c) { return a * c.toDouble(); }
  Value apply(Fn f, std::vector<Value> args) { return evalFn(f, args); }
};

/// One instance of an op: the function's arguments and the op, with sizes {A}..{D}
/// (even, drawn per round). Integer-id arguments `%ids_X` take values below size X;
/// `%bin` arguments are 0/1, `%doc` arguments small integers.
struct Case {
  const char *args;
  const char *op;
};

const Case kCases[] = {
    {"%x: tensor<{A}x{B}xf32>", "ref.scale %x by 0.5 : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{A}x{B}xf32>",
     "ref.sgd_update %x, %y lr 0.125 : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{B}x{C}xf32>",
     "ref.matmul %x, %y contract(1, 0) : tensor<{A}x{B}xf32>, tensor<{B}x{C}xf32>"},
    {"%x: tensor<{A}xf32>, %y: tensor<{A}xf32>", "ref.dot %x, %y : tensor<{A}xf32>"},
    {"%x: tensor<{B}x{A}xf32>, %y: tensor<{C}x{B}xf32>",
     "ref.matmul %x, %y contract(0, 1) : tensor<{B}x{A}xf32>, tensor<{C}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{C}x{B}xf32>",
     "ref.matmul %x, %y contract(1, 1) : tensor<{A}x{B}xf32>, tensor<{C}x{B}xf32>"},
    {"%x: tensor<{D}x{A}x{B}xf32>, %y: tensor<{D}x{B}x{C}xf32>",
     "ref.batch_matmul %x, %y contract(2, 1) : tensor<{D}x{A}x{B}xf32>, tensor<{D}x{B}x{C}xf32>"},
    {"%x: tensor<{D}x{B}x{A}xf32>, %y: tensor<{D}x{C}x{B}xf32>",
     "ref.batch_matmul %x, %y contract(1, 2) : tensor<{D}x{B}x{A}xf32>, tensor<{D}x{C}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %b: tensor<{B}xf32>",
     "ref.bias_add %x, %b : tensor<{A}x{B}xf32>, tensor<{B}xf32>"},
    {"%x: tensor<{A}x{B}x{C}xf32>", "ref.reduce_sum %x dims [1] : tensor<{A}x{B}x{C}xf32>"},
    {"%x: tensor<{A}x{B}x{C}xf32>", "ref.reduce_sum %x dims [0, 2] : tensor<{A}x{B}x{C}xf32>"},
    {"%x: tensor<{A}x{B}x{C}xf32>", "ref.reduce_mean %x dims [0, 1] : tensor<{A}x{B}x{C}xf32>"},
    {"%x: tensor<{A}x{B}x{C}xf32>", "ref.reduce_max %x dims [2] : tensor<{A}x{B}x{C}xf32>"},
    {"%x: tensor<{A}x{B}x{C}xf32>", "ref.transpose %x perm [2, 0, 1] : tensor<{A}x{B}x{C}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{A}x{B}xf32>", "ref.mse_loss %x, %y : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{A}x{B}xf32>",
     "ref.mse_loss_grad %x, %y : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>", "ref.topk_mask %x k 2 : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>", "ref.softmax %x : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{D}x{A}x{A}xf32>", "ref.causal_softmax %x : tensor<{D}x{A}x{A}xf32>"},
    {"%x: tensor<{D}x{A}x{B}xf32>, %m: tensor<{D}x{A}x{B}xf32>",
     "ref.masked_softmax %x, %m : tensor<{D}x{A}x{B}xf32>, tensor<{D}x{A}x{B}xf32>"},
    {"%x: tensor<{D}x{A}x{B}xf32>, %m: tensor<{A}x{B}xf32>",
     "ref.masked_softmax %x, %m : tensor<{D}x{A}x{B}xf32>, tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %w: tensor<{B}xf32>",
     "ref.rms_norm %x, %w eps 1.0e-5 : tensor<{A}x{B}xf32>, tensor<{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %w: tensor<{B}xf32>, %b: tensor<{B}xf32>",
     "ref.layer_norm %x, %w, %b eps 1.0e-5 : tensor<{A}x{B}xf32>, tensor<{B}xf32>, tensor<{B}xf32>"},
    {"%x: tensor<{D}x{A}x{B}xf32>, %c: tensor<{A}x{B}xf32>, %s: tensor<{A}x{B}xf32>",
     "ref.rotary %x, %c, %s : tensor<{D}x{A}x{B}xf32>, tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{A}x{B}xf32>, %m: tensor<{A}xf32>",
     "ref.cross_entropy_sum %x, %y, %m : tensor<{A}x{B}xf32>, tensor<{A}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %ids_A: tensor<{C}xi64>",
     "ref.embedding %x, %ids_A : tensor<{A}x{B}xf32>, tensor<{C}xi64>"},
    {"%ids_B: tensor<{A}xi64>", "ref.one_hot %ids_B : tensor<{A}xi64> -> tensor<{A}x{B}xf32>"},
    {"%g: tensor<{A}x{B}xf32>, %ids_C: tensor<{A}xi64>",
     "ref.embedding_grad %g, %ids_C : tensor<{A}x{B}xf32>, tensor<{A}xi64> -> tensor<{C}x{B}xf32>"},
    {"%doc: tensor<{A}xf32>, %doc2: tensor<{B}xf32>",
     "ref.document_mask %doc, %doc2 : tensor<{A}xf32>, tensor<{B}xf32>"},
    {"%bin: tensor<{D}x{A}x{B}xf32>",
     "ref.capacity_dispatch %bin capacity 1 groups 2 : tensor<{D}x{A}x{B}xf32>"},
    // Ops with a rule of another kind (Reshapes, Views, Slices: data moves between
    // positions) or no tensor operand: no factors, asserted below.
    {"%x: tensor<{A}x{B}xf32>", "ref.reshape %x : tensor<{A}x{B}xf32> -> tensor<{B}x{A}xf32>"},
    {"%x: tensor<{B}xf32>", "ref.broadcast %x dims [1] : tensor<{B}xf32> -> tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>", "ref.slice %x offsets [0, 0] sizes [1, 1] : tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>", "ref.concat %x, %x dim 1 : tensor<{A}x{B}xf32>, tensor<{A}x{B}xf32>"},
    {"%x: tensor<{A}x{B}xf32>, %y: tensor<{A}x{B}xf32>, %m: tensor<{A}xf32>",
     "ref.cross_entropy %x, %y, %m : tensor<{A}x{B}xf32>, tensor<{A}xf32>"},
    {"", "ref.constant 1.0 : tensor<{A}xf32>"},
    {"", "ref.literal [1.0, 2.0] : tensor<2xf32>"},
    {"%i: index, %j: index", "ref.dropout_mask %i, %j p 0.5 : tensor<{A}xf32>"},
    {"%i: index", "ref.power %i base 0.5 : tensor<f32>"},
    {"%i: index, %j: index", "ref.position_mask %i, %j causal : tensor<{A}x{B}xf32>"},
};

/// Ops that need no rule: they move data between positions (their own rules in the
/// layout engine) or have no tensor operand; and `ref.cross_entropy`, which divides by
/// its mask's sum and has no rule, so its operands must be whole.
const std::set<std::string> kWithoutFactors = {
    "ref.reshape", "ref.broadcast", "ref.slice",       "ref.concat",        "ref.cross_entropy",
    "ref.constant", "ref.literal",  "ref.dropout_mask", "ref.power", "ref.position_mask"};

std::string instantiate(std::string s, const std::map<char, int64_t> &sizes) {
  for (auto [k, v] : sizes) {
    std::string key = std::string("{") + k + "}";
    for (size_t p; (p = s.find(key)) != std::string::npos;)
      s.replace(p, key.size(), std::to_string(v));
  }
  return s;
}

/// Values for argument `name` of shape `shape`.
Tensor<double> valuesFor(const std::string &name, const Shape &shape,
                         const std::map<char, int64_t> &sizes, std::mt19937 &rng) {
  Tensor<double> t(shape, 0.0);
  for (double &v : t.data) {
    if (name.rfind("ids_", 0) == 0)
      v = (double)std::uniform_int_distribution<int64_t>(0, sizes.at(name[4]) - 1)(rng);
    else if (name == "bin")
      v = (double)std::uniform_int_distribution<int>(0, 1)(rng);
    else if (name.rfind("doc", 0) == 0)
      v = (double)std::uniform_int_distribution<int>(0, 2)(rng);
    else
      v = std::uniform_real_distribution<double>(-2, 2)(rng);
  }
  return t;
}

/// The elements at positions `at` (in that order) along every dimension of `dims` of t.
Tensor<double> gather(const Tensor<double> &t, const std::vector<size_t> &dims,
                      const std::vector<int64_t> &at) {
  Shape s = t.shape;
  for (size_t d : dims)
    s[d] = (int64_t)at.size();
  Tensor<double> out(s, 0.0);
  for (int64_t l = 0; l < (int64_t)out.data.size(); ++l) {
    std::vector<int64_t> idx = out.unravel(l);
    for (size_t d : dims)
      idx[d] = at[idx[d]];
    out.data[l] = t.at(idx);
  }
  return out;
}

std::vector<int64_t> range(int64_t lo, int64_t len) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < len; ++i)
    r.push_back(lo + i);
  return r;
}

bool close(const Tensor<double> &a, const Tensor<double> &b) {
  if (a.shape != b.shape)
    return false;
  for (size_t i = 0; i < a.data.size(); ++i)
    if (!(std::fabs(a.data[i] - b.data[i]) <= 1e-9 * (1 + std::fabs(b.data[i]))) &&
        !(std::isnan(a.data[i]) && std::isnan(b.data[i]))) // (log of a negative)
      return false;
  return true;
}

Shape shapeOf(mlir::Value v) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

/// The op `op` on positions `at` of factor f of its rule: its operands' dimensions
/// indexing f cut to them, the result's likewise; empty string and `out` set, or why not.
std::string onBlock(mlir::Operation *op, const ref::LayoutFactors &rule, int f,
                    const std::vector<Tensor<double>> &args, const std::vector<int64_t> &at,
                    Tensor<double> &out) {
  int64_t len = (int64_t)at.size();
  mlir::OpBuilder b(op);
  mlir::OperationState st(op->getLoc(), op->getName());
  std::vector<Tensor<double>> blocks;
  size_t ti = 0;
  for (mlir::Value v : op->getOperands()) {
    auto t = mlir::dyn_cast<mlir::RankedTensorType>(v.getType());
    if (!t) {
      st.addOperands(v);
      continue;
    }
    std::vector<size_t> dims;
    for (size_t d = 0; d < rule.operands[ti].size(); ++d)
      if (rule.operands[ti][d] == f)
        dims.push_back(d);
    blocks.push_back(gather(args[ti], dims, at));
    st.addOperands(mlir::tensor::EmptyOp::create(b, op->getLoc(), blocks.back().shape,
                                                  t.getElementType())
                       .getResult());
    ++ti;
  }
  Shape rs = shapeOf(op->getResult(0));
  for (size_t d = 0; d < rule.result.size(); ++d)
    if (rule.result[d] == f)
      rs[d] = len;
  st.addTypes(mlir::RankedTensorType::get(rs, b.getF32Type()));
  st.addAttributes(op->getAttrs());
  mlir::Operation *blk = b.create(st);
  std::string why;
  if (mlir::failed(mlir::verify(blk)))
    why = "the op on the block does not verify";
  if (why.empty()) {
    std::vector<const Tensor<double> *> in;
    for (const auto &t : blocks)
      in.push_back(&t);
    Numbers d;
    why = evalRefOp(d, blk, in, out);
  }
  std::vector<mlir::Operation *> dead{blk};
  for (mlir::Value v : blk->getOperands())
    if (mlir::Operation *def = v.getDefiningOp(); def && mlir::isa<mlir::tensor::EmptyOp>(def))
      dead.push_back(def);
  for (mlir::Operation *o : dead)
    o->erase();
  return why;
}

/// Whether kind `k`'s claim holds for factor f cut in two halves of `size` -- and, for
/// a pass-through factor, on a random selection of positions in a random order too
/// (the layout engine passes windows of rows chosen per rank through such factors).
bool claimHolds(mlir::Operation *op, const ref::LayoutFactors &rule, int f, FactorKind k,
                const std::vector<Tensor<double>> &args, const Tensor<double> &full,
                int64_t size, std::mt19937 &rng, std::string &why) {
  int64_t half = size / 2;
  Tensor<double> lo, hi;
  if (!(why = onBlock(op, rule, f, args, range(0, half), lo)).empty() ||
      !(why = onBlock(op, rule, f, args, range(half, half), hi)).empty())
    return false;
  std::vector<size_t> rdims;
  for (size_t d = 0; d < rule.result.size(); ++d)
    if (rule.result[d] == f)
      rdims.push_back(d);
  Tensor<double> want = full, got = lo;
  switch (k) {
  case FactorKind::PassThrough:
  case FactorKind::Counted: {
    double n = k == FactorKind::Counted ? 2.0 : 1.0;
    bool ok = true;
    for (int part = 0; part < 2 && ok; ++part) {
      Tensor<double> w = gather(full, rdims, range(part * half, half)), g = part ? hi : lo;
      for (double &v : w.data)
        v *= n;
      ok = close(g, w);
    }
    if (ok && k == FactorKind::PassThrough) {
      std::vector<int64_t> at = range(0, size);
      std::shuffle(at.begin(), at.end(), rng);
      at.resize(std::uniform_int_distribution<int64_t>(1, size)(rng));
      Tensor<double> some;
      if (!(why = onBlock(op, rule, f, args, at, some)).empty())
        return false;
      ok = close(some, gather(full, rdims, at));
    }
    why = ok ? "" : "the results on the positions are not the result's positions";
    return ok;
  }
  case FactorKind::Sum:
  case FactorKind::Mean:
  case FactorKind::Max:
    if (lo.shape != full.shape || hi.shape != full.shape)
      return why = "the blocks' results do not have the result's shape", false;
    for (size_t i = 0; i < got.data.size(); ++i)
      got.data[i] = k == FactorKind::Max ? std::max(lo.data[i], hi.data[i])
                    : k == FactorKind::Mean ? (lo.data[i] + hi.data[i]) / 2
                                            : lo.data[i] + hi.data[i];
    if (!close(got, want))
      return why = "the blocks' results do not combine to the result", false;
    return true;
  case FactorKind::Whole:
    break;
  }
  return why = "no claim", false;
}

/// Certifies `op`'s rule on `args`; returns the number of factors checked.
int certify(mlir::Operation *op, const std::vector<Tensor<double>> &args, std::mt19937 &rng) {
  auto iface = mlir::dyn_cast<ref::LayoutFactorsOp>(op);
  REQUIRE(iface);
  std::optional<ref::LayoutFactors> rule = iface.getLayoutFactors();
  std::string name = op->getName().getStringRef().str();
  if (kWithoutFactors.count(name)) {
    CHECK_FALSE(rule);
    return 0;
  }
  REQUIRE(rule);
  INFO(rule->str());
  std::vector<const Tensor<double> *> in;
  for (const auto &t : args)
    in.push_back(&t);
  Numbers d;
  Tensor<double> full;
  REQUIRE(evalRefOp(d, op, in, full) == "");
  // The rule's ranks and the factors' sizes agree with the op's types.
  REQUIRE(rule->operands.size() == args.size());
  REQUIRE(rule->result.size() == full.shape.size());
  std::vector<int64_t> size(rule->kinds.size(), -1);
  auto see = [&](int f, int64_t n) {
    REQUIRE(f < (int)size.size());
    if (f < 0)
      return;
    CHECK((size[f] < 0 || size[f] == n));
    size[f] = n;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    REQUIRE(rule->operands[i].size() == args[i].shape.size());
    for (size_t dd = 0; dd < args[i].shape.size(); ++dd)
      see(rule->operands[i][dd], args[i].shape[dd]);
  }
  for (size_t dd = 0; dd < full.shape.size(); ++dd) {
    int f = rule->result[dd];
    if (f >= 0) {
      FactorKind k = rule->kinds[f];
      CHECK((k != FactorKind::Sum && k != FactorKind::Mean && k != FactorKind::Max));
    }
    see(f, full.shape[dd]);
  }
  int checked = 0;
  for (int f = 0; f < (int)rule->kinds.size(); ++f) {
    if (size[f] < 2 || size[f] % 2)
      continue;
    FactorKind k = rule->kinds[f];
    INFO("factor f" << f << " (" << ref::factorKindName(k) << ") of size " << size[f]);
    std::string why;
    if (k != FactorKind::Whole) {
      bool holds = claimHolds(op, *rule, f, k, args, full, size[f], rng, why);
      INFO(why);
      CHECK(holds);
    } else {
      // The near miss: read whole, it must be neither passed through nor combined.
      bool inResult = std::count(rule->result.begin(), rule->result.end(), f) > 0;
      bool holds = claimHolds(op, *rule, f, inResult ? FactorKind::PassThrough : FactorKind::Sum,
                              args, full, size[f], rng, why);
      CHECK_FALSE(holds);
    }
    ++checked;
  }
  return checked;
}

/// The linearity an op declares (RefInterfaces.td), as the layout engine reads it: in
/// all tensor operands together (`Linear`), or in operand i with the others fixed
/// (`Multilinear`; `Linear` with one tensor operand; a clear bit of NonlinearOp).
bool linearIn(mlir::Operation *op, unsigned i, unsigned tensors) {
  if (op->hasTrait<ref::OpTrait::Multilinear>())
    return true;
  if (op->hasTrait<ref::OpTrait::Linear>() && tensors == 1)
    return true;
  if (auto n = mlir::dyn_cast<ref::NonlinearOp>(op))
    return !((n.getNonlinearOperands() >> i) & 1);
  return false;
}

/// Checks each linearity claim of `op` at `args`: op(.., a + b, ..) = op(.., a, ..) +
/// op(.., b, ..) and op(.., 3a, ..) = 3 op(.., a, ..) in each operand it is linear in
/// (all of them at once for `Linear`). Returns the number of claims checked.
int linearity(mlir::Operation *op, const std::vector<Tensor<double>> &args, std::mt19937 &rng) {
  std::vector<size_t> real; // tensor operands of f32 (ids are not summed)
  unsigned tensors = 0;
  for (mlir::Value v : op->getOperands())
    if (auto t = mlir::dyn_cast<mlir::RankedTensorType>(v.getType())) {
      if (t.getElementType().isF32())
        real.push_back(tensors);
      ++tensors;
    }
  std::vector<std::vector<size_t>> claims; // operand sets the op is linear in
  if (op->hasTrait<ref::OpTrait::Linear>() && real.size() == tensors && tensors > 1)
    claims.push_back(real);
  for (size_t i : real)
    if (linearIn(op, (unsigned)i, tensors))
      claims.push_back({i});
  Numbers d;
  auto eval = [&](const std::vector<Tensor<double>> &xs, Tensor<double> &out) {
    std::vector<const Tensor<double> *> in;
    for (const auto &t : xs)
      in.push_back(&t);
    return evalRefOp(d, op, in, out);
  };
  for (const std::vector<size_t> &which : claims) {
    INFO("linear in operands " << which.size() << " from #" << which[0]);
    std::vector<Tensor<double>> a = args, b = args, sum = args, triple = args;
    for (size_t i : which)
      for (size_t k = 0; k < args[i].data.size(); ++k) {
        b[i].data[k] = std::uniform_real_distribution<double>(-2, 2)(rng);
        sum[i].data[k] = a[i].data[k] + b[i].data[k];
        triple[i].data[k] = 3 * a[i].data[k];
      }
    Tensor<double> ra, rb, rs, rt;
    REQUIRE(eval(a, ra) == "");
    REQUIRE(eval(b, rb) == "");
    REQUIRE(eval(sum, rs) == "");
    REQUIRE(eval(triple, rt) == "");
    Tensor<double> want = ra;
    for (size_t k = 0; k < want.data.size(); ++k)
      want.data[k] = ra.data[k] + rb.data[k];
    CHECK(close(rs, want));
    for (size_t k = 0; k < want.data.size(); ++k)
      want.data[k] = 3 * ra.data[k];
    CHECK(close(rt, want));
  }
  return (int)claims.size();
}

/// Parses `args` and `op` into a function and returns the op (null if it does not
/// parse or verify).
mlir::Operation *build(mlir::MLIRContext &ctx, mlir::OwningOpRef<mlir::ModuleOp> &module,
                       const std::string &args, const std::string &op) {
  std::string text = "func.func @f(" + args + ") {\n  %r = " + op + "\n  return\n}\n";
  module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (!module)
    return nullptr;
  mlir::Operation *found = nullptr;
  module->walk([&](mlir::Operation *o) {
    if (o->getDialect() && o->getDialect()->getNamespace() == "ref")
      found = o;
  });
  return found;
}

} // namespace

TEST_CASE("every ref op's layout rule and linearity hold on random blocks and values",
          "[layouts][opfacts]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  ctx.getDiagEngine().registerHandler([](mlir::Diagnostic &) {}); // near misses verify
  std::mt19937 rng(20261207);
  std::set<std::string> covered;
  std::map<std::string, int> factorsChecked;
  int linearityChecked = 0;
  for (int round = 0; round < 4; ++round) {
    std::map<char, int64_t> sizes;
    for (char k : {'A', 'B', 'C', 'D'})
      sizes[k] = 2 * std::uniform_int_distribution<int64_t>(1, 3)(rng);
    std::vector<std::pair<std::string, std::string>> cases;
    for (const Case &c : kCases)
      cases.push_back({instantiate(c.args, sizes), instantiate(c.op, sizes)});
    // Elementwise ops without attributes, from their traits, with one to three operands.
    for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
      if (name.getDialectNamespace() != "ref" || !name.hasTrait<mlir::OpTrait::Elementwise>())
        continue;
      std::string t = instantiate("tensor<{A}x{B}xf32>", sizes);
      for (int arity = 1; arity <= 3; ++arity) {
        std::string args, ops, types;
        for (int i = 0; i < arity; ++i) {
          args += (i ? ", %a" : "%a") + std::to_string(i) + ": " + t;
          ops += (i ? ", %a" : "%a") + std::to_string(i);
          types += (i ? ", " : "") + t;
        }
        std::string op = "\"" + name.getStringRef().str() + "\"(" + ops + ") : (" + types +
                         ") -> " + t;
        mlir::OwningOpRef<mlir::ModuleOp> m;
        if (build(ctx, m, args, op)) {
          cases.push_back({args, op});
          break;
        }
      }
    }
    for (auto &[args, text] : cases) {
      INFO(text);
      mlir::OwningOpRef<mlir::ModuleOp> module;
      mlir::Operation *op = build(ctx, module, args, text);
      REQUIRE(op);
      std::string name = op->getName().getStringRef().str();
      covered.insert(name);
      // Each argument's name in the text, by its position among the function's.
      std::vector<std::string> names;
      for (size_t p = 0; (p = args.find('%', p)) != std::string::npos; ++p)
        names.push_back(args.substr(p + 1, args.find(':', p) - p - 1));
      std::vector<Tensor<double>> values;
      for (mlir::Value v : op->getOperands()) {
        auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
        REQUIRE(arg);
        REQUIRE(arg.getArgNumber() < names.size());
        if (mlir::isa<mlir::RankedTensorType>(v.getType()))
          values.push_back(valuesFor(names[arg.getArgNumber()], shapeOf(v), sizes, rng));
      }
      factorsChecked[name] += certify(op, values, rng);
      linearityChecked += linearity(op, values, rng);
    }
  }
  CHECK(linearityChecked > 50);
  // Every ref op has a case, and every op with a rule had each factor checked.
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    std::string n = name.getStringRef().str();
    if (name.getDialectNamespace() != "ref" || n == "ref.grad" ||
        !name.hasInterface<ref::LayoutFactorsOp>())
      continue;
    INFO(n << ": add a certification case to LayoutFactorsTest.cpp");
    CHECK(covered.count(n));
    if (!kWithoutFactors.count(n))
      CHECK(factorsChecked[n] > 0);
  }
}
