//===- XlaTranslator.cpp - HLO instructions as planproof ops ------------------===//
//
// See XlaTranslator.h and docs/xla.md (the table of covered ops). This file: the values,
// the dispatch of every instruction, float tensor ops, dots, collectives and dynamic
// slices; XlaData.cpp: loops, predicates and index arithmetic; XlaIds.cpp: token ids.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaTranslator.h"

#include <set>

#include "Support/Limits.h"
#include "Support/Rational.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

namespace planproof::xla {

//===--- Values ---------------------------------------------------------------===//

bool isFloat(const std::string &t) {
  return t == "f32" || t == "bf16" || t == "f16" || t == "f64";
}
bool isInt(const std::string &t) {
  return t == "s8" || t == "s16" || t == "s32" || t == "s64" || t == "u8" || t == "u16" ||
         t == "u32" || t == "u64" || t == "pred";
}


std::string sanitize(const std::string &n) {
  std::string s;
  for (char c : n)
    s += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit((unsigned char)s[0]))
    s = "v" + s;
  return s;
}

static bool isFiniteText(const std::string &text) {
  std::string t = trim(text);
  return t != "inf" && t != "-inf" && t != "nan" && t != "-nan";
}

/// A float literal as JSON: exact decimal text kept as the number it denotes.
json floatLiteral(const std::string &text) {
  std::string t = trim(text);
  if (!isFiniteText(t))
    unsupported("the non-finite constant " + t);
  if (t == "true")
    return 1;
  if (t == "false")
    return 0;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end)
    malformed("malformed constant '" + t.substr(0, 40) + "'");
  if (errno == ERANGE)
    unsupported("the constant " + t + " is outside the range of a double");
  // The spec's number denotes exactConstant(v) (docs/semantics.md, "Constants"); that
  // must be the decimal written here (XLA writes f32 literals in at most 9 digits, for
  // which it always is).
  Rational written, denoted;
  std::string why;
  if (!Rational::fromDecimal(t, written, why) || !exactConstant(v, denoted, why) ||
      written != denoted)
    unsupported("the constant " + t + " has no JSON number denoting it exactly");
  return v;
}

