//===- XlaShards.cpp - lookups in a table split by vocabulary rows -*- C++ -*-===//
//
// The part of the Translator (XlaTranslator.h) that reads XLA's lookup in a table split
// by vocabulary rows. The SPMD partitioner shifts each partition's ids by its shard's
// first row (a per-partition table read at partition-id), gathers from the shard -- a
// gather clamps an index outside the shard into it -- zeroes the tokens outside the
// shard by a select on comparisons of the ids with that first row, and all-reduces; the
// adjoint scatter-adds by the shifted ids. Here:
//   - ids shifted by a per-partition value keep it (`Val::shift`);
//   - a comparison of ids with a per-partition value is a predicate on the ids
//     (`Val::IdsMask`: per partition, the runs of ids it holds for); and, or, not,
//     reduces over copies, broadcasts and reshapes of such predicates are computed on
//     the runs;
//   - a gather by shifted ids is `embedding` with the shard's first row as its offset
//     (an index value: a constant plus a multiple of each mesh coordinate, fitted to
//     the per-partition values and checked on every partition), marked as equal to
//     XLA's gather only on the shard's ids. Only a select that zeroes exactly the other
//     ids of the range [0, bound) makes it a value; any other use is unsupported;
//   - a scatter-add by shifted ids is `embedding_grad` with that offset: XLA drops an
//     update whose index is out of bounds (the partitioner's own adjoint of its lookup
//     relies on it, as does JAX's "fill or drop" mode).
// docs/xla.md states the covered forms.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaTranslator.h"

#include "Support/Limits.h"

#include <algorithm>
#include <limits>

