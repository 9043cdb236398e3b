//===- XlaTranslator.h - HLO instructions as planproof ops -------*- C++ -*-===//
//
// The part of the XLA importer (XlaImport.h) that gives HLO instructions their meaning:
// one translation for the module before partitioning (the reference) and the one after
// it (the plan, every partition at once). Float tensors become JSON interchange ops;
// integer values are evaluated per partition (partition ids, tables, loop counters) or
// kept symbolic (token ids); what is outside the covered set throws xla::Unsupported.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_XLATRANSLATOR_H
#define PLANPROOF_IMPORT_XLATRANSLATOR_H

#include "Import/XlaMesh.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

namespace planproof::xla {

using json = nlohmann::ordered_json;

/// The most instructions one translation runs, calls and unrolled iterations counted
/// (a few hundred times the largest dump under test).
constexpr int64_t kMaxTranslated = int64_t(1) << 21;
/// The most integer-table entries (8 bytes each, about 2 GiB in all) one translation
/// makes: integer values hold a row per partition.
constexpr int64_t kMaxTableCells = int64_t(1) << 28;

/// The instructions `c` runs once its calls are inlined (each computation's size
/// counted once, memoized over the call DAG; loops counted once per body), saturated
/// just past kMaxTranslated: a dump whose call DAG expands past the bound is refused
/// before anything is translated.
int64_t inlinedSize(const hlo::Module &m, const hlo::Computation &c,
                    std::map<const hlo::Computation *, int64_t> &memo);

bool isFloat(const std::string &t);
bool isInt(const std::string &t);
/// A JSON value name from an HLO name (letters, digits, '_').
std::string sanitize(const std::string &n);
/// A float literal as JSON (non-finite values are unsupported).
json floatLiteral(const std::string &text);
/// The element texts of a literal `{ {1, 2}, {3, 4} }` (or a scalar), flattened.
std::vector<std::string> literalElements(const std::string &raw);
int64_t intLiteral(const std::string &t);
/// The integer parameters of `entry` (by name) that it compares, == or !=, with a
/// negative constant -- through reshapes, copies, conversions and broadcasts: labels
/// that may be an ignored label (-100), with that value (XlaLabels.cpp).
std::map<std::string, int64_t> ignoredLabels(const hlo::Computation &entry);
/// The label below the classes that `labels DIR c` tells apart from them (`DIR` one of
/// LT, LE, GT, GE): the comparison is the same on every class and differs there.
std::optional<int64_t> orderIgnored(const std::string &dir, int64_t c);
/// Whether every use of comparison `cmp` in `c` (of module `m`) is JAX's wrap of a
/// negative index, `select(x < 0, x + n, x)` with x its operand (or a call of `_where`
/// doing it): a guard, not a test for ignored labels.
bool wrapsIndex(const hlo::Module &m, const hlo::Computation &c, const hlo::Instruction &cmp);
/// The other side of a range test that comparison `cmp` (of its operand `k`, x) is one
/// side of -- `x < a | x >= b`, `x >= a & x < b`, a vocabulary shard's rows -- as
/// `x DIR c`, with c when it is a constant; none when no `or`/`and` joins it so.
struct RangeSide {
  std::string dir;
  std::optional<int64_t> c;
};
std::optional<RangeSide> rangePartner(const hlo::Computation &c, const hlo::Instruction &cmp, int k);

/// Thrown when labels turn out to be compared with an ignored label (Translator::
/// lateIgnored): the translation starts again with them ignorable.
struct MoreIgnored {};

struct Val {
  /// Ids: token ids or labels, an integer parameter (a symbolic i64 vector in the spec,
  /// every id in [0, rows) of the tables it indexes), viewed with `dims`, plus `offset`.
  /// Pred: a predicate on float data, held as a 0/1 float tensor `name` (built from
  /// `step`: x > c is step(x - c)).
  /// IdsMask: a predicate on token ids (XlaShards.cpp): `runs[r]` are the ids for which
  /// it holds on rank r; element e of the mask belongs to token e / copies.
  /// Affine: an integer value affine in the element's position (XlaPositions.cpp):
  /// per rank the constant `idx[r][0]`, plus `coeff[d]` times the position along dim d.
  /// PosPred: a predicate on positions, the conjunction of `planes`.
  /// IdsSpread: Ids broadcast along one new dimension `spread` (the first half of
  /// jax.nn.one_hot, `ids[..., None] == iota`); usable only in that comparison.
  /// Count: a scalar integer parameter that is a step count (optax's `count`), the
  /// spec's `index` value `name`, plus constants added; as a float only an exponent.
  enum Kind { Tensor, Index, Tuple, Ids, Pred, IdsMask, Affine, PosPred, IdsSpread, Count } kind = Tensor;
  int64_t spread = -1;              // IdsSpread: the new dimension
  /// Sorted, disjoint, non-adjacent closed runs of ids.
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  std::string name;                 // Tensor: the JSON value; Ids: the i64 vector
  std::string input;                // Ids: the spec input they come from (its bound)
  int64_t offset = 0;               // Ids: added to every id
  std::string type;
  std::vector<int64_t> dims;
  std::string scalarConst;          // Tensor: a float constant's literal, when scalar
  /// Index: [rank][element]; a rank's row of one entry holds every element of the
  /// value (a splat: a constant or a decided predicate at a real model's size is never
  /// written out element by element).
  std::vector<std::vector<int64_t>> idx;
  std::vector<Val> elements;        // Tuple
  /// Ids: a further addend per rank (a vocabulary shard's first row subtracted); empty
  /// when none.
  std::vector<int64_t> shift;
  /// IdsMask: per rank, the ids the predicate holds for. Tensor: a lookup in a shard's
  /// rows by shifted ids, equal to `name` (an `embedding` with the shard's offset) only
  /// for the ids in these runs -- XLA clamps the others into the shard -- and usable
  /// only through a select that zeroes the others; empty for every other value.
  std::vector<Runs> runs;
  /// IdsMask and such a lookup: the ids vector (`name` of the Ids) and elements per token.
  std::string lookupIds;
  int64_t copies = 1;
  /// Tensor with `runs`: the value is `name` on the tokens of those ids and zero on the
  /// others (a select that zeroed them; only a scatter-add by those ids reads it), where
  /// a lookup holds XLA's clamped row there.
  bool zeroed = false;
  /// Ids: a select on a predicate on them replaced some by a value (the user's own
  /// vocabulary-parallel lookup, `where(outside, 0, ids - start)`): on rank r the ids in
  /// `kept[r]` are as above, the others hold `fill[r]` (the index itself). Empty when
  /// no id is replaced.
  std::vector<Runs> kept;
  std::vector<int64_t> fill;
  /// Affine: one coefficient per dimension.
  std::vector<int64_t> coeff;
  /// PosPred: each half-plane holds where `coeff . position + base[rank] >= 0`.
  struct Plane {
    std::vector<int64_t> coeff, base;
  };
  std::vector<Plane> planes;
  /// Ids: labels that may also be the ignored label `ignore` (a value below every class,
  /// -100, that the program compares them with): on each token either a class or that
  /// value. `keptIds` names the spec's second i64 vector, of bound 2, that is 1 on the
  /// tokens whose label is a class and 0 on the ignored ones; the ids vector `name`
  /// holds a class on every token, the one a `where` that replaces the ignored labels
  /// puts there (XlaLabels.cpp).
  bool ignorable = false;
  int64_t ignore = 0;
  std::string keptIds;
  /// Ids: chosen by a select (a negative index wrapped, or ignored labels replaced by a
  /// class), so never below 0: an order comparison with 0 is a bounds check on them.
  bool picked = false;
  /// Pred: the predicate holds exactly on the tokens of ids `keptOf` that are kept (or,
  /// with `keptNeg`, ignored), element e for token e.
  std::string keptOf;
  bool keptNeg = false;
  /// Tensor of an integer type: a whole number held as a real (a count of tokens: a sum
  /// of a predicate), at most `countMax` in absolute value.
  int64_t countMax = 0;
};

/// Element `e` of rank `r` of an Index value (a splat's row has one entry).
inline int64_t idxAt(const Val &v, size_t r, int64_t e) {
  const std::vector<int64_t> &row = v.idx[r];
  return row.size() == 1 ? row[0] : row[e];
}
/// Whether every rank's row of an Index value is one entry (a splat, or a scalar).
inline bool isSplat(const Val &v) {
  for (const auto &row : v.idx)
    if (row.size() != 1)
      return false;
  return true;
}

//===--- The translation ------------------------------------------------------===//

class Translator {
public:
  Translator(const hlo::Module &m, bool plan, const Mesh *mesh)
      : m(m), plan(plan), mesh(mesh), ranks(plan ? mesh->devices : 1) {}