/// Flattens a literal `{ {1, 2}, {3, 4} }` (or a scalar) into element texts.
std::vector<std::string> literalElements(const std::string &raw) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : raw) {
    if (c == '{' || c == '}' || c == ',' || c == ' ') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

int64_t intLiteral(const std::string &t) {
  if (t == "true")
    return 1;
  if (t == "false")
    return 0;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (end == t.c_str() || *end || errno)
    malformed("malformed integer constant '" + t.substr(0, 40) + "'");
  return v;
}

/// call: the callee computation run on the operands.
Val Translator::call(const std::vector<const Val *> &in, int depth) {
  std::string callee = attr("to_apply");
  if (!callee.empty() && callee[0] == '%')
    callee.erase(0, 1);
  const hlo::Computation *c = m.find(callee);
  if (!c)
    malformed("call of an unknown computation '" + callee + "'");
  std::vector<Val> a;
  for (auto *v : in)
    a.push_back(*v);
  const hlo::Instruction *saved = cur;
  Val r = run(*c, a, depth + 1);
  cur = saved;
  if (track)
    *track = saved;
  return r;
}

Val Translator::translate(const hlo::Instruction &inst, const std::vector<const Val *> &in,
                          const std::vector<Val> &args, int depth) {
  const std::string &op = inst.opcode;
  std::string base = inst.name;

  if (op == "parameter") {
    std::vector<int64_t> k = ints(inst.rawOperands, "parameter number");
    if (k.size() != 1 || k[0] < 0 || k[0] >= (int64_t)args.size())
      malformed("parameter(" + inst.rawOperands + ") out of range");
    return args[k[0]];
  }
  if (op == "tuple") {
    Val t;
    t.kind = Val::Tuple;
    for (auto *v : in)
      t.elements.push_back(*v);
    return t;
  }
  if (op == "get-tuple-element") {
    const Val &t = need(in, 1);
    std::vector<int64_t> k = ints(attr("index"), "tuple index");
    if (t.kind != Val::Tuple || k.size() != 1 || k[0] < 0 || k[0] >= (int64_t)t.elements.size())
      malformed("get-tuple-element index out of range");
    return t.elements[k[0]];
  }
  if (op == "call")
    return call(in, depth);
  if (op == "opt-barrier" || op == "optimization-barrier")
    return need(in, 1);
  if (op == "custom-call") {
    auto it = inst.attrs.find("custom_call_target");
    std::string target = it == inst.attrs.end() ? "" : trim(it->second);
    if (target == "\"Sharding\"" && in.size() == 1)
      return *in[0];  // an annotation: the value itself
    unsupported("custom-call " + target);
  }

  if (op == "is-finite") {
    // planproof's values are real numbers, every one finite (select, above): the
    // predicate holds everywhere, the same on every rank -- as jax.nn.logsumexp's guard
    // of its maximum is read. Only a non-finite constant makes it false.
    const Val &x = need(in, 1);
    if (x.kind != Val::Tensor)
      unsupported("'is-finite' on an integer or tuple value");
    Val v;
    v.kind = Val::Index;
    v.type = "pred";
    v.dims = dimsOf();
    v.idx.assign(ranks, std::vector<int64_t>(1, x.name.empty() ? 0 : 1));
    return v;
  }
  if (op == "while")
    return whileLoop(in, depth);
  if (inst.shape.isTuple() && op != "all-reduce")
    unsupported("HLO op '" + op + "' with a tuple result");
  if (op == "conditional")
    unsupported("HLO op '" + op + "' (control flow)");

  checkDeclared(inst, in);
  if (std::optional<Val> v = carried(inst, in))  // a reshape of a marked lookup or update
    return *v;
  if (op != "select" && op != "scatter")  // (a shard's lookup is a value only once masked)
    checkUnmasked(in);
  // Integer values: token ids stay symbolic; partition ids, index arithmetic and tables
  // are evaluated.
  if (!inst.shape.isTuple() && isInt(inst.shape.type) && op != "all-reduce") {
    for (auto *v : in)
      if (v->kind == Val::Count)
        return countOp(inst, in);
    if (std::optional<Val> v = countData(inst, in))  // a count of tokens
      return *v;
    for (auto *v : in)
      if (v->kind == Val::Ids || v->kind == Val::IdsSpread)
        return idsOp(inst, in);
    for (auto *v : in)
      if (v->kind == Val::IdsMask)
        return maskOp(inst, in);
    if (std::optional<Val> v = positionsOp(inst, in))  // positions too many to write out
      return *v;
    for (auto *v : in)
      if (v->kind == Val::Pred || (v->kind == Val::Tensor && op == "compare"))
        return predOp(inst, in);
    return indexOp(inst, in);
  }
  for (auto *v : in)
    if (v->kind == Val::Ids && v->ignorable)
      unsupported("'" + op + "' of labels that may be the ignored label " + std::to_string(v->ignore));
  if (op == "all-reduce")
    if (std::optional<Val> v = countData(inst, in))  // a count of tokens over the mesh
      return *v;
  if (!inst.shape.isTuple() && !isFloat(inst.shape.type))
    unsupported("element type " + inst.shape.type);

  if (std::optional<Val> v = floatElementwise(inst, in))
    return *v;
  if (std::optional<Val> v = floatLayout(inst, in))
    return *v;
  if (op == "dot")
    return dot(in);
  if (op == "dynamic-slice")
    return dynamicSlice(in);
  if (op == "dynamic-update-slice")
    return dynamicUpdateSlice(in);
  if (op == "select")
    return select(in);
  if (op == "gather")
    return gather(in);
  if (op == "scatter")
    return scatterAdd(in);
  if (op == "collective-permute") {
    if (!plan)
      malformed("a collective in the module before partitioning");
    return collectivePermute(in);
  }
  if (op == "all-reduce" || op == "all-gather" || op == "reduce-scatter" || op == "all-to-all") {
    if (!plan)
      malformed("a collective in the module before partitioning");
    return collective(in);
  }
  unsupported("HLO op '" + op + "'");
}

/// What an instruction declares against what its operands give, for the ops whose
/// result the translation takes from the declaration: elementwise ops keep their
/// operands' shape and (arithmetic ones) their element type; a reshape keeps the
/// element count; a transpose permutes the dims. A dump that says otherwise is
/// malformed (a wrong declared shape once verified as if it were right).
void Translator::checkDeclared(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  static const std::set<std::string> sameType = {
      "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs",
      "exponential", "log", "tanh", "sqrt", "rsqrt", "power", "logistic", "sine", "cosine",
      "erf", "sign", "floor", "ceil", "exponential-minus-one", "log-plus-one", "remainder"};
  static const std::set<std::string> sameShape = {"compare", "select", "convert", "clamp", "and",
                                                  "or", "not", "xor", "is-finite"};
  const std::string &op = inst.opcode;
  if (inst.shape.isTuple())
    return;
  if (op == "dot")
    for (const Val *v : in)
      if (v->kind == Val::Tensor && !v->type.empty() && v->type != inst.shape.type)
        malformed("'dot' declares a " + inst.shape.type + " result of a " + v->type + " operand");
  // Ops that move elements keep their element type.
  static const std::set<std::string> moves = {"broadcast", "reshape", "transpose", "slice",
                                              "concatenate", "pad", "reverse", "copy"};
  if (moves.count(op) && !in.empty() && in[0]->kind == Val::Tensor && !in[0]->name.empty() &&
      !in[0]->type.empty() && in[0]->type != inst.shape.type)
    malformed("'" + op + "' declares a " + inst.shape.type + " result of a " + in[0]->type +
              " operand");
  bool elementwise = sameType.count(op) || sameShape.count(op);
  if (elementwise)
    for (const Val *v : in) {
      // (A scalar operand of select/clamp is broadcast by XLA; Index values are splats.)
      if (v->kind != Val::Tensor || v->name.empty() || v->dims.empty())
        continue;
      if (v->dims != inst.shape.dims)
        malformed("'" + op + "' declares the result shape " + inst.shape.str() +
                  ", but an operand has the shape " + hlo::Shape{v->type, v->dims, {}}.str());
      if (sameType.count(op) && !v->type.empty() && v->type != inst.shape.type)
        malformed("'" + op + "' declares a " + inst.shape.type + " result of a " + v->type +
                  " operand");
    }
  if ((op == "reshape" || op == "transpose") && in.size() == 1 && in[0]->kind == Val::Tensor &&
      !in[0]->name.empty()) {
    const Val &x = *in[0];
    if (checkedProduct(x.dims) != checkedProduct(inst.shape.dims))
      malformed("'" + op + "' of " + std::to_string(checkedProduct(x.dims)) + " elements declares " +
                std::to_string(checkedProduct(inst.shape.dims)) + " (" + inst.shape.str() + ")");
    if (op == "transpose" && inst.attrs.count("dimensions")) {
      std::vector<int64_t> perm = ints(inst.attrs.at("dimensions"), "transpose dimensions");
      std::vector<int64_t> expect;
      for (int64_t p : perm) {
        if (p < 0 || p >= (int64_t)x.dims.size())
          malformed("transpose dimension " + std::to_string(p) + " is out of range");
        expect.push_back(x.dims[p]);
      }
      if (expect != inst.shape.dims)
        malformed("'transpose' declares the result shape " + inst.shape.str() +
                  ", but its operand and permutation give " +
                  hlo::Shape{inst.shape.type, expect, {}}.str());
    }
  }
}

/// Float constants, conversions, elementwise ops and reductions; none for other
/// instructions.
std::optional<Val> Translator::floatElementwise(const hlo::Instruction &inst,
                                                const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  const std::string &base = inst.name;
  std::vector<int64_t> dims = inst.shape.isTuple() ? std::vector<int64_t>{} : inst.shape.dims;
  const std::string &type = inst.shape.type;
  if (op == "constant") {
    std::vector<std::string> els = literalElements(inst.rawOperands);
    int64_t n = product(dims);
    if ((int64_t)els.size() != n)
      malformed("a constant with " + std::to_string(els.size()) + " values for " +
                std::to_string(n) + " elements");
    bool splat = n > 0 && std::all_of(els.begin(), els.end(),
                                      [&](const std::string &e) { return trim(e) == trim(els[0]); });
    if (dims.empty() || (splat && isFiniteText(els[0]))) {  // (f32[1] constant({10000}))
      std::string t = trim(els[0]);
      if (!isFiniteText(t)) {
        Val v = tensor("", type, dims);
        v.scalarConst = t;
        return v;
      }
      Val v = tensor(emit("constant", {}, {{"value", floatLiteral(els[0])}}, &dims, base), type,
                     dims);
      v.scalarConst = els[0];
      return v;
    }
    if (n > 1 << 20)
      unsupported("a dense constant of more than 2^20 elements");
    json values = json::array();
    for (auto &e : els)
      values.push_back(floatLiteral(e));
    return tensor(emit("literal", {}, {{"values", values}}, &dims, base), type, dims);
  }
  if (op == "convert" && need(in, 1).kind == Val::Pred) {  // a predicate as 0/1 numbers
    Val v = *in[0];
    v.kind = Val::Tensor;
    v.type = type;
    return v;
  }
  if (op == "convert" && need(in, 1).kind == Val::Count) {  // an exponent to be (power)
    Val v = *in[0];
    v.type = type;
    return v;
  }
  if (op == "convert" && need(in, 1).kind == Val::Index)
    return indexToFloat(*in[0], base);
  if (op == "convert" || op == "copy" || op == "reduce-precision") {
    // float to float, or rounded to fewer exponent and mantissa bits: the same real
    // number (rounding is replay's concern)
    const Val &x = need(in, 1);
    checkTensor(x);
    Val v = x;
    v.type = type;
    return v;
  }
  static const std::map<std::string, std::string> binary = {
      {"add", "add"}, {"subtract", "sub"}, {"multiply", "mul"},
      {"divide", "div"}, {"maximum", "maximum"}, {"minimum", "minimum"}};
  if (auto it = binary.find(op); it != binary.end()) {
    if (in.size() != 2)
      malformed("'" + op + "' takes 2 operands");
    for (int k = 0; k < 2; ++k)  // max(x, -inf) = x, min(x, inf) = x
      if ((op == "maximum" && isConst(*in[k], "-inf")) || (op == "minimum" && isConst(*in[k], "inf")))
        return *in[1 - k];
    checkTensor(*in[0]);
    checkTensor(*in[1]);
    if (std::optional<Val> v = foldedConstant(op, *in[0], *in[1], dims))
      return *v;
    return tensor(emit(it->second, {in[0]->name, in[1]->name}, nullptr, nullptr, base), type, dims);
  }
  static const std::map<std::string, std::string> unary = {
      {"exponential", "exp"}, {"log", "log"}, {"rsqrt", "rsqrt"}, {"sqrt", "sqrt"},
      {"tanh", "tanh"}, {"logistic", "logistic"}, {"erf", "erf"}, {"sine", "sin"},
      {"cosine", "cos"}};
  if (auto it = unary.find(op); it != unary.end()) {
    const Val &x = need(in, 1);
    checkTensor(x);
    return tensor(emit(it->second, {x.name}, nullptr, nullptr, base), type, dims);
  }
  if (op == "power")
    return power(in);
  if (op == "abs") {  // |x| = max(x, -x)
    const Val &x = need(in, 1);
    checkTensor(x);
    std::string neg = emit("scale", {x.name}, {{"factor", -1}}, nullptr, base + "_neg");
    return tensor(emit("maximum", {x.name, neg}, nullptr, nullptr, base), type, dims);
  }
  if (op == "negate") {
    const Val &x = need(in, 1);
    checkTensor(x);
    return tensor(emit("scale", {x.name}, {{"factor", -1}}, nullptr, base), type, dims);
  }
  if (op == "reduce") {
    if (in.size() != 2)
      unsupported("a variadic reduce");
    checkTensor(*in[0]);
    std::string kind = reductionKind();
    const Val &init = *in[1];
    std::vector<int64_t> rd = ints(attr("dimensions"), "reduce dimensions");
    std::sort(rd.begin(), rd.end());
    // Distinct dims of the operand, and the declared result is the operand without them.
    const std::vector<int64_t> &xd = in[0]->dims;
    std::vector<int64_t> kept;
    for (size_t k = 0; k < rd.size(); ++k)
      if (rd[k] < 0 || rd[k] >= (int64_t)xd.size() || (k && rd[k] == rd[k - 1]))
        malformed("reduce dimension " + std::to_string(rd[k]) + " is out of range or repeated "
                  "for a value of " + std::to_string(xd.size()) + " dimensions");
    for (size_t d = 0; d < xd.size(); ++d)
      if (!std::binary_search(rd.begin(), rd.end(), (int64_t)d))
        kept.push_back(xd[d]);
    if (kept != dims)
      malformed("'reduce' declares the result shape " + inst.shape.str() +
                ", but its operand without the reduced dimensions is " +
                hlo::Shape{type, kept, {}}.str());
    if (kind == "sum") {
      if (init.scalarConst.empty() || floatLiteral(init.scalarConst) != 0.0)
        unsupported("a sum reduction whose initial value is not the constant 0");
      return tensor(emit("reduce_sum", {in[0]->name}, {{"dims", rd}}, nullptr, base), type, dims);
    }
    if (trim(init.scalarConst) != "-inf")
      unsupported("a max reduction whose initial value is not -inf");
    return tensor(emit("reduce_max", {in[0]->name}, {{"dims", rd}}, nullptr, base), type, dims);
  }
  return std::nullopt;
}

/// power(x, y) where the reals define it by other ops, exactly: a positive constant base
/// b^y = exp(y log b) (RoPE's inverse frequencies 10000^(-2i/d)); a constant exponent n,
/// a whole number up to 16, as n - 1 products (n = 0: ones, as XLA's 0^0 = 1).
Val Translator::power(const std::vector<const Val *> &in) {
  if (in.size() != 2)
    malformed("power takes 2 operands");
  const Val &x = *in[0], &y = *in[1];
  checkTensor(x);
  std::vector<int64_t> dims = dimsOf();
  const std::string &type = cur->shape.type, &base = cur->name;
  if (y.kind == Val::Count) {  // beta ** count: Adam's bias corrections
    if (x.scalarConst.empty() || floatLiteral(x.scalarConst).get<double>() <= 0 || !dims.empty())
      unsupported("'power' to a step count other than of a positive scalar constant");
    return tensor(emit("power", {y.name}, {{"base", floatLiteral(x.scalarConst)}}, &dims, base),
                  type, dims);
  }
  checkTensor(y);
  if (!x.scalarConst.empty() && floatLiteral(x.scalarConst).get<double>() > 0) {
    std::string lb = emit("log", {x.name}, nullptr, nullptr, base + "_logbase");
    std::string e = emit("mul", {y.name, lb}, nullptr, nullptr, base + "_exponent");
    return tensor(emit("exp", {e}, nullptr, nullptr, base), type, dims);
  }
  double n = y.scalarConst.empty() ? -1 : floatLiteral(y.scalarConst).get<double>();
  if (n < 0 || n > 16 || n != std::floor(n))
    unsupported("'power' other than of a positive constant base or to a whole constant "
                "exponent up to 16");
  if (n == 0)
    return tensor(emit("constant", {}, {{"value", 1}}, &dims, base), type, dims);
  std::string p = x.name;
  for (int k = 1; k < (int)n; ++k)
    p = emit("mul", {p, x.name}, nullptr, nullptr, base + (k + 1 == (int)n ? "" : "_" + std::to_string(k)));
  return tensor(p, type, dims);
}

/// Integer ops on a step count: constants added or subtracted (`count + 1`), copies and
/// conversions between integer types; anything else is unsupported.
Val Translator::countOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  if (!inst.shape.dims.empty())
    unsupported("'" + op + "' broadcasting a step count");
  if ((op == "copy" || op == "convert" || op == "reshape" || op == "bitcast") && in.size() == 1) {
    Val v = *in[0];
    v.type = inst.shape.type;
    return v;
  }
  if ((op == "add" || op == "subtract") && in.size() == 2) {
    int k = in[0]->kind == Val::Count ? 0 : 1;
    const Val &c = *in[1 - k];
    if (c.kind == Val::Index && isSplat(c) && !c.idx.empty() &&
        std::all_of(c.idx.begin(), c.idx.end(), [&](auto &row) { return row == c.idx[0]; }) &&
        (op == "add" || k == 0)) {
      std::string n = emit("arith.constant", {}, {{"value", c.idx[0][0]}}, nullptr, cur->name + "_c");
      Val v = *in[k];
      v.name = emit(op == "add" ? "arith.addi" : "arith.subi", {in[k]->name, n}, nullptr, nullptr,
                    cur->name);
      v.type = inst.shape.type;
      return v;
    }
  }
  unsupported("'" + op + "' on a step count (constants added or subtracted, a float "
              "exponent of a positive constant, are covered)");
}