namespace planproof::xla {

namespace {

using Runs = Val::Runs;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
/// Runs per partition beyond which a predicate is unsupported (a mask of a few ranges).
constexpr size_t kMaxRuns = 64;

/// Sorted, merged (overlapping or adjacent runs joined), empty runs dropped.
Runs normalized(Runs r) {
  r.erase(std::remove_if(r.begin(), r.end(), [](auto &p) { return p.first > p.second; }), r.end());
  std::sort(r.begin(), r.end());
  Runs out;
  for (auto &p : r) {
    if (!out.empty() && (out.back().second == kMax || p.first <= out.back().second + 1)) {
      out.back().second = std::max(out.back().second, p.second);
      continue;
    }
    out.push_back(p);
  }
  if (out.size() > kMaxRuns)
    unsupported("a predicate on token ids of more than " + std::to_string(kMaxRuns) +
                " ranges of ids");
  return out;
}

Runs complement(const Runs &r) {
  Runs out;
  int64_t from = kMin;
  bool open = true;  // ids from `from` on are not covered yet
  for (auto &p : r) {
    if (p.first > from)
      out.push_back({from, p.first - 1});
    if (p.second == kMax) {
      open = false;
      break;
    }
    from = p.second + 1;
  }
  if (open)
    out.push_back({from, kMax});
  return normalized(out);
}

Runs intersect(const Runs &a, const Runs &b) {
  Runs out;
  for (auto &p : a)
    for (auto &q : b)
      out.push_back({std::max(p.first, q.first), std::min(p.second, q.second)});
  return normalized(out);
}

Runs unite(const Runs &a, const Runs &b) {
  Runs out = a;
  out.insert(out.end(), b.begin(), b.end());
  return normalized(out);
}

std::string runsText(const Runs &r) {
  if (r.empty())
    return "no id";
  std::string s;
  for (auto &p : r) {
    if (!s.empty())
      s += ", ";
    auto end = [](int64_t x) { return x == kMin ? std::string("-inf") : x == kMax ? std::string("inf") : std::to_string(x); };
    s += "[" + end(p.first) + ", " + end(p.second) + "]";
  }
  return s;
}

/// The value every element of each partition's row holds, when each row is uniform.
bool perPartition(const Val &v, std::vector<int64_t> &out) {
  if (v.kind != Val::Index)
    return false;
  out.clear();
  for (auto &row : v.idx) {
    if (row.empty())
      return false;
    for (int64_t x : row)
      if (x != row[0])
        return false;
    out.push_back(row[0]);
  }
  return true;
}

/// The values v for which `v DIR y` holds.
Runs dirRuns(const std::string &dir, int64_t y) {
  Runs runs;
  if (dir == "LT") runs = {{kMin, y == kMin ? kMin : y - 1}};
  else if (dir == "LE") runs = {{kMin, y}};
  else if (dir == "GT") runs = {{y == kMax ? kMax : y + 1, kMax}};
  else if (dir == "GE") runs = {{y, kMax}};
  else if (dir == "EQ" || dir == "NE") runs = {{y, y}};
  else malformed("unknown compare direction '" + dir + "'");
  if ((dir == "LT" && y == kMin) || (dir == "GT" && y == kMax))
    runs.clear();  // no value is below the least or above the greatest
  return dir == "NE" ? complement(normalized(runs)) : normalized(runs);
}

/// Each run moved by `add`.
Runs moved(const Runs &r, int64_t add) {
  Runs out;
  for (auto &p : r) {
    std::pair<int64_t, int64_t> q;
    if (!checkedAdd(p.first, add, q.first) || !checkedAdd(p.second, add, q.second))
      unsupported("integer overflow in token-id arithmetic");
    out.push_back(q);
  }
  return out;
}

/// The ids of `range` in rank r's shard of `rows` rows from `off[r]` (every id of it
/// when `off` is empty: no shard).
Runs shardIds(const std::vector<int64_t> &off, int64_t rows, int64_t r, const Runs &range) {
  if (off.empty())
    return range;
  int64_t last;
  if (!checkedAdd(off[r], rows - 1, last))
    unsupported("integer overflow in a vocabulary shard's rows");
  return intersect({{off[r], last}}, range);
}

} // namespace

/// ids + x or ids - x, x an integer value uniform on each partition: the ids shifted by
/// it (a constant joins `offset`; a value that differs by partition joins `shift`).
std::optional<Val> Translator::idsShift(const std::string &op, const std::vector<const Val *> &in) {
  if ((op != "add" && op != "subtract") || in.size() != 2)
    return std::nullopt;
  int k = in[0]->kind == Val::Ids ? 0 : 1;
  if (op == "subtract" && k != 0)
    return std::nullopt;  // x - ids: the ids negated
  std::vector<int64_t> x;
  if (in[k]->kind != Val::Ids || !perPartition(*in[1 - k], x))
    return std::nullopt;
  Val v = *in[k];
  v.dims = cur->shape.dims;
  v.type = cur->shape.type;
  if (v.shift.empty())
    v.shift.assign(ranks, 0);
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t d = op == "add" ? x[r] : 0;
    if (op == "subtract" && __builtin_sub_overflow(int64_t(0), x[r], &d))
      unsupported("integer overflow in token-id arithmetic");
    if (!checkedAdd(v.shift[r], d, v.shift[r]) || (!v.fill.empty() && !checkedAdd(v.fill[r], d, v.fill[r])))
      unsupported("integer overflow in token-id arithmetic");
  }
  // A shift the same on every partition is an offset.
  if (std::all_of(v.shift.begin(), v.shift.end(), [&](int64_t s) { return s == v.shift[0]; })) {
    if (!checkedAdd(v.offset, v.shift[0], v.offset))
      unsupported("integer overflow in token-id arithmetic");
    v.shift.clear();
  }
  return v;
}

