//===- XlaData.cpp - HLO instructions on integer data, loops and predicates ===//
//
// The part of the Translator (XlaTranslator.h) that handles what is not float tensor
// arithmetic: while loops (unrolled), dynamic updates, predicates held as 0/1 tensors
// and selects on them, and integer (index) arithmetic evaluated per partition. Token
// ids are in XlaIds.cpp; the float ops, dots and collectives in XlaTranslator.cpp.
// Table of covered ops: docs/xla.md.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaTranslator.h"

#include "Support/Limits.h"
#include "Support/Rational.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace planproof::xla {

int64_t inlinedSize(const hlo::Module &m, const hlo::Computation &c,
                    std::map<const hlo::Computation *, int64_t> &memo) {
  if (auto it = memo.find(&c); it != memo.end())
    return it->second;
  memo[&c] = kMaxTranslated + 1; // a cycle (no HLO has one) counts as too large
  int64_t n = 0;
  auto add = [&](int64_t k) { n = std::min<int64_t>(n + k, kMaxTranslated + 1); };
  for (const hlo::Instruction &inst : c.insts) {
    add(1);
    // Every attribute naming computations: to_apply, calls, body, condition,
    // branch_computations, called_computations.
    for (const char *key : {"to_apply", "calls", "body", "condition", "branch_computations",
                            "called_computations"}) {
      auto it = inst.attrs.find(key);
      if (it == inst.attrs.end())
        continue;
      std::string list = it->second;
      if (!list.empty() && list.front() == '{' && list.back() == '}')
        list = list.substr(1, list.size() - 2);
      for (std::string name : hlo::splitTopLevel(list)) {
        if (!name.empty() && name[0] == '%')
          name.erase(0, 1);
        if (const hlo::Computation *callee = m.find(name))
          add(inlinedSize(m, *callee, memo));
      }
    }
  }
  memo[&c] = n;
  return n;
}

namespace {
/// Whether the integer parts of two loop states are the same (tensors are not compared:
/// a loop's condition is an integer computation, so it reads only these). Nothing is
/// concluded where a part is of a kind whose change cannot be seen here.
bool sameIntegers(const Val &a, const Val &b) {
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Val::Tensor:
    return true;
  case Val::Index:
    return a.dims == b.dims && a.idx == b.idx;
  case Val::Tuple:
    if (a.elements.size() != b.elements.size())
      return false;
    for (size_t i = 0; i < a.elements.size(); ++i)
      if (!sameIntegers(a.elements[i], b.elements[i]))
        return false;
    return true;
  default:
    return false;
  }
}
} // namespace

/// while: unrolled. The condition must evaluate to the same constant on every rank
/// (a trip count: scan over layers, over microbatches); each iteration runs the body
/// on the loop state. At most 4096 iterations in all, else unsupported.
Val Translator::whileLoop(const std::vector<const Val *> &in, int depth) {
  const Val &init = need(in, 1);
  auto named = [&](const char *key) {
    std::string n = attr(key);
    if (!n.empty() && n[0] == '%')
      n.erase(0, 1);
    const hlo::Computation *c = m.find(n);
    if (!c)
      malformed(std::string("while: unknown ") + key + " computation '" + n + "'");
    return c;
  };
  const hlo::Computation *cond = named("condition"), *body = named("body");
  const hlo::Instruction *self = cur;
  // A counted loop whose count is known before unrolling it: refused at once when past
  // the limit, instead of after unrolling 4096 iterations (each may emit many ops).
  if (std::optional<int64_t> trip = countedTripCount(*cond, *body, init);
      trip && *trip > 4096 - iterations)
    unsupported("while loops of more than 4096 iterations in all (unrolled)");
  Val state = init;
  for (;;) {
    Val c = run(*cond, {state}, depth + 1);
    cur = self;
    if (track)
      *track = self;
    if (c.kind != Val::Index || product(c.dims) != 1)
      unsupported("a while loop whose condition is not an integer computation");
    for (auto &row : c.idx)
      if (row[0] != c.idx[0][0])
        unsupported("a while loop whose trip count differs between ranks");
    if (!c.idx[0][0])
      return state;
    if (++iterations > 4096)
      unsupported("while loops of more than 4096 iterations in all (unrolled)");
    Val next = run(*body, {state}, depth + 1);
    cur = self;
    if (track)
      *track = self;
    // The condition reads the state's integers only: unchanged by an iteration, it
    // would hold forever (a counter that never advances), so the loop never ends.
    if (sameIntegers(state, next))
      malformed("a while loop whose counter does not advance: its condition holds after "
                "an iteration that leaves every integer of its state unchanged, so it never "
                "ends");
    state = std::move(next);
  }
}