/// Broadcasts, reshapes, transposes, slices and concatenations of float tensors; none
/// for other instructions.
std::optional<Val> Translator::floatLayout(const hlo::Instruction &inst,
                                           const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  const std::string &base = inst.name;
  std::vector<int64_t> dims = inst.shape.isTuple() ? std::vector<int64_t>{} : inst.shape.dims;
  const std::string &type = inst.shape.type;
  if (op == "broadcast") {
    const Val &x = need(in, 1);
    if (x.kind != Val::Tensor)
      checkTensor(x);
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    if (x.name.empty() && x.dims.empty()) {  // a non-finite constant, still unemitted
      Val v = tensor("", type, dims);
      v.scalarConst = x.scalarConst;
      return v;
    }
    if (!x.scalarConst.empty() && x.dims.empty()) {
      Val v = tensor(emit("constant", {}, {{"value", floatLiteral(x.scalarConst)}}, &dims, base),
                     type, dims);
      v.scalarConst = x.scalarConst;  // a splat: scatters into zeros are recognized
      return v;
    }
    if (bd.size() == dims.size() && x.dims == dims)
      return x;
    return tensor(emit("broadcast", {x.name}, {{"dims", bd}}, &dims, base), type, dims);
  }
  if (op == "reshape" || op == "bitcast") {
    const Val &x = need(in, 1);
    checkTensor(x);
    if (x.dims == dims)
      return x;
    if (op == "bitcast")
      unsupported("a bitcast that changes the shape");
    return tensor(emit("reshape", {x.name}, nullptr, &dims, base), type, dims);
  }
  if (op == "transpose") {
    const Val &x = need(in, 1);
    checkTensor(x);
    std::vector<int64_t> perm = ints(attr("dimensions"), "transpose dimensions");
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= perm[i] == (int64_t)i;
    if (identity)
      return x;
    return tensor(emit("transpose", {x.name}, {{"perm", perm}}, nullptr, base), type, dims);
  }
  if (op == "slice") {
    const Val &x = need(in, 1);
    checkTensor(x);
    std::vector<int64_t> offsets, sizes;
    sliceRanges(offsets, sizes);
    if (sizes == x.dims)
      return x;
    return tensor(emit("slice", {x.name}, {{"offsets", offsets}, {"sizes", sizes}}, nullptr, base),
                  type, dims);
  }
  if (op == "pad")
    return pad(in);
  if (op == "iota" && in.empty()) {  // jnp.arange(n, dtype=float): exact small integers
    int64_t id = ints(attr("iota_dimension"), "iota_dimension").at(0), n = product(dims);
    if (id < 0 || id >= (int64_t)dims.size())
      malformed("iota_dimension out of range");
    if (n > 1 << 16)
      unsupported("a float iota of more than 2^16 elements");
    int64_t stride = 1;
    for (size_t d = id + 1; d < dims.size(); ++d)
      stride *= dims[d];
    json values = json::array();
    for (int64_t e = 0; e < n; ++e)
      values.push_back((e / stride) % dims[id]);
    return tensor(emit("literal", {}, {{"values", values}}, &dims, base), type, dims);
  }
  if (op == "concatenate") {
    std::vector<std::string> names;
    for (auto *v : in) {
      checkTensor(*v);
      names.push_back(v->name);
    }
    std::vector<int64_t> d = ints(attr("dimensions"), "concatenate dimension");
    if (d.size() != 1)
      malformed("concatenate needs one dimension");
    return tensor(emit("concat", names, {{"dim", d[0]}}, nullptr, base), type, dims);
  }
  return std::nullopt;
}