/// ids DIR other, `other` uniform on each partition: per partition, the runs of ids the
/// comparison holds for (`dir` with the ids on the left).
Val Translator::idsCompare(const Val &ids, const Val &other, std::string dir) {
  std::vector<int64_t> x;
  if (!perPartition(other, x))
    unsupported("a comparison of token ids with values that differ within a partition");
  Val v;
  v.kind = Val::IdsMask;
  v.type = cur->shape.type;
  v.dims = cur->shape.dims;
  v.lookupIds = ids.name;
  v.input = ids.input;
  v.runs.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    // id + offset + shift DIR x  <=>  id DIR y
    int64_t y, add = 0;
    if (!checkedAdd(ids.offset, ids.shift.empty() ? 0 : ids.shift[r], add) ||
        __builtin_sub_overflow(x[r], add, &y))
      unsupported("integer overflow in token-id arithmetic");
    v.runs[r] = dirRuns(dir, y);
  }
  return v;
}

/// Logic and shape ops on masks of token ids (see the file comment).
Val Translator::maskOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = dimsOf();
  const Val *mask = nullptr;
  for (auto *v : in)
    if (v->kind == Val::IdsMask)
      mask = v;
  Val v = *mask;
  v.dims = dims;
  v.type = inst.shape.type;
  if (op == "not") {
    for (auto &r : v.runs)
      r = complement(r);
    return v;
  }
  if ((op == "and" || op == "or") && in.size() == 2) {
    std::vector<Runs> side[2];
    for (int k = 0; k < 2; ++k) {
      std::vector<int64_t> x;
      if (in[k]->kind == Val::IdsMask) {
        if (in[k]->lookupIds != mask->lookupIds || in[k]->copies != mask->copies)
          unsupported("'" + op + "' of predicates on different token ids");
        side[k] = in[k]->runs;
      } else if (perPartition(*in[k], x)) {  // true or false on the whole partition
        for (int64_t r = 0; r < ranks; ++r)
          side[k].push_back(x[r] ? Runs{{kMin, kMax}} : Runs{});
      } else {
        unsupported("'" + op + "' of a predicate on token ids and values that differ "
                    "within a partition");
      }
    }
    for (int64_t r = 0; r < ranks; ++r)
      v.runs[r] = op == "and" ? intersect(side[0][r], side[1][r]) : unite(side[0][r], side[1][r]);
    return v;
  }
  if (op == "reshape" || op == "bitcast" || op == "copy" ||
      (op == "convert" && inst.shape.type == "pred")) {
    if (in.size() != 1 || product(mask->dims) != product(dims))
      malformed("'" + op + "' changes the element count");
    return v;  // element e still belongs to token e / copies
  }
  if (op == "broadcast" && in.size() == 1) {
    // Operand dims kept as the leading result dims: each token's elements copied along
    // the new trailing dims.
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    if (bd.size() > dims.size())
      malformed("broadcast dimensions do not match the operand's rank");
    for (size_t k = 0; k < bd.size(); ++k)
      if (bd[k] != (int64_t)k || k >= mask->dims.size() || dims[k] != mask->dims[k])
        unsupported("a broadcast of a predicate on token ids other than along new trailing dims");
    if (bd.size() != mask->dims.size())
      malformed("broadcast dimensions do not match the operand's rank");
    int64_t more = 1;
    for (size_t k = bd.size(); k < dims.size(); ++k)
      more *= dims[k];
    if (!checkedMul(v.copies, more, v.copies))
      unsupported("a predicate on token ids of too many elements");
    return v;
  }
  if (op == "reduce" && in.size() == 2 && in[0]->kind == Val::IdsMask) {
    // and/or over copies of each token's predicate: the predicate itself.
    std::string why, how = hlo::reducerOpcode(m, attr("to_apply"), why);
    std::vector<int64_t> init;
    if ((how != "and" && how != "or") || !perPartition(*in[1], init) ||
        std::any_of(init.begin(), init.end(), [&](int64_t b) { return (b != 0) != (how == "and"); }))
      unsupported("a reduce of a predicate on token ids other than and/or from its identity");
    std::vector<int64_t> rd = ints(attr("dimensions"), "reduce dimensions");
    const std::vector<int64_t> &xd = mask->dims;
    // The copies are the dims from `first` on: the shortest suffix whose elements are
    // one token's copies, with the unit dims before it.
    size_t first = xd.size();
    int64_t p = 1;
    while (first > 0 && p < mask->copies && checkedMul(p, xd[first - 1], p))
      --first;
    if (p != mask->copies)
      unsupported("a reduce of a predicate on token ids whose copies are not trailing dims");
    while (first > 0 && xd[first - 1] == 1)
      --first;
    int64_t reduced = 1;
    for (int64_t d : rd) {
      if (d < 0 || d >= (int64_t)xd.size())
        malformed("reduce dimension " + std::to_string(d) + " out of range");
      if ((size_t)d < first)
        unsupported("a reduce of a predicate on token ids across tokens");
      reduced *= xd[d];
    }
    if (reduced == 0 || v.copies % reduced)
      unsupported("a reduce of a predicate on token ids across tokens");
    v.copies /= reduced;
    return v;
  }
  unsupported("'" + op + "' on a predicate on token ids");
}