  json ops = json::array();
  std::set<std::string> used;

  std::string fresh(const std::string &base) {
    std::string s = sanitize(base);
    if (!used.count(s)) {
      used.insert(s);
      return s;
    }
    for (int i = 1;; ++i) {
      std::string c = s + "_" + std::to_string(i);
      if (!used.count(c)) {
        used.insert(c);
        return c;
      }
    }
  }

  /// Where the instruction being translated is (for messages), and its user location;
  /// mirrored into *track so that errors are located.
  const hlo::Instruction *cur = nullptr;
  const hlo::Computation *comp = nullptr;  // the one `cur` is in
  const hlo::Instruction **track = nullptr;
  /// Where the plan's translation records mesh cuts it needs (then throws Remesh).
  std::set<int64_t> *newBounds = nullptr;

  json loc() const {
    if (!cur || cur->loc.file.empty() || cur->loc.line <= 0)
      return nullptr;
    // A relative source path is relative to the dump's folder (planproof.xla writes
    // them so); the spec may be written elsewhere, so it gets the resolved path.
    std::string file = cur->loc.file;
    if (file[0] != '/' && file[0] != '<') {
      std::error_code ec;
      auto p = std::filesystem::absolute(std::filesystem::path(m.path).parent_path() / file, ec);
      if (!ec)
        file = p.lexically_normal().string();
    }
    json l = {{"file", file}, {"line", cur->loc.line}};
    if (cur->loc.col > 0)
      l["col"] = cur->loc.col;
    return l;
  }