Val Translator::dot(const std::vector<const Val *> &in) {
  if (in.size() != 2)
    malformed("dot takes 2 operands");
  const Val &l = *in[0], &r = *in[1];
  checkTensor(l);
  checkTensor(r);
  auto get = [&](const char *k) {
    auto it = cur->attrs.find(k);
    return it == cur->attrs.end() ? std::vector<int64_t>{} : ints(it->second, k);
  };
  std::vector<int64_t> lb = get("lhs_batch_dims"), rb = get("rhs_batch_dims"),
                       lc = get("lhs_contracting_dims"), rc = get("rhs_contracting_dims");
  if (lb.size() != rb.size() || lc.size() != rc.size())
    malformed("dot dimension lists disagree");
  auto check = [&](const std::vector<int64_t> &ds, size_t rank) {
    for (int64_t d : ds)
      if (d < 0 || d >= (int64_t)rank)
        malformed("dot dimension out of range");
  };
  check(lb, l.dims.size()), check(lc, l.dims.size());
  check(rb, r.dims.size()), check(rc, r.dims.size());
  auto freeDims = [](size_t rank, const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < (int64_t)rank; ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
        f.push_back(d);
    return f;
  };
  std::vector<int64_t> lf = freeDims(l.dims.size(), lb, lc), rf = freeDims(r.dims.size(), rb, rc);
  std::vector<int64_t> out = dimsOf();
  std::string type = cur->shape.type;
  // XLA's dot result: batch dims, then lhs free dims, then rhs free dims; the declared
  // shape must be that, and the paired dims of equal size.
  std::vector<int64_t> expect;
  for (size_t i = 0; i < lb.size(); ++i) {
    if (l.dims[lb[i]] != r.dims[rb[i]])
      malformed("dot batch dimensions of different sizes");
    expect.push_back(l.dims[lb[i]]);
  }
  for (size_t i = 0; i < lc.size(); ++i)
    if (l.dims[lc[i]] != r.dims[rc[i]])
      malformed("dot contracting dimensions of different sizes");
  for (int64_t d : lf)
    expect.push_back(l.dims[d]);
  for (int64_t d : rf)
    expect.push_back(r.dims[d]);
  if (out != expect)
    malformed("'dot' declares the result shape " + cur->shape.str() + ", but its operands give " +
              hlo::Shape{type, expect, {}}.str());
  if (type != l.type || type != r.type)
    malformed("'dot' declares a " + type + " result of " + l.type + " and " + r.type +
              " operands");
  auto sizeOf = [](const Val &v, const std::vector<int64_t> &ds) {
    int64_t n = 1;
    for (int64_t d : ds)
      n *= v.dims[d];
    return n;
  };
  // The plain matmul: 2-D operands, one contracted dim each, no batch.
  if (lb.empty() && lc.size() == 1 && l.dims.size() == 2 && r.dims.size() == 2)
    return tensor(emit("matmul", {l.name, r.name}, {{"lhs_dim", lc[0]}, {"rhs_dim", rc[0]}},
                       nullptr, cur->name),
                  type, out);
  // Otherwise: lhs to [B, M, K], rhs to [B, K, N] (transposes and reshapes), one
  // batch_matmul, and the result back to [batch..., lhs free..., rhs free...].
  auto arrange = [&](const Val &v, std::vector<int64_t> order, std::vector<int64_t> shape3,
                     const char *what) {
    std::string name = v.name;
    std::vector<int64_t> dims;
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) {
      identity &= order[i] == (int64_t)i;
      dims.push_back(v.dims[order[i]]);
    }
    if (!identity)
      name = emit("transpose", {name}, {{"perm", order}}, nullptr, cur->name + "_" + what + "_t");
    if (dims != shape3)
      name = emit("reshape", {name}, nullptr, &shape3, cur->name + "_" + what + "_r");
    return name;
  };
  int64_t B = sizeOf(l, lb), M = sizeOf(l, lf), K = sizeOf(l, lc), N = sizeOf(r, rf);
  if (sizeOf(r, rb) != B || sizeOf(r, rc) != K)
    malformed("dot operand sizes disagree");
  std::vector<int64_t> lo = lb, ro = rb;
  lo.insert(lo.end(), lf.begin(), lf.end());
  lo.insert(lo.end(), lc.begin(), lc.end());
  ro.insert(ro.end(), rc.begin(), rc.end());
  ro.insert(ro.end(), rf.begin(), rf.end());
  std::string ln = arrange(l, lo, {B, M, K}, "lhs"), rn = arrange(r, ro, {B, K, N}, "rhs");
  std::vector<int64_t> res3 = {B, M, N};
  std::string res = emit("batch_matmul", {ln, rn}, {{"lhs_dim", 2}, {"rhs_dim", 1}}, nullptr,
                         cur->name);
  if (out != res3)
    res = emit("reshape", {res}, nullptr, &out, cur->name + "_r");
  return tensor(res, type, out);
}