/// select(mask, 0, lookup) or select(mask, lookup, 0) where the lookup is in a shard's
/// rows and the mask zeroes exactly the ids of [0, bound) outside them: the `embedding`
/// with the shard's offset (which gives zeros there).
Val Translator::maskedSelect(const std::vector<const Val *> &in) {
  const Val &mask = *in[0];
  auto zero = [](const Val &v) {
    return v.kind == Val::Tensor && !v.scalarConst.empty() && v.runs.empty() &&
           floatLiteral(v.scalarConst) == 0.0;
  };
  auto b = refBounds.find(mask.input);
  if (!plan || b == refBounds.end())
    unsupported("a mask of token ids outside the partitioned program");
  Runs range = {{0, b->second - 1}};
  // A mask that every id of the range satisfies, or none, on every partition: one side.
  bool all = true, none = true;
  for (int64_t r = 0; r < ranks; ++r) {
    Runs held = intersect(mask.runs[r], range);
    all &= held == range;
    none &= held.empty();
  }
  if (all || none) {
    const Val &pick = *in[all ? 1 : 2];
    if (pick.kind != Val::Tensor)
      unsupported("a select of float type on values that are not float arrays");
    return pick;  // (a fill value never selected, NaN, is never read)
  }
  auto marked = [](const Val &v) { return !v.runs.empty() && !v.zeroed; };
  auto plain = [](const Val &v) { return v.kind == Val::Tensor && !v.name.empty() && v.runs.empty(); };
  int k = marked(*in[2]) && zero(*in[1]) ? 2 : marked(*in[1]) && zero(*in[2]) ? 1 : 0;
  int z = plain(*in[2]) && zero(*in[1]) ? 2 : plain(*in[1]) && zero(*in[2]) ? 1 : 0;
  if (!k && z && product(mask.dims) == product(dimsOf())) {
    // Another value zeroed on the tokens of some ids (the backward of the user's own
    // masked lookup): `name` where kept, zero elsewhere; read only by a scatter-add
    // by those ids (scatterUpdates).
    Val v = *in[z];
    v.dims = dimsOf();
    v.runs.resize(ranks);
    for (int64_t r = 0; r < ranks; ++r)
      v.runs[r] = z == 1 ? mask.runs[r] : complement(mask.runs[r]);
    v.lookupIds = mask.lookupIds;
    v.input = mask.input;
    v.copies = mask.copies;
    v.zeroed = true;
    return v;
  }
  if (!k)
    unsupported("a select on a comparison of token ids with a per-partition value, other than "
                "zeroing a vocabulary shard's lookup outside its rows or a value read only by "
                "a scatter-add by those ids");
  const Val &lookup = *in[k];
  if (lookup.lookupIds != mask.lookupIds || lookup.copies != mask.copies)
    unsupported("a vocabulary shard's lookup masked by a predicate on other token ids");
  for (int64_t r = 0; r < ranks; ++r) {
    // The ids the select keeps the lookup for must be exactly the shard's.
    Runs keep = intersect(k == 1 ? mask.runs[r] : complement(mask.runs[r]), range);
    Runs want = intersect(lookup.runs[r], range);
    if (keep != want)
      unsupported("a select that keeps a vocabulary shard's lookup for ids " + runsText(keep) +
                  " on partition " + std::to_string(r) + ", where the shard holds ids " +
                  runsText(want) + " of [0, " + std::to_string(b->second) +
                  ") (XLA's gather clamps the others into the shard)");
  }
  Val v = tensor(lookup.name, cur->shape.type, dimsOf());
  return v;
}