/// The trip count of a while loop in XLA's counted form, when it can be read without
/// running the body: the condition is `counter < N` (a tuple element of the state
/// against a constant), the body's root tuple sets that element to `counter + 1`, and
/// the initial counter is the same known integer on every rank. Only used to refuse a
/// loop early; the loop itself is still unrolled and checked iteration by iteration.
std::optional<int64_t> Translator::countedTripCount(const hlo::Computation &cond,
                                                    const hlo::Computation &body,
                                                    const Val &init) {
  auto constant = [](const hlo::Computation &c, const std::string &name) -> std::optional<int64_t> {
    const hlo::Instruction *i = c.find(name);
    std::vector<int64_t> v;
    if (!i || i->opcode != "constant" || !i->shape.dims.empty() ||
        !hlo::parseIntList(i->rawOperands, v) || v.size() != 1)
      return std::nullopt;
    return v[0];
  };
  auto element = [](const hlo::Computation &c, const std::string &name) -> std::optional<int64_t> {
    const hlo::Instruction *i = c.find(name);
    if (!i || i->opcode != "get-tuple-element" || i->operands.size() != 1 || !i->attrs.count("index"))
      return std::nullopt;
    const hlo::Instruction *p = c.find(i->operands[0]);
    std::vector<int64_t> k;
    if (!p || p->opcode != "parameter" || !hlo::parseIntList(i->attrs.at("index"), k) || k.size() != 1)
      return std::nullopt;
    return k[0];
  };
  const hlo::Instruction *test = cond.root(), *next = body.root();
  if (!test || test->opcode != "compare" || test->operands.size() != 2 ||
      !test->attrs.count("direction") || test->attrs.at("direction") != "LT")
    return std::nullopt;
  std::optional<int64_t> k = element(cond, test->operands[0]), n = constant(cond, test->operands[1]);
  if (!k || !n || !next || next->opcode != "tuple" || *k < 0 ||
      (size_t)*k >= next->operands.size() || init.kind != Val::Tuple ||
      (size_t)*k >= init.elements.size())
    return std::nullopt;
  const hlo::Instruction *step = body.find(next->operands[*k]);
  if (!step || step->opcode != "add" || step->operands.size() != 2)
    return std::nullopt;
  bool counts = (element(body, step->operands[0]) == k && constant(body, step->operands[1]) == 1) ||
                (element(body, step->operands[1]) == k && constant(body, step->operands[0]) == 1);
  const Val &start = init.elements[*k];
  if (!counts || start.kind != Val::Index || start.idx.empty() || start.idx[0].size() != 1)
    return std::nullopt;
  for (auto &row : start.idx)
    if (row.size() != 1 || row[0] != start.idx[0][0])
      return std::nullopt;
  int64_t from = start.idx[0][0];
  return *n > from ? *n - from : 0;
}

/// base with `update` written at `offsets` (from dim `from` on), by slices and concats.
std::string Translator::replaceBlock(const std::string &base, const std::vector<int64_t> &baseDims,
                                     const std::string &update, const std::vector<int64_t> &updDims,
                                     const std::vector<int64_t> &offsets, size_t from) {
  size_t d = from;
  while (d < baseDims.size() && updDims[d] == baseDims[d])
    ++d;
  if (d == baseDims.size())
    return update;
  int64_t o = offsets[d], u = updDims[d];
  auto slice = [&](int64_t lo, int64_t size) {
    std::vector<int64_t> off(baseDims.size(), 0), sz = baseDims;
    off[d] = lo;
    sz[d] = size;
    return emit("slice", {base}, {{"offsets", off}, {"sizes", sz}}, nullptr, cur->name + "_keep");
  };
  std::vector<int64_t> midDims = baseDims;
  midDims[d] = u;
  std::string mid = replaceBlock(slice(o, u), midDims, update, updDims, offsets, d + 1);
  std::vector<std::string> parts;
  if (o > 0)
    parts.push_back(slice(0, o));
  parts.push_back(mid);
  if (o + u < baseDims[d])
    parts.push_back(slice(o + u, baseDims[d] - o - u));
  if (parts.size() == 1)
    return mid;
  return emit("concat", parts, {{"dim", (int64_t)d}}, nullptr, cur->name);
}

/// dynamic-update-slice with offsets the same on every rank (a loop counter's): the
/// base with the update's block replaced. XLA clamps each offset into
/// [0, dim - update dim].
Val Translator::dynamicUpdateSlice(const std::vector<const Val *> &in) {
  if (in.size() < 2)
    malformed("dynamic-update-slice needs operands");
  const Val &base = *in[0], &upd = *in[1];
  checkTensor(base);
  checkTensor(upd);
  if (in.size() != base.dims.size() + 2 || upd.dims.size() != base.dims.size())
    unsupported("dynamic-update-slice with offsets in one tensor operand");
  std::vector<int64_t> offsets;
  for (size_t d = 0; d < base.dims.size(); ++d) {
    const Val &o = *in[d + 2];
    if (o.kind != Val::Index || !o.dims.empty())
      unsupported("a dynamic-update-slice offset that depends on the data");
    if (upd.dims[d] > base.dims[d])
      malformed("dynamic-update-slice update larger than its base");
    for (auto &row : o.idx)
      if (row[0] != o.idx[0][0])
        unsupported("a dynamic-update-slice whose offsets differ between ranks");
    offsets.push_back(std::clamp<int64_t>(o.idx[0][0], 0, base.dims[d] - upd.dims[d]));
  }
  return tensor(replaceBlock(base.name, base.dims, upd.name, upd.dims, offsets, 0), base.type,
                base.dims);
}

