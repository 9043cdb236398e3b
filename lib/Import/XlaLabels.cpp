//===- XlaLabels.cpp - Ignored labels and counts of tokens ---------*- C++ -*-===//
//
// The part of the Translator (XlaTranslator.h) for labels that may be an ignored label
// and for the token counts computed from them.
//
// Labels a program compares with a negative constant c (`labels != -100`) are not all
// classes: on each token the label is either a class or c. So are labels it compares
// by order with a constant that every class passes alike and some value below 0 does
// not (`labels >= 0`: c = -1; `labels > -100`: c = -100) -- found once the module is
// read (Translator::labelsOrderTested), since JAX's own guards (`x < 0` wrapping a
// negative index, a lookup's bounds on an index a select chose), a side of a range test
// that splits the classes (a vocabulary shard's) and ids that index a table's rows
// (token ids, whose domain is the rows) are no such test. Where every comparison of
// the labels treats all values below 0 alike (`>= 0`), c stands for each of them
// exactly; where one tells them apart (`!= -100`), the spec's verdict assumes that no
// label is a value below 0 other than c, and says so. Such a parameter becomes two
// inputs of the spec: the ids (a class on every token) and a 0/1 vector `kept` (bound
// 2: 1 where the label is a class). Every use of the labels must be one of
//   - a comparison with a constant: decided on the classes and on c separately, it is
//     a constant, the kept predicate or its negation (or, against a class k, `kept`
//     times k's one-hot column);
//   - `where(labels != c, labels, k)` with a class k: the ids; every such `where` on
//     one input, in the reference and the plan, must use the same k;
//   - reshapes, conversions, slices and gathers over the mesh: done to both vectors.
// Then the reference and the plan, run on real labels, compute what they compute on
// (ids, kept) with ids = the label where kept and k where ignored: where the two
// programs agree on every (ids, kept), they agree on every batch of labels. Any other
// use (a lookup by labels that may be c) is unsupported.
//
// A count of tokens (`jnp.sum(labels != -100)`, an integer sum of a predicate, summed
// over the mesh) is kept as a real-valued tensor of an integer type, exact while it
// fits the type: every op on it bounds its magnitude, and a bound past the type's
// range is unsupported (an integer that may wrap around).
//
//===----------------------------------------------------------------------===//
#include "Import/XlaTranslator.h"

#include "Support/Limits.h"

#include <algorithm>
#include <set>