void Translator::sliceRanges(std::vector<int64_t> &offsets, std::vector<int64_t> &sizes) {
  std::string s = trim(attr("slice"));
  if (s.size() < 2 || s.front() != '{' || s.back() != '}')
    malformed("malformed slice attribute");
  for (auto &r : hlo::splitTopLevel(s.substr(1, s.size() - 2))) {
    if (r.size() < 2 || r.front() != '[' || r.back() != ']')
      malformed("malformed slice range '" + r + "'");
    std::string range = r.substr(1, r.size() - 2);
    std::replace(range.begin(), range.end(), ':', ',');
    std::vector<int64_t> b = ints(range, "slice range");
    if (b.size() == 3 && b[2] != 1)
      unsupported("a strided slice");
    if (b.size() < 2)
      malformed("malformed slice range '" + r + "'");
    offsets.push_back(b[0]);
    sizes.push_back(b[1] - b[0]);
  }
}

std::vector<size_t> Translator::collectiveAxes() {
  std::string rg = replicaGroupsText(*cur);
  if (!cur->attrs.count("channel_id"))
    unsupported("a cross-replica collective (no channel_id): only cross-partition "
                "collectives are covered");
  return groupAxes(*mesh, parseReplicaGroups(rg, mesh->devices));
}

Val Translator::collective(const std::vector<const Val *> &in) {
  const std::string &op = cur->opcode;
  std::vector<size_t> axes = collectiveAxes();
  if (op == "all-reduce") {
    std::string kind = reductionKind();
    auto one = [&](const Val &x, const std::vector<int64_t> &dims) {
      checkTensor(x);
      if (axes.empty())
        return x;
      return tensor(emit("all_reduce", {x.name}, {{"axes", axisNames(axes)}, {"kind", kind}},
                         nullptr, cur->name),
                    x.type, dims);
    };
    if (!cur->shape.isTuple())
      return one(need(in, 1), cur->shape.dims);
    Val t;
    t.kind = Val::Tuple;
    if (in.size() != cur->shape.elements.size())
      malformed("a tuple all-reduce with mismatched operands");
    for (size_t i = 0; i < in.size(); ++i)
      t.elements.push_back(one(*in[i], cur->shape.elements[i].dims));
    return t;
  }
  const Val &x = need(in, 1);
  checkTensor(x);
  std::vector<int64_t> d = ints(attr("dimensions"), "collective dimension");
  for (int64_t k : d)
    if (k < 0 || k >= (int64_t)x.dims.size())
      malformed("'" + op + "' dimension " + std::to_string(k) + " is out of range for a value of " +
                std::to_string(x.dims.size()) + " dimensions");
  if (d.size() != 1)
    unsupported("'" + op + "' over several dimensions");
  std::vector<int64_t> dims = dimsOf();
  // The declared result is the operand's shape with the collective dimension grown
  // (all-gather) or cut (reduce-scatter) by the group's size, or kept (all-to-all).
  int64_t group = 1;
  for (size_t a : axes)
    group *= mesh->axes[a].size;
  std::vector<int64_t> expect = x.dims;
  if (op == "all-gather" && !checkedMul(expect[d[0]], group, expect[d[0]]))
    malformed("'" + op + "' grows dimension " + std::to_string(d[0]) + " past its limits");
  if (op == "reduce-scatter") {
    if (expect[d[0]] % group != 0)
      malformed("'reduce-scatter' dimension " + std::to_string(d[0]) + " of size " +
                std::to_string(expect[d[0]]) + " does not divide among the " +
                std::to_string(group) + " ranks of a group");
    expect[d[0]] /= group;
  }
  if (dims != expect)
    malformed("'" + op + "' declares the result shape " + cur->shape.str() +
              ", but its operand and replica groups give " +
              hlo::Shape{cur->shape.type, expect, {}}.str());
  if (axes.empty())
    return x;
  if (op == "all-gather")
    return tensor(emit("all_gather", {x.name}, {{"axes", axisNames(axes)}, {"dim", d[0]}}, nullptr,
                       cur->name),
                  x.type, dims);
  if (op == "reduce-scatter")
    return tensor(emit("reduce_scatter", {x.name},
                       {{"axes", axisNames(axes)}, {"dim", d[0]}, {"kind", reductionKind()}},
                       nullptr, cur->name),
                  x.type, dims);
  return tensor(emit("all_to_all", {x.name},
                     {{"axes", axisNames(axes)}, {"split_dim", d[0]}, {"concat_dim", d[0]}},
                     nullptr, cur->name),
                x.type, dims);
}