  std::string emit(const std::string &op, const std::vector<std::string> &operands,
                   json attrs, const std::vector<int64_t> *shape, const std::string &base) {
    if (ops.size() >= 2000000)
      unsupported("the program translates to more than 2 million ops (unrolled loops)");
    json o;
    std::string r = fresh(base);
    o["result"] = r;
    o["op"] = op;
    o["operands"] = operands;
    if (!attrs.is_null() && !attrs.empty())
      o["attrs"] = attrs;
    if (shape)
      o["shape"] = *shape;
    json l = loc();
    if (!l.is_null())
      o["loc"] = l;
    ops.push_back(o);
    return r;
  }

  Val tensor(const std::string &name, const std::string &type, std::vector<int64_t> dims) {
    Val v;
    v.kind = Val::Tensor;
    v.name = name;
    v.type = type;
    v.dims = std::move(dims);
    return v;
  }

  /// Runs computation `c` on `args`; returns its root's value. Calls nest at most 64.
  Val run(const hlo::Computation &c, const std::vector<Val> &args, int depth) {
    if (depth > 64)
      unsupported("calls nested more than 64 deep");
    const hlo::Computation *outer = comp;
    comp = &c;
    std::map<std::string, Val> env;
    for (auto &inst : c.insts) {
      cur = &inst;
      if (track)
        *track = &inst;
      // Counted work: calls and loops are unrolled, and a dump can ask for far more
      // than it is long (computations calling the next twice, 24 deep).
      if (++translated > kMaxTranslated)
        unsupported("a program of more than " + std::to_string(kMaxTranslated) +
                    " instructions once its calls and loops are unrolled");
      std::vector<const Val *> in;
      for (auto &o : inst.operands) {
        auto it = env.find(o);
        if (it == env.end())
          malformed("operand '" + o + "' is not defined before its use");
        in.push_back(&it->second);
      }
      const Val &made = env[inst.name] = translate(inst, in, args, depth);
      // What the translation computed must be what the dump declares: a result shape
      // its operands do not give is a malformed dump, not a spec to write.
      if (made.kind == Val::Tensor && !inst.shape.isTuple() && made.dims != inst.shape.dims)
        malformed("'" + inst.opcode + "' declares the result shape " + inst.shape.str() +
                  ", but its operands give " + hlo::Shape{inst.shape.type, made.dims, {}}.str());
      // (A consistent empty value: valid HLO that planproof does not cover.)
      if (hasZeroDim(inst.shape))
        unsupported("a value with a zero-size dimension (" + inst.shape.str() +
                    "): an empty tensor has nothing to verify");
      // Counted memory: integer values are tables of a row per partition, and a dump at
      // tens of thousands of partitions can ask for gigabytes of them.
      tableCells += cellsOf(made);
      if (tableCells > kMaxTableCells)
        unsupported("integer values of more than " + std::to_string(kMaxTableCells) +
                    " entries in all over the " + std::to_string(ranks) +
                    " partitions (more memory than an import may take)");
    }
    comp = outer;
    return env.at(c.root()->name);
  }

private:
  const hlo::Module &m;
  bool plan;
  const Mesh *mesh;
  int64_t ranks;