namespace planproof::xla {

namespace {

/// The largest magnitude an integer type holds (0 when the type is not one).
int64_t typeMax(const std::string &t) {
  if (t == "s8") return INT8_MAX;
  if (t == "s16") return INT16_MAX;
  if (t == "s32") return INT32_MAX;
  if (t == "s64" || t == "u64") return INT64_MAX;
  if (t == "u8") return UINT8_MAX;
  if (t == "u16") return UINT16_MAX;
  if (t == "u32") return UINT32_MAX;
  return 0;
}

/// The views of a value that keep which token an element belongs to, or copy it.
bool isView(const std::string &op) {
  return op == "reshape" || op == "bitcast" || op == "copy" || op == "convert" || op == "broadcast";
}

/// The integer constant `name` denotes through views (a broadcast constant), if any.
std::optional<int64_t> intConstant(const hlo::Computation &c, const std::string &name) {
  const hlo::Instruction *i = c.find(name);
  for (int hops = 0; i && hops < 16; ++hops) {
    if (i->opcode == "constant" && !i->shape.isTuple() && isInt(i->shape.type) &&
        i->shape.type != "pred") {
      std::vector<std::string> els = literalElements(i->rawOperands);
      if (els.empty() || std::any_of(els.begin(), els.end(), [&](auto &e) { return trim(e) != trim(els[0]); }))
        return std::nullopt;
      return intLiteral(trim(els[0]));
    }
    if (!isView(i->opcode) || i->operands.size() != 1)
      return std::nullopt;
    i = c.find(i->operands[0]);
  }
  return std::nullopt;
}

/// `x DIR c` as `c DIR' x`.
std::string flipped(const std::string &dir) {
  return dir == "LT" ? "GT" : dir == "GT" ? "LT" : dir == "LE" ? "GE" : dir == "GE" ? "LE" : dir;
}

} // namespace

std::optional<int64_t> orderIgnored(const std::string &dir, int64_t c) {
  // Every class x >= 0 passes `x >= c` (c <= 0) alike, and c - 1 does not; likewise
  // `x > c` (c <= -1) and c.
  if ((dir == "GE" || dir == "LT") && c <= 0 && c > INT64_MIN)
    return c - 1;
  if ((dir == "GT" || dir == "LE") && c <= -1)
    return c;
  return std::nullopt;
}

namespace {
/// Whether `u` selects on its first operand between the other two: a select, or a call
/// of a computation that is one (JAX's `_where` before optimization).
bool isSelect(const hlo::Module &m, const hlo::Instruction &u) {
  if (u.operands.size() != 3)
    return false;
  if (u.opcode == "select")
    return true;
  auto f = u.attrs.find("to_apply");
  if (u.opcode != "call" || f == u.attrs.end())
    return false;
  std::string n = trim(f->second);
  const hlo::Computation *callee = m.find(n.substr(!n.empty() && n[0] == '%'));
  const hlo::Instruction *r = callee ? callee->root() : nullptr;
  if (!r || r->opcode != "select" || r->operands.size() != 3)
    return false;
  for (int k = 0; k < 3; ++k) {
    const hlo::Instruction *a = callee->find(r->operands[k]);
    if (!a || a->opcode != "parameter" || trim(a->rawOperands) != std::to_string(k))
      return false;
  }
  return true;
}
} // namespace

bool wrapsIndex(const hlo::Module &m, const hlo::Computation &c, const hlo::Instruction &cmp) {
  if (cmp.operands.size() != 2)
    return false;
  for (auto &u : c.insts) {
    if (std::find(u.operands.begin(), u.operands.end(), cmp.name) == u.operands.end())
      continue;
    if (!isSelect(m, u) || u.operands[0] != cmp.name)
      return false;
    // One branch is an operand x of the comparison, the other an `add` of x.
    bool wraps = false;
    for (int side = 1; side <= 2; ++side) {
      const std::string &x = u.operands[side];
      const hlo::Instruction *a = c.find(u.operands[3 - side]);
      wraps |= (x == cmp.operands[0] || x == cmp.operands[1]) && a && a->opcode == "add" &&
               std::find(a->operands.begin(), a->operands.end(), x) != a->operands.end();
    }
    if (!wraps)
      return false;
  }
  return true;
}

std::optional<RangeSide> rangePartner(const hlo::Computation &c, const hlo::Instruction &cmp,
                                      int k) {
  if (cmp.operands.size() != 2 || k < 0 || k > 1)
    return std::nullopt;
  const std::string &x = cmp.operands[k];
  for (auto &u : c.insts) {
    if ((u.opcode != "or" && u.opcode != "and") || u.operands.size() != 2 ||
        (u.operands[0] != cmp.name && u.operands[1] != cmp.name))
      continue;
    const hlo::Instruction *o = c.find(u.operands[u.operands[0] == cmp.name ? 1 : 0]);
    auto dir = o ? o->attrs.find("direction") : cmp.attrs.end();
    if (!o || o->opcode != "compare" || o->operands.size() != 2 || dir == o->attrs.end())
      continue;
    for (int j = 0; j < 2; ++j)
      if (o->operands[j] == x) {
        std::string d = trim(dir->second);
        return RangeSide{j == 0 ? d : flipped(d), intConstant(c, o->operands[1 - j])};
      }
  }
  return std::nullopt;
}

std::map<std::string, int64_t> ignoredLabels(const hlo::Computation &entry) {
  std::map<std::string, std::vector<const hlo::Instruction *>> users;
  for (auto &i : entry.insts)
    for (auto &o : i.operands)
      users[o].push_back(&i);
  std::map<std::string, int64_t> out;
  for (auto &p : entry.insts) {
    if (p.opcode != "parameter" || p.shape.isTuple() || !isInt(p.shape.type) ||
        p.shape.type == "pred" || p.shape.dims.empty())
      continue;
    std::vector<const hlo::Instruction *> work = {&p};
    std::set<const hlo::Instruction *> seen = {&p};
    while (!work.empty() && !out.count(p.name)) {
      const hlo::Instruction *v = work.back();
      work.pop_back();
      for (const hlo::Instruction *u : users[v->name]) {
        auto dir = u->attrs.find("direction");
        if (u->opcode == "compare" && u->operands.size() == 2 && dir != u->attrs.end() &&
            (trim(dir->second) == "EQ" || trim(dir->second) == "NE")) {
          const std::string &other = u->operands[u->operands[0] == v->name ? 1 : 0];
          if (std::optional<int64_t> c = intConstant(entry, other); c && *c < 0) {
            out[p.name] = *c;
            break;
          }
        }
        if (isView(u->opcode) && !u->shape.isTuple() && isInt(u->shape.type) &&
            u->shape.type != "pred" && seen.insert(u).second)
          work.push_back(u);
      }
    }
  }
  return out;
}

/// The predicate `kept` (or, with `ignored`, its negation) of ignorable labels, as a
/// 0/1 tensor of `dims` (one element per token): the kept vector's one-hot column 1.
Val Translator::keptPred(const Val &ids, bool ignored, const std::vector<int64_t> &dims) {
  Val kept;
  kept.kind = Val::Ids;
  kept.name = kept.input = ids.keptIds;
  kept.dims = ids.dims;
  kept.type = ids.type;
  Val v = idsEqual(kept, 1, ignored, dims);
  v.keptOf = ids.name;
  v.keptNeg = ignored;
  return v;
}

void Translator::labelsOrderTested() {
  const std::map<std::string, int64_t> &known = plan ? refBounds : bounds;
  bool more = false;
  for (auto &[input, t] : orderTested) {
    if (rowLookups.count(input) || !lateIgnored)
      continue;  // token ids, whose domain is a table's rows
    if (t.partner) {
      // The other side of a range test: a shard's bound (no test for an ignored label)
      // when it differs by partition (no constant) or the classes [0, b) do not all
      // pass it alike.
      if (!t.partner->c)
        continue;
      auto b = known.find(input);
      if (b != known.end() && b->second > 0) {
        const std::string &d = t.partner->dir;
        int64_t c = *t.partner->c;
        auto holds = [&](int64_t x) {
          return d == "LT" ? x < c : d == "LE" ? x <= c : d == "GT" ? x > c : d == "GE" ? x >= c
                 : d == "EQ" ? x == c : x != c;
        };
        bool inside = c >= 0 && c < b->second;  // (== and != split the classes there)
        if (holds(0) != holds(b->second - 1) || ((d == "EQ" || d == "NE") && inside))
          continue;
      }
    }
    more |= lateIgnored->emplace(input, t.ignored).second;
  }
  if (more)
    throw MoreIgnored{};
}

/// Integer ops on labels that may be ignored (see the file comment).
Val Translator::labelsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  int k = in[0]->kind == Val::Ids && in[0]->ignorable ? 0 : 1;
  if (op == "compare" && in.size() == 2)
    return labelsCompare(in, k);
  if (op == "select" && in.size() == 3)
    return labelsSelect(in);
  if (op == "broadcast" && k == 0 && in.size() == 1 &&
      product(in[0]->dims) != product(inst.shape.dims)) {
    // Spread along a new dimension, to be compared with its positions (jax.nn.one_hot,
    // which gives an ignored label a row of zeros: idsOneHot).
    Val plain = *in[0];
    plain.ignorable = false;
    Val v = idsSpread(plain, inst.shape.dims);
    v.ignorable = true;
    v.ignore = in[0]->ignore;
    v.keptIds = in[0]->keptIds;
    return v;
  }
  bool parallel = op == "slice" || op == "dynamic-slice" || op == "all-gather" || op == "all-to-all";
  if ((isView(op) && product(need(in, 1).dims) == product(inst.shape.dims)) ||
      (parallel && k == 0)) {
    // Done to the ids and to the kept vector alike.
    Val plain = *in[0];
    plain.ignorable = false;
    std::vector<const Val *> args = in;
    args[0] = &plain;
    Val v = idsOp(inst, args);
    Val kept = plain;
    kept.name = kept.input = in[0]->keptIds;
    args[0] = &kept;
    Val kv = idsOp(inst, args);
    v.ignorable = true;
    v.ignore = in[0]->ignore;
    v.keptIds = kv.name;
    return v;
  }
  unsupported("'" + op + "' of labels that may be the ignored label " +
              std::to_string(in[k]->ignore) + " (covered: comparisons with a constant, "
              "`where(labels != " + std::to_string(in[k]->ignore) +
              ", labels, k)`, reshapes, slices and gathers over the mesh)");
}