std::string Translator::oneMinus(const std::string &p, const std::vector<int64_t> &dims) {
  std::string one = emit("constant", {}, {{"value", 1}}, &dims, cur->name + "_one");
  return emit("sub", {one, p}, nullptr, nullptr, cur->name + "_not");
}

/// a + b, a - b, a * b of two constants (scalars or splats) whose result is an integer:
/// that constant, still known as one (jnp.var's `n - ddof`, compared with 0 next); none
/// otherwise (the op is emitted).
std::optional<Val> Translator::foldedConstant(const std::string &op, const Val &a, const Val &b,
                                              const std::vector<int64_t> &dims) {
  if (a.scalarConst.empty() || b.scalarConst.empty() ||
      (op != "add" && op != "subtract" && op != "multiply"))
    return std::nullopt;
  Rational x, y;
  std::string why;
  if (!Rational::fromDecimal(trim(a.scalarConst), x, why) ||
      !Rational::fromDecimal(trim(b.scalarConst), y, why))
    return std::nullopt;
  int64_t z;
  try {
    Rational r = op == "add" ? x + y : op == "subtract" ? x - y : x * y;
    if (!r.asInt64(z) || z > (int64_t(1) << 53) || z < -(int64_t(1) << 53))
      return std::nullopt;
  } catch (const std::exception &) {  // beyond the rationals' limits: not folded
    return std::nullopt;
  }
  Val v = tensor(emit("constant", {}, {{"value", z}}, &dims, cur->name), cur->shape.type, dims);
  v.scalarConst = std::to_string(z);
  return v;
}

/// An integer the import evaluated (a constant, index arithmetic on it), converted to
/// float: the same numbers as a constant, when they are the same on every rank.
Val Translator::indexToFloat(const Val &x, const std::string &base) {
  for (const auto &row : x.idx)
    if (row != x.idx[0])
      unsupported("a conversion to float of an integer that differs between partitions");
  std::vector<int64_t> dims = dimsOf();
  const std::string &type = cur->shape.type;
  if (product(x.dims) != product(dims))
    malformed("'convert' changes the element count");
  if (isSplat(x)) {
    int64_t z = x.idx.empty() ? 0 : x.idx[0][0];
    Val v = tensor(emit("constant", {}, {{"value", z}}, &dims, base), type, dims);
    if (dims.empty())
      v.scalarConst = std::to_string(z);
    return v;
  }
  if (product(dims) > 1 << 20)
    unsupported("a conversion to float of more than 2^20 integers");
  json values = json::array();
  for (int64_t z : x.idx[0])
    values.push_back(z);
  return tensor(emit("literal", {}, {{"values", values}}, &dims, base), type, dims);
}

/// pad(x, c): x with c on each side of each dim (negative edges cut it: a slice first),
/// a concatenation with constants; interior padding is not covered.
Val Translator::pad(const std::vector<const Val *> &in) {
  if (in.size() != 2)
    malformed("pad takes 2 operands");
  const Val &x = *in[0], &c = *in[1];
  checkTensor(x);
  if (c.kind != Val::Tensor || !c.dims.empty() || c.scalarConst.empty())
    unsupported("a pad whose padding value is not a scalar constant");
  if (c.name.empty())
    unsupported("a pad with the non-finite value " + c.scalarConst);
  // padding=LO_HI[_INTERIOR]xLO_HI... , one per dim
  auto split = [](const std::string &t, char sep) {
    std::vector<std::string> parts(1);
    for (char ch : t)
      if (ch == sep)
        parts.emplace_back();
      else
        parts.back().push_back(ch);
    return parts;
  };
  std::string padding = trim(attr("padding"));
  std::vector<std::array<int64_t, 3>> edges;
  for (const std::string &d : padding.empty() ? std::vector<std::string>{} : split(padding, 'x')) {
    std::vector<int64_t> e;
    for (const std::string &part : split(d, '_'))
      e.push_back(intLiteral(part));
    if (e.size() != 2 && e.size() != 3)
      malformed("padding '" + padding.substr(0, 80) + "'");
    edges.push_back({e[0], e[1], e.size() == 3 ? e[2] : 0});
  }
  if (edges.size() != x.dims.size())
    malformed("padding for " + std::to_string(edges.size()) + " dims of a rank-" +
              std::to_string(x.dims.size()) + " value");
  std::vector<int64_t> offsets(x.dims.size(), 0), sizes = x.dims;
  bool cut = false;
  for (size_t d = 0; d < edges.size(); ++d) {
    auto [lo, hi, interior] = edges[d];
    if (interior != 0)
      unsupported("a pad with interior padding");
    int64_t s = x.dims[d];
    if ((lo < 0 && (__builtin_add_overflow(s, lo, &s) || s < 0)) ||
        (hi < 0 && (__builtin_add_overflow(s, hi, &s) || s < 0)))
      malformed("a pad that cuts more than the value holds");
    cut |= lo < 0 || hi < 0;
    offsets[d] = lo < 0 ? -lo : 0;
    sizes[d] = s;
  }
  std::string name = x.name, base = cur->name;
  if (cut)
    name = emit("slice", {name}, {{"offsets", offsets}, {"sizes", sizes}}, nullptr, base + "_cut");
  std::vector<int64_t> shape = sizes;
  for (size_t d = 0; d < edges.size(); ++d) {
    int64_t lo = std::max<int64_t>(edges[d][0], 0), hi = std::max<int64_t>(edges[d][1], 0);
    if (!lo && !hi)
      continue;
    std::vector<std::string> parts;
    auto fill = [&](int64_t n, const char *side) {
      std::vector<int64_t> fd = shape;
      fd[d] = n;
      parts.push_back(emit("constant", {}, {{"value", floatLiteral(c.scalarConst)}}, &fd,
                           base + side));
    };
    if (lo)
      fill(lo, "_lo");
    parts.push_back(name);
    if (hi)
      fill(hi, "_hi");
    if (!checkedAdd(shape[d], lo, shape[d]) || !checkedAdd(shape[d], hi, shape[d]))
      malformed("a pad past the largest size");
    name = emit("concat", parts, {{"dim", (int64_t)d}}, nullptr, base);
  }
  if (shape != dimsOf())
    malformed("pad's result shape disagrees with its padding");
  return tensor(name, cur->shape.type, shape);
}