  const Val &need(const std::vector<const Val *> &in, size_t n) {
    if (in.size() != n)
      malformed("'" + cur->opcode + "' takes " + std::to_string(n) + " operands, not " +
                std::to_string(in.size()));
    return *in[0];
  }
  const std::string &attr(const char *key) {
    auto it = cur->attrs.find(key);
    if (it == cur->attrs.end())
      malformed("'" + cur->opcode + "' needs the attribute " + key);
    return it->second;
  }
  std::vector<int64_t> dimsOf() {
    if (cur->shape.isTuple())
      malformed("'" + cur->opcode + "' cannot have a tuple shape");
    return cur->shape.dims;
  }
  void checkTensor(const Val &v) {
    if (v.kind != Val::Tensor)
      unsupported("'" + cur->opcode + "' on an integer or tuple value (" + cur->shape.str() + ")");
    if (v.name.empty())
      unsupported("'" + cur->opcode + "' on the non-finite constant " + v.scalarConst);
    checkUnmasked({&v});
  }
  /// A non-finite constant is kept unemitted (no JSON number denotes it); it may only
  /// start a max reduction or be the neutral side of maximum/minimum.
  static bool isConst(const Val &v, const char *text) {
    return v.kind == Val::Tensor && trim(v.scalarConst) == text;
  }

  /// The kind of a reduction computation: "sum" or "max" (hlo::reducerOpcode: exactly
  /// add or maximum of its two parameters).
  std::string reductionKind() {
    std::string why, how = hlo::reducerOpcode(m, attr("to_apply"), why);
    if (how.empty())
      unsupported(why);
    if (how == "add")
      return "sum";
    if (how == "maximum")
      return "max";
    unsupported("a reduction by '" + how + "'");
  }