Val Translator::dynamicSlice(const std::vector<const Val *> &in) {
  if (in.empty())
    malformed("dynamic-slice needs operands");
  const Val &x = *in[0];
  checkTensor(x);
  if (in.size() != x.dims.size() + 1)
    unsupported("dynamic-slice with offsets in one tensor operand");
  std::vector<int64_t> sizes = ints(attr("dynamic_slice_sizes"), "dynamic_slice_sizes");
  if (sizes.size() != x.dims.size())
    malformed("dynamic_slice_sizes has the wrong rank");
  std::string name = x.name;
  std::vector<int64_t> dims = x.dims;
  for (size_t d = 0; d < x.dims.size(); ++d) {
    const Val &o = *in[d + 1];
    if (o.kind != Val::Index || !o.dims.empty())
      unsupported("a dynamic-slice offset that depends on the data");
    if (sizes[d] < 0 || sizes[d] > x.dims[d])
      malformed("dynamic-slice size out of range");
    // XLA clamps every offset into [0, dim - size].
    std::vector<int64_t> off(o.idx.size());
    for (size_t r = 0; r < off.size(); ++r)
      off[r] = std::clamp<int64_t>(o.idx[r][0], 0, x.dims[d] - sizes[d]);
    bool same = std::all_of(off.begin(), off.end(), [&](int64_t v) { return v == off[0]; });
    if (same) {
      if (sizes[d] == x.dims[d])
        continue;
      std::vector<int64_t> offsets(dims.size(), 0), sz = dims;
      offsets[d] = off[0];
      sz[d] = sizes[d];
      name = emit("slice", {name}, {{"offsets", offsets}, {"sizes", sz}}, nullptr, cur->name);
      dims = sz;
      continue;
    }
    // offset(rank) = size x (index of the rank over some mesh axes, major first)
    if (!plan)
      malformed("rank-dependent offsets outside the plan");
    std::vector<size_t> axes;
    std::string why = blockAxes(*mesh, off, sizes[d], x.dims[d], axes);
    if (!why.empty()) {
      // Perhaps over parts of mesh axes that no sharding names: find them on the mesh
      // cut into prime factors, and restart the import with those cuts.
      Mesh fine = primeRefined(*mesh);
      std::vector<size_t> fineAxes;
      if (!newBounds || !blockAxes(fine, off, sizes[d], x.dims[d], fineAxes).empty())
        unsupported(why);
      for (size_t a : fineAxes) {
        newBounds->insert(fine.axes[a].stride);
        newBounds->insert(fine.axes[a].stride * fine.axes[a].size);
      }
      throw Remesh{};
    }
    dims[d] = sizes[d];
    name = emit("shard_slice", {name}, {{"axes", axisNames(axes)}, {"dim", (int64_t)d}}, nullptr,
                cur->name);
  }
  return tensor(name, x.type, dims);
}