/// `a DIR b` for two float constants' literals (inf and nan included): 0 or 1.
int64_t Translator::compareConstants(const std::string &a, const std::string &b,
                                     const std::string &dir) {
  Rational x, y;
  std::string why;
  int order;  // -1, 0, 1; 2 unordered (a nan)
  if (Rational::fromDecimal(trim(a), x, why) && Rational::fromDecimal(trim(b), y, why)) {
    order = x < y ? -1 : x == y ? 0 : 1;
  } else {
    double p = std::strtod(trim(a).c_str(), nullptr), q = std::strtod(trim(b).c_str(), nullptr);
    order = std::isnan(p) || std::isnan(q) ? 2 : p < q ? -1 : p == q ? 0 : 1;
  }
  if (dir == "EQ") return order == 0;
  if (dir == "NE") return order != 0;
  if (dir == "LT") return order == -1;
  if (dir == "LE") return order == -1 || order == 0;
  if (dir == "GT") return order == 1;
  if (dir == "GE") return order == 1 || order == 0;
  malformed("comparison direction '" + dir + "'");
}

/// Predicates on float data, as 0/1 float tensors: a comparison is a step of the
/// difference (x > y is step(x - y), x >= y is 1 - step(y - x)); and, or, not are
/// products and sums; shape ops apply to the 0/1 tensor. Equality of floats is not
/// covered (no step expresses it).
Val Translator::predOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = dimsOf();
  auto pred = [&](const std::string &name) {
    Val v = tensor(name, "pred", dims);
    v.kind = Val::Pred;
    return v;
  };
  auto floatOf = [&](const Val &v) -> const std::string & {
    if (v.kind != Val::Pred && v.kind != Val::Tensor)
      unsupported("'" + op + "' mixing a predicate on data with integer values");
    if (v.name.empty())
      unsupported("'" + op + "' on the non-finite constant " + v.scalarConst);
    return v.name;
  };
  if (op == "compare") {
    if (in.size() != 2 || in[0]->kind != Val::Tensor || in[1]->kind != Val::Tensor)
      unsupported("a comparison mixing float and integer values");
    std::string dir = attr("direction");
    if (!in[0]->scalarConst.empty() && !in[1]->scalarConst.empty()) {
      // Two constants (jnp.var's `n - ddof > 0`): decided here, the same on every rank.
      Val v;
      v.kind = Val::Index;
      v.type = "pred";
      v.dims = dims;
      v.idx.assign(ranks, {compareConstants(in[0]->scalarConst, in[1]->scalarConst, dir)});
      return v;
    }
    const std::string &a = floatOf(*in[0]), &b = floatOf(*in[1]);
    auto stepOf = [&](const std::string &x, const std::string &y) {
      std::string d = emit("sub", {x, y}, nullptr, nullptr, cur->name + "_diff");
      return emit("step", {d}, nullptr, nullptr, cur->name);
    };
    if (dir == "GT")
      return pred(stepOf(a, b));
    if (dir == "LT")
      return pred(stepOf(b, a));
    if (dir == "GE")
      return pred(oneMinus(stepOf(b, a), dims));
    if (dir == "LE")
      return pred(oneMinus(stepOf(a, b), dims));
    unsupported("a comparison of float data by '" + dir + "' (only <, <=, >, >= are covered)");
  }
  // (A predicate on which labels are kept stays one through negation and views.)
  auto keptAlike = [&](Val v, bool negated) {
    v.keptOf = in[0]->keptOf;
    v.keptNeg = in[0]->keptNeg != negated;
    return v;
  };
  if (op == "not")
    return keptAlike(pred(oneMinus(floatOf(need(in, 1)), dims)), true);
  if ((op == "and" || op == "or") && in.size() == 2) {
    std::string pq = emit("mul", {floatOf(*in[0]), floatOf(*in[1])}, nullptr, nullptr,
                          cur->name + (op == "and" ? "" : "_both"));
    if (op == "and")
      return pred(pq);
    std::string s = emit("add", {floatOf(*in[0]), floatOf(*in[1])}, nullptr, nullptr, cur->name + "_sum");
    return pred(emit("sub", {s, pq}, nullptr, nullptr, cur->name));
  }
  if (op == "copy" || op == "convert" || op == "bitcast" || op == "reshape")
    return keptAlike(pred(product(need(in, 1).dims) == product(dims) && need(in, 1).dims == dims
                              ? floatOf(*in[0])
                              : emit("reshape", {floatOf(*in[0])}, nullptr, &dims, cur->name)),
                     false);
  if (op == "broadcast") {
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    const Val &x = need(in, 1);
    if (x.dims == dims)
      return pred(floatOf(x));
    return pred(emit("broadcast", {floatOf(x)}, {{"dims", bd}}, &dims, cur->name));
  }
  if (op == "transpose") {
    std::vector<int64_t> perm = ints(attr("dimensions"), "transpose dimensions");
    return pred(emit("transpose", {floatOf(need(in, 1))}, {{"perm", perm}}, nullptr, cur->name));
  }
  unsupported("'" + op + "' on a predicate computed from the data");
}