/// labels DIR c for a constant c (the labels operand `k`): decided on the classes (as
/// for any ids) and at the ignored label apart.
Val Translator::labelsCompare(const std::vector<const Val *> &in, int k) {
  const Val &ids = *in[k], &other = *in[1 - k];
  std::string dir = attr("direction");
  if (k == 1)  // c OP labels  ->  labels OP' c
    dir = flipped(dir);
  int64_t c = 0;
  bool isConstant = other.kind == Val::Index && !other.idx.empty() && !other.idx[0].empty();
  if (isConstant) {
    c = other.idx[0][0];
    for (auto &row : other.idx)
      for (int64_t x : row)
        isConstant &= x == c;
  }
  if (!isConstant || ids.offset != 0 || !ids.shift.empty())
    unsupported("a comparison of labels that may be ignored with other than a constant");
  int64_t g = ids.ignore;
  bool atIgnored = dir == "LT"   ? g < c
                   : dir == "LE" ? g <= c
                   : dir == "GT" ? g > c
                   : dir == "GE" ? g >= c
                   : dir == "EQ" ? g == c
                   : dir == "NE" ? g != c
                                 : (malformed("unknown compare direction '" + dir + "'"), false);
  // Labels below 0 other than g compare as g does when the comparison is by order with
  // c >= 0 (>= -1 for > and <=); else the verdict holds for labels that are classes or g.
  bool alike = ((dir == "LT" || dir == "GE") && c >= 0) || ((dir == "LE" || dir == "GT") && c >= -1);
  if (!alike)
    assumedIgnored.emplace(ids.input, g);
  std::vector<int64_t> dims = dimsOf();
  // On the classes: as the ids' range decides it.
  Val plain = ids;
  plain.ignorable = false;
  std::vector<const Val *> args = in;
  args[k] = &plain;
  std::map<std::string, int64_t> *late = lateIgnored;  // (these labels are known ignorable)
  lateIgnored = nullptr;
  Val onClasses = idsOp(*cur, args);
  lateIgnored = late;
  if (onClasses.kind == Val::Index && isSplat(onClasses)) {
    int64_t d = onClasses.idx.empty() ? 0 : onClasses.idx[0][0];
    for (auto &row : onClasses.idx)
      if (row[0] != d)
        unsupported("a comparison of labels that differs between partitions");
    if ((d != 0) == atIgnored)
      return onClasses;  // the same on every token
    return keptPred(ids, /*ignored=*/atIgnored, dims);
  }
  if (onClasses.kind == Val::Pred && (dir == "EQ" || dir == "NE")) {
    // Against a class: its one-hot column (for ==, the comparison on the classes
    // itself), where the token is kept.
    Val col = dir == "EQ" ? onClasses : idsEqual(plain, c, false, dims);
    Val kept = keptPred(ids, false, dims);
    std::string both = emit("mul", {kept.name, col.name}, nullptr, nullptr, cur->name + "_kept");
    Val v = tensor(dir == "EQ" ? both : oneMinus(both, dims), "pred", dims);
    v.kind = Val::Pred;
    return v;
  }
  unsupported("a comparison of labels that may be ignored that their classes do not decide");
}