/// collective-permute: rank t receives the value of rank src(t). When src permutes mesh
/// coordinates (axis a of the source is axis perm[a] of the receiver), rank t's value is
/// block indexOver(t, perm(A)) of the all-gather over the moved axes A -- exactly what
/// all_gather over A followed by shard_slice over perm(A) computes.
Val Translator::collectivePermute(const std::vector<const Val *> &in) {
  const Val &x = need(in, 1);
  checkTensor(x);
  if (!cur->attrs.count("channel_id"))
    unsupported("a cross-replica collective-permute (no channel_id)");
  std::string pairsText = trim(attr("source_target_pairs"));
  if (pairsText.size() < 2 || pairsText.front() != '{' || pairsText.back() != '}')
    malformed("malformed source_target_pairs");
  std::vector<int64_t> src(mesh->devices, -1);
  for (auto &pr : hlo::splitTopLevel(pairsText.substr(1, pairsText.size() - 2))) {
    std::vector<int64_t> st = ints(pr, "source-target pair");
    if (st.size() != 2 || st[0] < 0 || st[1] < 0 || st[0] >= mesh->devices ||
        st[1] >= mesh->devices)
      malformed("source-target pair out of range");
    if (src[st[1]] != -1)
      malformed("rank " + std::to_string(st[1]) + " receives twice");
    src[st[1]] = st[0];
  }
  std::vector<bool> sent(mesh->devices, false);
  for (int64_t t = 0; t < mesh->devices; ++t) {
    if (src[t] < 0)
      unsupported("a collective-permute in which rank " + std::to_string(t) +
                  " receives nothing (it gets zeros)");
    if (sent[src[t]])
      unsupported("a collective-permute that sends one rank's value twice");
    sent[src[t]] = true;
  }
  std::vector<size_t> perm = coordinatePermutation(*mesh, src);
  if (perm.empty()) {
    Mesh fine = primeRefined(*mesh);
    std::vector<size_t> finePerm = coordinatePermutation(fine, src);
    if (finePerm.empty() || !newBounds)
      unsupported("a collective-permute that does not permute mesh coordinates");
    for (size_t a = 0; a < fine.axes.size(); ++a)
      if (finePerm[a] != a) {
        newBounds->insert(fine.axes[a].stride);
        newBounds->insert(fine.axes[a].stride * fine.axes[a].size);
      }
    throw Remesh{};
  }
  std::vector<size_t> moved, onto;
  for (size_t a = 0; a < perm.size(); ++a)
    if (perm[a] != a) {
      moved.push_back(a);
      onto.push_back(perm[a]);
    }
  if (moved.empty())
    return x;
  std::vector<int64_t> one = x.dims;
  one.insert(one.begin(), 1);
  int64_t k = 1;
  for (size_t a : moved)
    k *= mesh->axes[a].size;
  std::vector<int64_t> gathered = one;
  gathered[0] = k;
  std::string r = emit("reshape", {x.name}, nullptr, &one, cur->name + "_block");
  r = emit("all_gather", {r}, {{"axes", axisNames(moved)}, {"dim", 0}}, nullptr, cur->name + "_gather");
  r = emit("shard_slice", {r}, {{"axes", axisNames(onto)}, {"dim", 0}}, nullptr, cur->name + "_pick");
  r = emit("reshape", {r}, nullptr, &x.dims, cur->name);
  return tensor(r, x.type, x.dims);
}

} // namespace planproof::xla