/// select(p, a, b) with a predicate known element by element (a mask from iota and
/// constants, the same on every rank) is p*a + (1-p)*b with p a 0/1 literal: exactly
/// the selection for finite values, which is every value planproof reasons about.
Val Translator::select(const std::vector<const Val *> &in) {
  if (in.size() != 3)
    malformed("select takes 3 operands");
  const Val &p = *in[0];
  if (in[1]->kind == Val::Tensor && in[2]->kind == Val::Tensor && !in[1]->name.empty() &&
      in[1]->name == in[2]->name && in[1]->runs == in[2]->runs)
    return *in[1];  // the same value either way, whatever the predicate
  if (p.kind == Val::IdsMask)
    return maskedSelect(in);
  if (p.kind == Val::PosPred)
    return positionSelect(in);
  if (p.kind == Val::Pred) {  // p*a + (1-p)*b, with p a 0/1 tensor (exact for finite values)
    checkTensor(*in[1]);
    checkTensor(*in[2]);
    std::vector<int64_t> dims = dimsOf();
    std::string on = emit("mul", {p.name, in[1]->name}, nullptr, nullptr, cur->name + "_on");
    if (!in[2]->scalarConst.empty() && floatLiteral(in[2]->scalarConst) == 0.0)
      return tensor(on, cur->shape.type, dims);
    std::string off = emit("mul", {oneMinus(p.name, dims), in[2]->name}, nullptr, nullptr,
                           cur->name + "_off");
    return tensor(emit("add", {on, off}, nullptr, nullptr, cur->name), cur->shape.type, dims);
  }
  if (p.kind != Val::Index)
    unsupported("a select on a predicate computed from the data");
  std::vector<int64_t> dims = dimsOf();
  int64_t n = product(dims);
  for (auto &row : p.idx)
    if (row != p.idx[0]) {
      // A causal mask of a rank's query rows (sequence parallelism at a size written
      // out): the position predicate it is, element for element.
      if (std::optional<Val> pos = maskAsPositions(p, dims)) {
        std::vector<const Val *> args = {&*pos, in[1], in[2]};
        return positionSelect(args);
      }
      unsupported("a select whose mask differs between ranks");
    }
  auto bit = [&](int64_t e) { return idxAt(p, 0, p.dims.empty() ? 0 : e) != 0; };
  bool all = true, none = true;
  for (int64_t e = 0; e < (isSplat(p) ? std::min<int64_t>(n, 1) : n); ++e)
    (bit(e) ? none : all) = false;
  if (!all && !none && n > 1 << 20)
    unsupported("a select on a mask of more than 2^20 elements that is not one value");
  // (a fill value that is never selected, NaN for out-of-range indices, is never read;
  // the side selected keeps its marks: a shard's lookup is still to be masked)
  if (all || none) {
    const Val &pick = *in[all ? 1 : 2];
    if (pick.kind != Val::Tensor || pick.name.empty())
      checkTensor(pick);
    return pick;
  }
  // A causal (windowed) mask written out, the same on every rank (XLA folds jnp.tril
  // of a static size into a constant): the position predicate it is, checked at every
  // element, as where it differs between ranks -- so that a reference's folded mask and
  // a plan's per-rank masks of a split sequence are one op.
  if (std::optional<Val> pos = maskAsPositions(p, dims)) {
    std::vector<const Val *> args = {&*pos, in[1], in[2]};
    return positionSelect(args);
  }
  checkTensor(*in[1]);
  checkTensor(*in[2]);
  json mask = json::array(), inverse = json::array();
  for (int64_t e = 0; e < n; ++e) {
    mask.push_back(bit(e) ? 1 : 0);
    inverse.push_back(bit(e) ? 0 : 1);
  }
  std::string m = emit("literal", {}, {{"values", mask}}, &dims, cur->name + "_mask");
  std::string im = emit("literal", {}, {{"values", inverse}}, &dims, cur->name + "_unmask");
  std::string a = emit("mul", {m, in[1]->name}, nullptr, nullptr, cur->name + "_on");
  std::string b = emit("mul", {im, in[2]->name}, nullptr, nullptr, cur->name + "_off");
  return tensor(emit("add", {a, b}, nullptr, nullptr, cur->name), cur->shape.type, dims);
}