/// where(kept, labels, k) (or where(ignored, k, labels)) with a class k: the ids.
Val Translator::labelsSelect(const std::vector<const Val *> &in) {
  const Val &p = *in[0];
  for (int side = 1; side <= 2; ++side) {
    const Val &x = *in[side], &other = *in[3 - side];
    bool wantIgnored = side == 2;  // labels on the false side: the predicate is "ignored"
    if (p.kind != Val::Pred || x.kind != Val::Ids || !x.ignorable || p.keptOf != x.name ||
        p.keptNeg != wantIgnored || product(p.dims) != product(x.dims) || other.kind != Val::Index)
      continue;
    int64_t k = other.idx.empty() || other.idx[0].empty() ? -1 : other.idx[0][0];
    for (auto &row : other.idx)
      for (int64_t e : row)
        if (e != k)
          k = -1;
    if (k < 0)
      break;
    fills.push_back({x.input, k, cur});
    Val v = x;
    v.ignorable = false;
    v.picked = true;
    v.keptIds.clear();
    v.dims = dimsOf();
    return v;
  }
  unsupported("a select on labels that may be ignored other than `where(labels != c, "
              "labels, k)` with c the ignored label and k a class");
}

/// Ops on counts of tokens: sums of predicates, their sums over the mesh, maxima with
/// constants, conversions; none for ops on other values.
std::optional<Val> Translator::countData(const hlo::Instruction &inst,
                                         const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  if (inst.shape.isTuple() || !isInt(inst.shape.type) || inst.shape.type == "pred")
    return std::nullopt;
  bool anyCount = false, anyPred = false;
  for (auto *v : in) {
    anyCount |= v->kind == Val::Tensor && v->countMax > 0;
    anyPred |= v->kind == Val::Pred;
  }
  static const std::set<std::string> arith = {"reduce", "add", "subtract", "multiply",
                                              "maximum", "minimum", "negate", "all-reduce"};
  bool layout = isView(op) || op == "transpose" || op == "slice" || op == "reduce-precision";
  if (inst.shape.isTuple() || !(anyCount || (anyPred && arith.count(op))) ||
      !(arith.count(op) || layout))
    return std::nullopt;
  int64_t limit = typeMax(inst.shape.type);
  if (limit == 0)
    unsupported("a count of tokens of type " + inst.shape.type);
  // The operands as real-valued tensors, each with its bound.
  std::vector<Val> args;
  std::vector<int64_t> bound;
  for (auto *v : in) {
    if (v->kind == Val::Pred || (v->kind == Val::Tensor && v->countMax > 0)) {
      Val a = *v;
      a.kind = Val::Tensor;
      args.push_back(a);
      bound.push_back(v->kind == Val::Pred ? 1 : v->countMax);
      continue;
    }
    int64_t c = 0;
    bool uniform = v->kind == Val::Index && !v->idx.empty() && !v->idx[0].empty();
    if (uniform) {
      c = v->idx[0][0];
      for (auto &row : v->idx)
        for (int64_t e : row)
          uniform &= e == c;
    }
    if (!uniform || c == INT64_MIN)
      unsupported("'" + op + "' of a count of tokens and an integer that is not one constant");
    if (op == "reduce" && v == in.back() && v->dims.empty()) {  // its initial value
      Val a = tensor("", v->type, {});
      a.scalarConst = std::to_string(c);
      args.push_back(a);
      bound.push_back(c < 0 ? -c : c);
      continue;
    }
    Val a = tensor(emit("constant", {}, {{"value", c}}, &v->dims, cur->name + "_c"), v->type, v->dims);
    if (v->dims.empty())
      a.scalarConst = std::to_string(c);
    args.push_back(a);
    bound.push_back(c < 0 ? -c : c);
  }
  std::vector<const Val *> ptrs;
  for (auto &a : args)
    ptrs.push_back(&a);
  // Its magnitude's bound, from the operands'.
  int64_t b = 0;
  bool ok = true;
  if (op == "reduce") {
    int64_t n = product(args[0].dims), m = std::max<int64_t>(product(inst.shape.dims), 1);
    ok = checkedMul(bound[0], n / m, b);
  } else if (op == "add" || op == "subtract") {
    ok = checkedAdd(bound[0], bound[1], b);
  } else if (op == "multiply") {
    ok = checkedMul(bound[0], bound[1], b);
  } else if (op == "all-reduce") {
    ok = checkedMul(bound[0], ranks, b);
  } else {
    b = *std::max_element(bound.begin(), bound.end());
  }
  if (!ok || b > limit)
    unsupported("a count of tokens that may not fit its type " + inst.shape.type);
  std::optional<Val> r;
  if (op == "all-reduce") {
    if (!plan)
      malformed("a collective in the module before partitioning");
    r = collective(ptrs);
  } else {
    r = floatElementwise(inst, ptrs);
    if (!r)
      r = floatLayout(inst, ptrs);
  }
  if (!r || r->kind != Val::Tensor)
    unsupported("'" + op + "' on a count of tokens");
  r->type = inst.shape.type;
  r->countMax = std::max<int64_t>(b, 1);
  return r;
}

} // namespace planproof::xla