  void checkDeclared(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val call(const std::vector<const Val *> &in, int depth);
  std::optional<Val> floatElementwise(const hlo::Instruction &inst,
                                      const std::vector<const Val *> &in);
  std::optional<Val> floatLayout(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val translate(const hlo::Instruction &inst, const std::vector<const Val *> &in,
                const std::vector<Val> &args, int depth);
  Val indexOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val indexSource(const hlo::Instruction &inst, Val v);
  void fullRows(Val &v, int64_t n);
  Val indexBroadcast(const Val &x, Val v);
  Val indexBinary(const std::string &op, const Val &a, const Val &b, Val v);
  Val indexReduce(const std::vector<const Val *> &in, const Val &x, const Val &init, Val v);
  Val dot(const std::vector<const Val *> &in);
  Val pad(const std::vector<const Val *> &in);
  std::optional<Val> maskAsPositions(const Val &p, const std::vector<int64_t> &dims);
  Val idsEqual(const Val &ids, int64_t c, bool negate, const std::vector<int64_t> &dims);
  Val idsSpread(const Val &x, const std::vector<int64_t> &dims);
  Val power(const std::vector<const Val *> &in);
  Val countOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val idsOneHot(const Val &ids, const Val &pos, bool negate);
  std::optional<Val> foldedConstant(const std::string &op, const Val &a, const Val &b,
                                    const std::vector<int64_t> &dims);
  int64_t compareConstants(const std::string &a, const std::string &b, const std::string &dir);
  Val indexToFloat(const Val &x, const std::string &base);
  Val dynamicSlice(const std::vector<const Val *> &in);
  Val select(const std::vector<const Val *> &in);
  Val collectivePermute(const std::vector<const Val *> &in);
  Val idsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val predOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  // Vocabulary shards (XlaShards.cpp).
  std::optional<Val> idsShift(const std::string &op, const std::vector<const Val *> &in);
  Val idsCompare(const Val &ids, const Val &other, std::string dir);
  Val maskOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val maskedSelect(const std::vector<const Val *> &in);
  std::string rankValue(const std::vector<int64_t> &perRank, const std::string &base);
  bool shardOf(const Val &ids, int64_t rows, std::vector<int64_t> &off, std::string &first);
  Val clampedOutside(Val v, const Val &ids, const std::vector<int64_t> &off, int64_t rows,
                     int64_t copies);
  void checkUnmasked(const std::vector<const Val *> &in);
  Val idsFill(const Val &mask, const Val &a, const Val &b);
  Val filledCompare(const Val &ids, const Val &other, const std::string &dir);
  void filledIn(const Val &ids, const std::vector<int64_t> &off, int64_t rows);
  void scatterUpdates(const Val &ids, const Val &upd, const std::vector<int64_t> &off, int64_t rows,
                      int64_t perToken);
  std::optional<Val> carried(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  // Positions (XlaPositions.cpp).
  bool affineOf(const Val &x, Val &out);
  std::optional<Val> positionsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val posPredOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val positionSelect(const std::vector<const Val *> &in);
  std::string oneMinus(const std::string &p, const std::vector<int64_t> &dims);
  std::optional<int64_t> countedTripCount(const hlo::Computation &cond,
                                          const hlo::Computation &body, const Val &init);
  Val whileLoop(const std::vector<const Val *> &in, int depth);
  Val dynamicUpdateSlice(const std::vector<const Val *> &in);
  std::string replaceBlock(const std::string &base, const std::vector<int64_t> &baseDims,
                           const std::string &update, const std::vector<int64_t> &updDims,
                           const std::vector<int64_t> &offsets, size_t from);
  /// Loop iterations unrolled so far (every while of the module together).
  int64_t iterations = 0;
  /// Instructions translated so far, every call and iteration counted (kMaxTranslated).
  int64_t translated = 0;
  /// Integer-table entries made so far (a row's entries and its overhead), counted
  /// against kMaxTableCells. (A tuple's elements were counted when they were made.)
  int64_t tableCells = 0;
  static bool hasZeroDim(const hlo::Shape &s) {
    for (int64_t d : s.dims)
      if (d == 0)
        return true;
    for (const hlo::Shape &e : s.elements)
      if (hasZeroDim(e))
        return true;
    return false;
  }
  static int64_t cellsOf(const Val &v) {
    int64_t n = 0;
    for (const auto &row : v.idx)
      n += (int64_t)row.size() + 4;
    return n;
  }
  Val gather(const std::vector<const Val *> &in);
  Val scatterAdd(const std::vector<const Val *> &in);
  Val idsRun(const Val &x, std::vector<int64_t> offsets, const std::vector<int64_t> &sizes);
  Val idsExchange(const Val &x);
  Val idsPermuteRuns(const Val &x, const std::vector<int64_t> &perm, Val v);
  // Ignored labels and counts of tokens (XlaLabels.cpp).
  Val keptPred(const Val &ids, bool ignored, const std::vector<int64_t> &dims);
  Val labelsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val labelsCompare(const std::vector<const Val *> &in, int k);
  Val labelsSelect(const std::vector<const Val *> &in);
  std::optional<Val> countData(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  /// The `slice={[a:b], ...}` attribute of the current slice: offsets and sizes.
  void sliceRanges(std::vector<int64_t> &offsets, std::vector<int64_t> &sizes);
  std::string oneHot(const Val &ids, int64_t classes, std::vector<int64_t> &off);
  std::vector<int64_t> attrInts(const char *k) {
    auto it = cur->attrs.find(k);
    return it == cur->attrs.end() ? std::vector<int64_t>{} : ints(it->second, k);
  }

public:
  /// The rows an id input indexes (the least over its gathers): its bound.
  std::map<std::string, int64_t> bounds;
  /// The plan's: the reference's bounds (by the plan input's name), which every lookup
  /// must cover -- XLA clamps an out-of-range index where `embedding` gives zeros, so a
  /// lookup in fewer rows than the ids range has no translation.
  std::map<std::string, int64_t> refBounds;
  /// Comparisons decided by assuming bound(ids) <= limit; checked once bounds are known.
  struct BoundLimit {
    std::string ids;
    int64_t limit;
    const hlo::Instruction *at;
  };
  std::vector<BoundLimit> boundLimits;
  /// The classes `where(labels != ignore, labels, fill)` put on ignored tokens (by the
  /// labels' input name); checked once bounds are known: one class per input, in range.
  struct Fill {
    std::string ids;
    int64_t value;
    const hlo::Instruction *at;
  };
  std::vector<Fill> fills;
  /// Where the translation records labels (by input name) found tested for an ignored
  /// label (as ignoredLabels finds them) where the first look missed it -- inside a
  /// loop or a call; it then throws MoreIgnored and the import starts again with them.
  std::map<std::string, int64_t> *lateIgnored = nullptr;
  /// Ids (by input name) compared by order with a constant that every class passes
  /// alike and some value below 0 does not (`labels >= 0`; not a wrap of a negative
  /// index), with that value (orderIgnored): labels that may be an ignored label,
  /// unless they index a table's rows (`rowLookups`: token ids, whose domain is the
  /// rows). Checked once the module is translated (labelsOrderTested).
  /// A comparison that is one side of a range test (`partner`) tests the ids for an
  /// ignored label only when the other side is the same on every class: a range test
  /// of a shard's rows (`labels < 0 | labels >= 2` of 8 classes) says where a class is.
  struct OrderTest {
    int64_t ignored;
    std::optional<RangeSide> partner;
  };
  std::map<std::string, OrderTest> orderTested;
  std::set<std::string> rowLookups;
  /// Throws MoreIgnored, with the labels recorded in lateIgnored, when an ids input in
  /// `orderTested` is tested for an ignored label (XlaLabels.cpp).
  void labelsOrderTested();
  /// Labels (by input name) compared with a constant that tells labels below 0 apart
  /// (`labels != -100`): the spec holds only the classes and the ignored label, and its
  /// verdict assumes that no label is another value below 0; with that ignored label.
  std::map<std::string, int64_t> assumedIgnored;
  /// Throws unsupported, located at the comparison, when a recorded decision is wrong.
  void checkBoundLimits(const std::map<std::string, int64_t> &final, const hlo::Instruction *&at) {
    for (auto &l : boundLimits) {
      auto b = final.find(l.ids);
      if (b == final.end() || b->second > l.limit) {
        at = l.at;
        unsupported("a comparison or clamp of token ids that their range [0, rows) does not decide");
      }
    }
  }
  void useRows(const Val &ids, int64_t rows) {
    auto &b = bounds[ids.input];
    b = b ? std::min(b, rows) : rows;
    auto r = refBounds.find(ids.input);
    if (plan && (r == refBounds.end() || rows < r->second))
      unsupported("a lookup by token ids in " + std::to_string(rows) + " rows, fewer than the "
                  "ids range (XLA clamps an out-of-range id; a vocabulary-sharded lookup is "
                  "not covered)");
  }

private:
  Val collective(const std::vector<const Val *> &in);
  std::vector<size_t> collectiveAxes();
  json axisNames(const std::vector<size_t> &axes) {
    json a = json::array();
    for (size_t x : axes)
      a.push_back(mesh->axes[x].name);
    return a;
  }
};

} // namespace planproof::xla

#endif