/// Whether integer `z` is a value of HLO type `t` (pred, sN, uN).
bool fitsType(const std::string &t, int64_t z) {
  if (t == "pred")
    return z == 0 || z == 1;
  int bits = std::atoi(t.c_str() + 1);
  if (bits <= 0 || bits > 64)
    return false;
  if (t[0] == 'u')
    return z >= 0 && (bits >= 63 || z < (int64_t(1) << bits));
  if (bits == 64)
    return true;
  return z >= -(int64_t(1) << (bits - 1)) && z < (int64_t(1) << (bits - 1));
}

/// Rows of `n` elements for every rank of `v`: a value enumerated element by element,
/// within the limits (a value that is one number on each rank is a splat instead).
void Translator::fullRows(Val &v, int64_t n) {
  if (n > 1 << 16 || n * ranks > 1 << 25)
    unsupported("an integer tensor of more than 2^16 elements (or 2^25 over the partitions) "
                "that is not one value on each partition");
  v.idx.assign(ranks, std::vector<int64_t>(n, 0));
}

/// Integer values that no operand gives: partition and replica ids, constants, iotas.
Val Translator::indexSource(const hlo::Instruction &inst, Val v) {
  const std::string &op = inst.opcode;
  const std::vector<int64_t> &dims = v.dims;
  int64_t n = product(dims);
  v.idx.assign(ranks, std::vector<int64_t>(1, 0));
  if (op == "partition-id") {
    if (!plan)
      unsupported("partition-id in the module before partitioning");
    for (int64_t r = 0; r < ranks; ++r)
      v.idx[r][0] = r;
    return v;
  }
  if (op == "replica-id")
    return v;
  if (op == "constant") {
    std::vector<std::string> els = literalElements(inst.rawOperands);
    if ((int64_t)els.size() != n)
      malformed("a constant with the wrong number of values");
    std::vector<int64_t> row;
    for (auto &e : els)
      row.push_back(intLiteral(e));
    if (!row.empty() && std::all_of(row.begin(), row.end(), [&](int64_t z) { return z == row[0]; }))
      row.resize(1);  // one value: a splat
    else if (n != 1)
      fullRows(v, n);
    v.idx.assign(ranks, row);
    return v;
  }
  // iota
  int64_t id = ints(attr("iota_dimension"), "iota_dimension").at(0);
  if (id < 0 || id >= (int64_t)dims.size())
    malformed("iota_dimension out of range");
  if (dims[id] == 1)
    return v;  // zeros
  fullRows(v, n);
  int64_t inner = 1;
  for (size_t k = id + 1; k < dims.size(); ++k)
    inner *= dims[k];
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t e = 0; e < n; ++e)
      v.idx[r][e] = (e / inner) % dims[id];
  return v;
}

/// An integer broadcast of `x` into `v` (of the result's shape).
Val Translator::indexBroadcast(const Val &x, Val v) {
  const std::vector<int64_t> &dims = v.dims;
  int64_t n = product(dims);
  std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
  if (bd.size() != x.dims.size())
    malformed("broadcast dimensions do not match the operand's rank");
  for (size_t k = 0; k < bd.size(); ++k)
    if (bd[k] < 0 || bd[k] >= (int64_t)dims.size() || dims[bd[k]] != x.dims[k])
      malformed("broadcast dimension " + std::to_string(k) + " out of range");
  if (isSplat(x)) {  // copies of one value: one value
    v.idx = x.idx;
    return v;
  }
  fullRows(v, n);
  // result element -> operand element: the operand's dims read at dims[bd[k]]
  std::vector<int64_t> stride(dims.size(), 1);
  for (int k = (int)dims.size() - 2; k >= 0; --k)
    stride[k] = stride[k + 1] * dims[k + 1];
  for (int64_t e = 0; e < n; ++e) {
    int64_t src = 0;
    for (size_t k = 0; k < bd.size(); ++k)
      src = src * x.dims[k] + (e / stride[bd[k]]) % dims[bd[k]];
    for (int64_t r = 0; r < ranks; ++r)
      v.idx[r][e] = x.idx[r][src];
  }
  return v;
}