/// The index value that is `perRank[r]` on partition r: a constant plus a multiple of
/// each mesh coordinate (fitted at the partitions one step along each axis, checked on
/// every partition), emitted as arith/dist ops.
std::string Translator::rankValue(const std::vector<int64_t> &v, const std::string &base) {
  int64_t c = v.at(0);
  size_t na = plan ? mesh->axes.size() : 0;
  std::vector<int64_t> k(na, 0);
  for (size_t a = 0; a < na; ++a)
    if (mesh->axes[a].size > 1 && mesh->axes[a].stride < ranks &&
        __builtin_sub_overflow(v[mesh->axes[a].stride], c, &k[a]))
      unsupported("integer overflow in a vocabulary shard's first row");
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t acc = c, t;
    for (size_t a = 0; a < na; ++a)
      if (!checkedMul(k[a], mesh->coord(r, a), t) || !checkedAdd(acc, t, acc))
        unsupported("integer overflow in a vocabulary shard's first row");
    if (acc != v[r])
      unsupported("a vocabulary shard's first row that is not a constant plus a multiple of "
                  "each mesh coordinate (partition " + std::to_string(r) + ": " +
                  std::to_string(v[r]) + ")");
  }
  std::string e = emit("arith.constant", {}, {{"value", c}}, nullptr, base + "_first");
  for (size_t a = 0; a < na; ++a) {
    if (!k[a])
      continue;
    const std::string &axis = mesh->axes[a].name;
    std::string i = emit("dist.axis_index", {}, {{"axis", axis}}, nullptr, base + "_" + axis);
    std::string s = emit("arith.constant", {}, {{"value", k[a]}}, nullptr, base + "_step");
    std::string p = emit("arith.muli", {i, s}, nullptr, nullptr, base + "_rows");
    e = emit("arith.addi", {e, p}, nullptr, nullptr, base + "_first");
  }
  return e;
}

/// Whether a lookup by `ids` in `rows` rows (or classes) of the plan is one in a shard
/// of the vocabulary: the ids shifted (by a constant or by partition), or fewer rows
/// than they range over. Then `off` is each partition's first row -- the lookup holds
/// ids [off, off + rows) -- and `first` the index value naming it.
bool Translator::shardOf(const Val &ids, int64_t rows, std::vector<int64_t> &off, std::string &first) {
  auto b = refBounds.find(ids.input);
  bool shifted = ids.offset != 0 || !ids.shift.empty();
  if (!shifted && !(plan && b != refBounds.end() && rows < b->second))
    return false;
  if (!plan || b == refBounds.end())
    unsupported("'" + cur->opcode + "' by shifted token ids outside the partitioned program");
  off.assign(ranks, 0);
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t s;
    if (!checkedAdd(ids.offset, ids.shift.empty() ? 0 : ids.shift[r], s) ||
        __builtin_sub_overflow(int64_t(0), s, &off[r]))
      unsupported("integer overflow in token-id arithmetic");
  }
  first = rankValue(off, cur->name + "_shard");
  return true;
}

/// `v`, a lookup in a shard of `rows` rows starting at `off` (per partition) with
/// `copies` elements per token, marked as XLA's gather only on the shard's ids -- unless
/// the shard covers the ids' whole range on every partition.
Val Translator::clampedOutside(Val v, const Val &ids, const std::vector<int64_t> &off, int64_t rows,
                               int64_t copies) {
  int64_t bound = refBounds.at(ids.input);
  bool covers = true;
  v.runs.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t last;
    if (!checkedAdd(off[r], rows - 1, last))
      unsupported("integer overflow in a vocabulary shard's rows");
    v.runs[r] = {{off[r], last}};
    covers &= off[r] <= 0 && last >= bound - 1;
  }
  if (covers) {
    v.runs.clear();
    return v;
  }
  v.lookupIds = ids.name;
  v.input = ids.input;
  v.copies = copies;
  return v;
}