/// Integer binary op `op` (arithmetic, min/max, compare, and/or) on `a` and `b`, into
/// `v`, evaluated exactly: a result outside the range of v's type is unsupported.
Val Translator::indexBinary(const std::string &op, const Val &a, const Val &b, Val v) {
  int64_t n = product(v.dims);
  if (product(a.dims) != n || product(b.dims) != n)
    malformed("'" + op + "' operand shapes disagree");
  std::string dir;
  if (op == "compare")
    dir = attr("direction");
  if (isSplat(a) && isSplat(b)) {  // one value on each rank: computed once per rank
    v.idx.assign(ranks, std::vector<int64_t>(1, 0));
    n = 1;
  } else {
    fullRows(v, n);
  }
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t e = 0; e < n; ++e) {
      int64_t x = idxAt(a, r, e), y = idxAt(b, r, e), z = 0;
      bool ok = true;
      if (op == "add") ok = checkedAdd(x, y, z);
      else if (op == "subtract") ok = !__builtin_sub_overflow(x, y, &z);
      else if (op == "multiply") ok = checkedMul(x, y, z);
      else if (op == "divide" || op == "remainder") {
        if (y == 0)
          unsupported("an integer division by zero");
        if (y == -1 && x == std::numeric_limits<int64_t>::min())
          unsupported("integer arithmetic that leaves the range of " + v.type +
                      " (XLA wraps around; the import evaluates exactly)");
        z = op == "divide" ? x / y : x % y;
      } else if (op == "minimum") z = std::min(x, y);
      else if (op == "maximum") z = std::max(x, y);
      else if (op == "and") z = x & y;
      else if (op == "or") z = x | y;
      else if (dir == "EQ") z = x == y;
      else if (dir == "NE") z = x != y;
      else if (dir == "LT") z = x < y;
      else if (dir == "LE") z = x <= y;
      else if (dir == "GT") z = x > y;
      else if (dir == "GE") z = x >= y;
      else malformed("unknown compare direction '" + dir + "'");
      if (!ok || !fitsType(v.type, z))
        unsupported("integer arithmetic that leaves the range of " + v.type +
                    " (XLA wraps around; the import evaluates exactly)");
      v.idx[r][e] = z;
    }
  return v;
}

/// An integer reduce of `x` from `init` (operands `in`) by and, or, add, max or min.
Val Translator::indexReduce(const std::vector<const Val *> &in, const Val &x, const Val &init,
                            Val v) {
  int64_t n = product(v.dims);
  if (in.size() != 2)
    unsupported("an integer reduce other than one operand with a computation");
  std::string why, how = hlo::reducerOpcode(m, attr("to_apply"), why);
  if (how.empty())
    unsupported(why);
  if (how != "and" && how != "or" && how != "add" && how != "maximum" && how != "minimum")
    unsupported("an integer reduce by '" + how + "'");
  std::vector<int64_t> rd = ints(attr("dimensions"), "reduce dimensions");
  // The result's shape must be the operand's without the reduced dims, and the initial
  // value one scalar: the loops below index the result by the operand's kept dims.
  std::vector<int64_t> kept;
  for (size_t d = 0; d < x.dims.size(); ++d)
    if (std::find(rd.begin(), rd.end(), (int64_t)d) == rd.end())
      kept.push_back(x.dims[d]);
  for (size_t i = 0; i < rd.size(); ++i)
    if (rd[i] < 0 || rd[i] >= (int64_t)x.dims.size() ||
        std::find(rd.begin(), rd.begin() + i, rd[i]) != rd.begin() + i)
      malformed("reduce dimension " + std::to_string(rd[i]) + " is out of range or repeated");
  if (kept != v.dims)
    malformed("the reduce's result shape is not its operand's without the reduced dims");
  if (product(init.dims) != 1)
    malformed("the reduce's initial value is not a scalar");
  int64_t xn = product(x.dims);
  auto fold = [&](int64_t acc, int64_t y) {
    int64_t z = 0;
    if (how == "add" && !checkedAdd(acc, y, z))
      unsupported("integer arithmetic that leaves the range of " + v.type +
                  " (XLA wraps around; the import evaluates exactly)");
    return how == "and" ? int64_t(acc && y) : how == "or" ? int64_t(acc || y) : how == "add" ? z
           : how == "maximum" ? std::max(acc, y) : std::min(acc, y);
  };
  if (isSplat(x)) {
    // One value y on each rank, `count` times into each result element: and, or, max
    // and min of copies are one copy; a sum is count times it.
    int64_t count = n ? xn / n : 0;
    v.idx.assign(ranks, std::vector<int64_t>(1, 0));
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t y = x.idx[r][0], acc = init.idx[r][0];
      if (count > 0 && how == "add" && !checkedMul(y, count, y))
        unsupported("integer arithmetic that leaves the range of " + v.type +
                    " (XLA wraps around; the import evaluates exactly)");
      v.idx[r][0] = count > 0 ? fold(acc, y) : acc;
      if (!fitsType(v.type, v.idx[r][0]))
        unsupported("integer arithmetic that leaves the range of " + v.type +
                    " (XLA wraps around; the import evaluates exactly)");
    }
    return v;
  }
  fullRows(v, n);
  std::vector<int64_t> stride(x.dims.size(), 1);
  for (int k = (int)x.dims.size() - 2; k >= 0; --k)
    stride[k] = stride[k + 1] * x.dims[k + 1];
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<bool> seen(n, false);
    for (int64_t e = 0; e < xn; ++e) {
      int64_t o = 0;
      for (size_t d = 0; d < x.dims.size(); ++d)
        if (std::find(rd.begin(), rd.end(), (int64_t)d) == rd.end())
          o = o * x.dims[d] + (e / stride[d]) % x.dims[d];
      v.idx[r][o] = fold(seen[o] ? v.idx[r][o] : init.idx[r][0], x.idx[r][e]);
      seen[o] = true;
    }
    for (int64_t o = 0; o < n; ++o)
      if (!seen[o])
        v.idx[r][o] = init.idx[r][0];
  }
  return v;
}

Val Translator::indexOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = inst.shape.dims;
  int64_t n = product(dims);
  Val v;
  v.kind = Val::Index;
  v.type = inst.shape.type;
  v.dims = dims;
  auto operand = [&](size_t i) -> const Val & {
    if (i >= in.size())
      malformed("'" + op + "' has too few operands");
    if (in[i]->kind != Val::Index)
      unsupported("'" + op + "' mixing integer and float values");
    return *in[i];
  };
  if (op == "partition-id" || op == "replica-id" || op == "constant" || op == "iota")
    return indexSource(inst, std::move(v));
  if (op == "convert" || op == "copy" || op == "reshape" || op == "bitcast") {
    const Val &x = operand(0);
    if (product(x.dims) != n)
      malformed("'" + op + "' changes the element count");
    v.idx = x.idx;  // (a splat stays one)
    for (auto &row : v.idx)
      for (int64_t &z : row) {
        if (op == "convert" && v.type == "pred")
          z = z != 0;
        else if (!fitsType(v.type, z))
          unsupported("an integer " + op + " to " + v.type + " of a value outside its range");
      }
    return v;
  }
  if (op == "broadcast") {
    const Val &x = operand(0);
    return indexBroadcast(x, std::move(v));
  }
  if (op == "dynamic-slice") {
    const Val &t = operand(0);
    if (t.dims.size() != 1 || in.size() != 2 || n != 1)
      unsupported("an integer dynamic-slice other than one entry of a table");
    const Val &o = operand(1);
    if (t.dims[0] < 1 || product(o.dims) != 1)
      malformed("dynamic-slice of an empty table or at a non-scalar index");
    v.idx.assign(ranks, std::vector<int64_t>(1, 0));
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t k = std::clamp<int64_t>(o.idx[r][0], 0, t.dims[0] - 1);
      v.idx[r][0] = idxAt(t, r, k);
    }
    return v;
  }
  static const std::set<std::string> binary = {"add", "subtract", "multiply", "divide",
                                               "remainder", "minimum", "maximum", "compare",
                                               "and", "or"};
  if (binary.count(op)) {
    const Val &a = operand(0), &b = operand(1);
    return indexBinary(op, a, b, std::move(v));
  }
  if (op == "reduce") {
    const Val &x = operand(0), &init = operand(1);
    return indexReduce(in, x, init, std::move(v));
  }
  if (op == "select" || op == "clamp") {
    const Val &a = operand(0), &b = operand(1), &c = operand(2);
    for (const Val *x : {&a, &b, &c})
      if (!x->dims.empty() && product(x->dims) != n)
        malformed("'" + op + "' operand shapes disagree");
    int64_t m = n;
    if (isSplat(a) && isSplat(b) && isSplat(c)) {
      v.idx.assign(ranks, std::vector<int64_t>(1, 0));
      m = 1;
    } else {
      fullRows(v, n);
    }
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t e = 0; e < m; ++e) {
        int64_t x = idxAt(a, r, e), y = idxAt(b, r, e), z = idxAt(c, r, e);
        v.idx[r][e] = op == "select" ? (x ? y : z) : std::clamp(y, x, std::max(x, z));
      }
    return v;
  }
  unsupported("integer HLO op '" + op + "' (index arithmetic other than +, -, *, /, %, min, "
              "max, compare, select, tables)");
}

} // namespace planproof::xla