/// A vocabulary shard's lookup used other than through its mask: its value outside the
/// shard is XLA's clamped row, which no op here states. A value zeroed on some tokens
/// likewise: only a scatter-add by those ids reads it.
void Translator::checkUnmasked(const std::vector<const Val *> &in) {
  for (auto *v : in) {
    if (v->kind != Val::Tensor || v->runs.empty())
      continue;
    if (v->zeroed)
      unsupported("'" + cur->opcode + "' of a value zeroed by a select on a predicate on "
                  "token ids (read here only by a scatter-add by those ids)");
    unsupported("'" + cur->opcode + "' of a lookup in a vocabulary shard's rows before the "
                "select that zeroes the ids outside the shard (XLA's gather clamps them into "
                "the shard)");
  }
}

/// A reshape, bitcast or copy of a lookup in a shard, or of a value zeroed on some
/// tokens: the same marks (element e still belongs to token e / copies).
std::optional<Val> Translator::carried(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  if ((op != "reshape" && op != "bitcast" && op != "copy") || in.size() != 1 ||
      in[0]->kind != Val::Tensor || in[0]->runs.empty())
    return std::nullopt;
  Val plain = *in[0];
  plain.runs.clear();
  std::optional<Val> v = floatLayout(inst, {&plain});
  if (!v || v->kind != Val::Tensor || product(v->dims) != product(in[0]->dims))
    unsupported("'" + op + "' of a lookup in a vocabulary shard's rows or of a value zeroed "
                "on some token ids, changing its element count");
  v->runs = in[0]->runs;
  v->lookupIds = in[0]->lookupIds;
  v->input = in[0]->input;
  v->copies = in[0]->copies;
  v->zeroed = in[0]->zeroed;
  return v;
}

/// select(mask, ids, c) or select(mask, c, ids), the mask a predicate on those ids and
/// c uniform on each partition: the ids with those the select does not keep replaced by
/// c (the user's `where(outside, 0, ids - start)` before a lookup in a shard).
Val Translator::idsFill(const Val &mask, const Val &a, const Val &b) {
  int k = a.kind == Val::Ids ? 1 : b.kind == Val::Ids ? 2 : 0;
  std::vector<int64_t> c;
  if (!k || !perPartition(k == 1 ? b : a, c) || !(k == 1 ? a : b).kept.empty())
    unsupported("a select between token ids on a predicate on them, other than replacing some "
                "by a value uniform on each partition");
  const Val &ids = k == 1 ? a : b;
  if (mask.lookupIds != ids.name || mask.copies != 1 || product(mask.dims) != product(ids.dims))
    unsupported("a select of token ids on a predicate on other token ids");
  Val v = ids;
  v.dims = dimsOf();
  v.type = cur->shape.type;
  v.kept.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r)
    v.kept[r] = k == 1 ? mask.runs[r] : complement(mask.runs[r]);
  v.fill = c;
  return v;
}

/// A comparison of ids partly replaced by a select with a value uniform on each
/// partition: decided per partition by the values the ids of [0, bound) then take (the
/// kept ones shifted, and the fill), or unsupported.
Val Translator::filledCompare(const Val &ids, const Val &other, const std::string &dir) {
  std::vector<int64_t> x;
  auto b = refBounds.find(ids.input);
  if (!plan || b == refBounds.end() || !perPartition(other, x))
    unsupported("a comparison of token ids partly replaced by a select, other than with a "
                "value uniform on each partition");
  Runs range = {{0, b->second - 1}};
  Val v;
  v.kind = Val::Index;
  v.type = cur->shape.type;
  v.dims = dimsOf();
  v.idx.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t add;
    if (!checkedAdd(ids.offset, ids.shift.empty() ? 0 : ids.shift[r], add))
      unsupported("integer overflow in token-id arithmetic");
    Runs values = moved(intersect(ids.kept[r], range), add);
    if (!intersect(complement(ids.kept[r]), range).empty())
      values = unite(values, {{ids.fill[r], ids.fill[r]}});
    Runs yes = dirRuns(dir, x[r]);
    bool any = !intersect(values, yes).empty(), all = intersect(values, complement(yes)).empty();
    if (any && !all)
      unsupported("a comparison of token ids partly replaced by a select that holds for some "
                  "of the values they take on partition " + std::to_string(r) + " (" +
                  runsText(values) + ") and not for others");
    v.idx[r] = {all ? 1 : 0};
  }
  return v;
}

/// A lookup (gather) by ids partly replaced by a select reads XLA's row of the fill for
/// the replaced ones: every id of [0, bound) in the shard's rows (`off[r]` on, `rows` of
/// them; every id when `off` is empty) must be kept -- the others are outside the
/// shard, where the lookup is marked as XLA's clamped row and masked later.
void Translator::filledIn(const Val &ids, const std::vector<int64_t> &off, int64_t rows) {
  if (ids.kept.empty())
    return;
  auto b = refBounds.find(ids.input);
  if (!plan || b == refBounds.end())
    unsupported("a lookup by token ids partly replaced by a select outside the partitioned program");
  Runs range = {{0, b->second - 1}};
  for (int64_t r = 0; r < ranks; ++r) {
    Runs shard = shardIds(off, rows, r, range);
    Runs lost = intersect(shard, complement(ids.kept[r]));
    if (!lost.empty())
      unsupported("a lookup by token ids of which a select replaced ids " + runsText(lost) +
                  " on partition " + std::to_string(r) + ", in the rows it reads");
  }
}

/// A scatter-add by `ids` (in a shard of `rows` rows from `off[r]`, every row when `off`
/// is empty) of `upd` (`perToken` elements per token) is the adjoint op with `upd`'s
/// name exactly when: no id of the shard is replaced (filledIn); where `upd` was zeroed
/// on some tokens, it was not zeroed on any id of the shard (those rows get the update)
/// and only kept ids keep it (a replaced id adds at the fill's row; a kept id outside the
/// shard is out of bounds and dropped, as the adjoint op skips it).
void Translator::scatterUpdates(const Val &ids, const Val &upd, const std::vector<int64_t> &off,
                                int64_t rows, int64_t perToken) {
  filledIn(ids, off, rows);
  auto b = refBounds.find(ids.input);
  if (!upd.zeroed) {
    checkTensor(upd);
    for (int64_t r = 0; r < ranks && !ids.kept.empty(); ++r)  // a replaced id adds at the fill
      if (!intersect({{0, b->second - 1}}, complement(ids.kept[r])).empty())
        unsupported("a scatter-add by token ids partly replaced by a select, of updates not "
                    "zeroed for the replaced ones");
    return;
  }
  if (!plan || b == refBounds.end() || upd.lookupIds != ids.name || upd.copies != perToken)
    unsupported("a scatter-add of a value zeroed on other token ids than it is added by");
  Runs range = {{0, b->second - 1}};
  for (int64_t r = 0; r < ranks; ++r) {
    Runs shard = shardIds(off, rows, r, range);
    Runs held = intersect(upd.runs[r], range);
    Runs kept = ids.kept.empty() ? range : intersect(ids.kept[r], range);
    if (intersect(shard, held) != shard || intersect(held, kept) != held)
      unsupported("a scatter-add by token ids of a value zeroed for ids " +
                  runsText(intersect(range, complement(held))) + " on partition " +
                  std::to_string(r) + ", where the rows it adds to hold ids " + runsText(shard));
  }
}

} // namespace planproof::xla
