//===- XlaIds.cpp - HLO instructions on token ids ------------------*- C++ -*-===//
//
// The part of the Translator (XlaTranslator.h) that keeps integer token ids symbolic:
// their reshapes, shifts and comparisons decided by their range, the microbatches cut
// from them (slices of contiguous runs, gathers over the mesh), and the gathers and
// scatter-adds that use them (lookups, one-hot picks and their adjoints). Table of
// covered ops: docs/xla.md.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaTranslator.h"

#include "Support/Limits.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace planproof::xla {

namespace {

/// Whether operand dims `xd` (the last one picked from) and index dims `id` pair as in
/// take_along_axis on the last dim: the batching dims `opB` and `idB` matched in order,
/// increasing on both sides, of equal sizes; every other operand dim but the last, and
/// every other index dim but the index vector's (`ivd`), of size 1 (JAX keeps a unit
/// batch dim as a window dim). Then the operand's rows and the ids are in one order.
bool pairedBatch(const std::vector<int64_t> &xd, const std::vector<int64_t> &opB,
                 const std::vector<int64_t> &id, const std::vector<int64_t> &idB, int64_t ivd) {
  int64_t r = xd.size(), ri = id.size();
  if (r < 1 || opB.size() != idB.size())
    return false;
  std::vector<bool> batch(r, false), ibatch(ri, false);
  for (size_t i = 0; i < opB.size(); ++i) {
    if (opB[i] < 0 || opB[i] >= r - 1 || idB[i] < 0 || idB[i] >= ri || idB[i] == ivd ||
        xd[opB[i]] != id[idB[i]] || (i > 0 && (opB[i] <= opB[i - 1] || idB[i] <= idB[i - 1])))
      return false;
    batch[opB[i]] = ibatch[idB[i]] = true;
  }
  for (int64_t d = 0; d + 1 < r; ++d)
    if (!batch[d] && xd[d] != 1)
      return false;
  for (int64_t d = 0; d < ri; ++d)
    if (!ibatch[d] && d != ivd && id[d] != 1)
      return false;
  return true;
}

} // namespace

/// Integer ops on token ids. Ids are assumed in [0, rows) of every table they index (the
/// spec's `bound`), so a comparison with a constant that this range decides (JAX's
/// `ids < 0` wrap-around of negative indices) is that constant predicate; ids keep their
/// shape through reshapes and conversions; anything else on ids is unsupported.
Val Translator::idsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = inst.shape.dims;
  int64_t n = product(dims);
  auto constant = [&](const Val &v, int64_t &c) {
    if (v.kind != Val::Index)
      return false;
    c = v.idx[0].empty() ? 0 : v.idx[0][0];
    for (auto &row : v.idx)
      for (int64_t x : row)
        if (x != c)
          return false;
    return true;
  };
  for (auto *v : in)
    if (v->kind == Val::Ids && v->ignorable)  // labels that may be ignored (XlaLabels.cpp)
      return labelsOp(inst, in);
  for (auto *v : in)
    if (v->kind == Val::IdsSpread) {  // jax.nn.one_hot: `ids[..., None] == iota`
      int k = in[0]->kind == Val::IdsSpread ? 0 : 1;
      std::string dir = op == "compare" ? attr("direction") : "";
      if (in.size() == 2 && (dir == "EQ" || dir == "NE") && in[1 - k]->kind != Val::Ids &&
          in[1 - k]->kind != Val::IdsSpread)
        return idsOneHot(*in[k], *in[1 - k], dir == "NE");
      unsupported("token ids broadcast along a new dimension, used other than compared "
                  "(== or !=) with the positions along it (jax.nn.one_hot)");
    }
  for (auto *v : in)
    if (v->kind == Val::Ids && !v->kept.empty() && op != "reshape" && op != "bitcast" &&
        op != "copy" && op != "convert" && op != "broadcast" && op != "add" &&
        op != "subtract" && op != "compare" && op != "select")
      unsupported("'" + op + "' of token ids partly replaced by a select");
  if (op == "reshape" || op == "bitcast" || op == "copy" || op == "convert" ||
      op == "broadcast") {
    const Val &x = need(in, 1);
    if (product(x.dims) != n && op == "broadcast")
      return idsSpread(x, dims);
    if (product(x.dims) != n)
      unsupported("a broadcast of token ids");
    Val v = x;
    v.dims = dims;
    v.type = inst.shape.type;
    return v;
  }
  if (std::optional<Val> v = idsShift(op, in))  // by a constant, or by partition
    return *v;
  // clamp(lo, ids + offset, hi), max(ids + offset, lo) and min(ids + offset, hi) with
  // constants (jnp.clip lowers to the latter two): the ids themselves when their range
  // [offset, bound - 1 + offset] lies within [lo, hi] (the upper end checked once the
  // bound is known).
  bool clamp = op == "clamp" && in.size() == 3, maxmin = (op == "maximum" || op == "minimum") &&
                                                         in.size() == 2;
  if (clamp || maxmin) {
    int k = clamp ? 1 : in[0]->kind == Val::Ids ? 0 : 1;
    const Val &x = *in[k];
    int64_t lo = INT64_MIN, hi = INT64_MAX, limit = INT64_MAX;
    bool known = x.kind == Val::Ids && x.shift.empty() && x.kept.empty();
    if (clamp)
      known = known && constant(*in[0], lo) && constant(*in[2], hi);
    else
      known = known && constant(*in[1 - k], op == "maximum" ? lo : hi);
    if (known && lo <= x.offset &&
        (hi == INT64_MAX ||
         (!__builtin_sub_overflow(hi, x.offset, &limit) && checkedAdd(limit, 1, limit)))) {
      if (hi != INT64_MAX)
        boundLimits.push_back({x.input, limit, cur});
      Val v = x;
      v.dims = dims;
      return v;
    }
    unsupported("a " + std::string(clamp ? "clamp" : op) +
                " of token ids that their range [0, rows) does not decide");
  }
  if (op == "compare" && in.size() == 2) {
    // ids + offset (in [offset, inf)) against a constant c: decided when the range is
    // on one side of c.
    int k = in[0]->kind == Val::Ids ? 0 : 1;
    int64_t c;
    std::string dir = attr("direction");
    if (k == 1) {  // c OP ids  ->  ids OP' c
      static const std::map<std::string, std::string> flip = {
          {"LT", "GT"}, {"LE", "GE"}, {"GT", "LT"}, {"GE", "LE"}, {"EQ", "EQ"}, {"NE", "NE"}};
      dir = flip.count(dir) ? flip.at(dir) : dir;
    }
    if (in[k]->kind == Val::Ids && !in[k]->kept.empty() && in[1 - k]->kind != Val::Ids)
      return filledCompare(*in[k], *in[1 - k], dir);
    if (lateIgnored && in[k]->kind == Val::Ids && in[1 - k]->kind == Val::Index &&
        constant(*in[1 - k], c) && in[k]->offset == 0 && in[k]->shift.empty()) {
      // Labels tested for an ignored label: they may be one (XlaLabels.cpp) -- unless
      // a select chose them (never below 0) or the test only wraps a negative index.
      if ((dir == "EQ" || dir == "NE") && c < 0) {
        (*lateIgnored)[in[k]->input] = c;
        throw MoreIgnored{};
      }
      if (std::optional<int64_t> g = orderIgnored(dir, c);
          g && !in[k]->picked && comp && !wrapsIndex(m, *comp, *cur))
        orderTested.emplace(in[k]->input, OrderTest{*g, rangePartner(*comp, *cur, k)});
    }
    // Against a value that differs by partition, or ids shifted so: a predicate on the
    // ids (a vocabulary shard's range, XlaShards.cpp).
    if (in[1 - k]->kind == Val::Index && (!in[k]->shift.empty() || !constant(*in[1 - k], c)))
      return idsCompare(*in[k], *in[1 - k], dir);
    if (in[1 - k]->kind != Val::Ids && constant(*in[1 - k], c)) {
      int64_t lo = in[k]->offset;  // the least value ids + offset takes
      int decided = -1;
      if (dir == "LT" && lo >= c) decided = 0;
      if (dir == "LE" && lo > c) decided = 0;
      if (dir == "GT" && lo > c) decided = 1;
      if (dir == "GE" && lo >= c) decided = 1;
      if (dir == "EQ" && lo > c) decided = 0;
      if (dir == "NE" && lo > c) decided = 1;
      // In the plan the bound is the reference's: the range [lo, bound - 1 + offset]
      // decides the comparison, or it is a predicate on the ids (a vocabulary shard's
      // range, XlaShards.cpp).
      auto b = refBounds.find(in[k]->input);
      int64_t hi;
      if (decided < 0 && plan && b != refBounds.end()) {
        if (!checkedAdd(b->second - 1, lo, hi))
          unsupported("integer overflow in token-id arithmetic");
        bool any = false, all = false;  // some / every id of the range satisfies it
        if (dir == "LT") any = lo < c, all = hi < c;
        if (dir == "LE") any = lo <= c, all = hi <= c;
        if (dir == "GT") any = hi > c, all = lo > c;
        if (dir == "GE") any = hi >= c, all = lo >= c;
        if (dir == "EQ") any = lo <= c && c <= hi, all = lo == c && hi == c;
        if (dir == "NE") any = !(lo == c && hi == c), all = c < lo || c > hi;
        if (all || !any)
          decided = all ? 1 : 0;
        else if (dir != "EQ" && dir != "NE")
          return idsCompare(*in[k], *in[1 - k], dir);
      }
      // Equal to a class within the range (a padding label, `labels != PAD`): that
      // class's one-hot column, in the reference and the plan alike.
      if (decided < 0 && (dir == "EQ" || dir == "NE"))
        return idsEqual(*in[k], c, dir == "NE", dims);
      // Against the upper end (a bounds check, `ids <= rows - 1`): decided by the bound,
      // which the gathers fix later; the decision is recorded and checked at the end
      // (every id + offset <= c  iff  bound + offset - 1 <= c).
      int64_t limit, c1;  // the decision holds iff bound <= limit
      if (decided < 0 && (dir == "LE" || dir == "GT") && checkedAdd(c, 1, c1) &&
          !__builtin_sub_overflow(c1, in[k]->offset, &limit)) {
        decided = dir == "LE" ? 1 : 0;
        boundLimits.push_back({in[k]->input, limit, cur});
      } else if (decided < 0 && (dir == "LT" || dir == "GE") && !__builtin_sub_overflow(c, in[k]->offset, &limit)) {
        decided = dir == "LT" ? 1 : 0;
        boundLimits.push_back({in[k]->input, limit, cur});
      }
      if (decided >= 0) {
        Val v;
        v.kind = Val::Index;
        v.type = inst.shape.type;
        v.dims = dims;
        v.idx.assign(ranks, std::vector<int64_t>(1, decided));  // a splat
        return v;
      }
    }
    unsupported("a comparison of token ids that their range [0, rows) does not decide");
  }
  if (op == "select" && in.size() == 3) {
    int64_t c;
    if (constant(*in[0], c)) {
      const Val &pick = c ? *in[1] : *in[2];
      if (pick.kind == Val::Ids) {
        Val v = pick;
        v.dims = dims;
        v.picked = true;
        return v;
      }
    }
    if (in[0]->kind == Val::IdsMask)  // some ids replaced (XlaShards.cpp)
      return idsFill(*in[0], *in[1], *in[2]);
    unsupported("a select between token ids on a predicate that is not constant");
  }
  if (op == "slice" || op == "dynamic-slice") {
    if (in.empty())
      malformed("'" + op + "' needs operands");
    const Val &x = *in[0];
    if (x.kind != Val::Ids)
      unsupported("a slice of token ids at offsets given by token ids");
    std::vector<int64_t> offsets, sizes;
    if (op == "slice") {
      sliceRanges(offsets, sizes);
    } else {
      // By a loop counter (a scan over microbatches): the same offsets on every rank.
      sizes = attrInts("dynamic_slice_sizes");
      if (in.size() != x.dims.size() + 1 || sizes.size() != x.dims.size())
        unsupported("a dynamic-slice of token ids with offsets in one tensor operand");
      for (size_t d = 0; d < x.dims.size(); ++d) {
        int64_t c;
        if (in[d + 1]->kind != Val::Index || product(in[d + 1]->dims) != 1 || !constant(*in[d + 1], c))
          unsupported("a dynamic-slice of token ids whose offsets differ between ranks or "
                      "depend on the data");
        if (sizes[d] < 0 || sizes[d] > x.dims[d])
          malformed("dynamic-slice size out of range");
        offsets.push_back(std::clamp<int64_t>(c, 0, x.dims[d] - sizes[d]));  // as XLA clamps
      }
    }
    return idsRun(x, offsets, sizes);
  }
  if (op == "all-gather" || op == "all-to-all") {
    if (!plan)
      malformed("a collective in the module before partitioning");
    return idsExchange(need(in, 1));
  }
  if (op == "transpose") {
    // Moving unit dims keeps the ids' order (XLA's transposes after an all-to-all).
    const Val &x = need(in, 1);
    std::vector<int64_t> perm = attrInts("dimensions");
    if (perm.size() != x.dims.size())
      malformed("transpose dimensions of the wrong rank");
    std::vector<int64_t> moved;
    for (int64_t p : perm) {
      if (p < 0 || p >= (int64_t)x.dims.size())
        malformed("transpose dimension out of range");
      if (x.dims[p] != 1)
        moved.push_back(p);
    }
    Val v = x;
    v.dims = dims;
    v.type = inst.shape.type;
    if (std::is_sorted(moved.begin(), moved.end()))
      return v;
    return idsPermuteRuns(x, perm, v);
  }
  unsupported("integer HLO op '" + op + "' on token ids");
}

/// A transpose of ids that keeps the dims from some t on in place and permutes those
/// before it: each index of the leading dims names a contiguous run of the vector, and
/// the transpose lists the runs in another order -- slices of the runs, concatenated
/// in the transposed order (XLA's transpose after exchanging microbatches' ids).
Val Translator::idsPermuteRuns(const Val &x, const std::vector<int64_t> &perm, Val v) {
  if (!x.shift.empty())
    unsupported("a transpose of token ids shifted by a per-partition value");
  size_t t = perm.size();  // the trailing dims from t on stay where they are
  while (t > 0 && perm[t - 1] == (int64_t)t - 1)
    --t;
  for (size_t k = 0; k < t; ++k)
    if (perm[k] >= (int64_t)t)
      unsupported("a transpose of token ids that moves a dim into the runs");
  int64_t runs = 1, run = 1;
  for (size_t k = 0; k < x.dims.size(); ++k)
    (k < t ? runs : run) *= x.dims[k];
  if (runs > 4096)
    unsupported("a transpose of token ids in more than 4096 runs");
  std::vector<int64_t> oldStride(t, 1);
  for (int k = (int)t - 2; k >= 0; --k)
    oldStride[k] = oldStride[k + 1] * x.dims[k + 1];
  std::vector<std::string> parts;
  for (int64_t i = 0; i < runs; ++i) {
    // New leading index i (row-major over the transposed dims) -> the old run.
    int64_t rest = i, old = 0;
    for (int k = (int)t - 1; k >= 0; --k) {
      int64_t size = x.dims[perm[k]];
      old += (rest % size) * oldStride[perm[k]];
      rest /= size;
    }
    parts.push_back(emit("slice", {x.name}, {{"offsets", json::array({old * run})},
                                             {"sizes", json::array({run})}},
                         nullptr, cur->name + "_run"));
  }
  v.name = emit("concat", parts, {{"dim", 0}}, nullptr, cur->name);
  return v;
}

/// A slice of ids viewed as `x.dims`: one contiguous run of the id vector (the ids of
/// a microbatch) -- all dims before the cut one taken at one index, all after it whole.
Val Translator::idsRun(const Val &x, std::vector<int64_t> offsets, const std::vector<int64_t> &sizes) {
  size_t r = x.dims.size();
  if (offsets.size() != r || sizes.size() != r)
    malformed("a slice of rank " + std::to_string(sizes.size()) + " of token ids of rank " +
              std::to_string(r));
  for (size_t d = 0; d < r; ++d)
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] > x.dims[d] - sizes[d])
      malformed("slice range out of bounds on dim " + std::to_string(d));
  Val v = x;
  v.dims = sizes;
  v.type = cur->shape.type;
  if (sizes == x.dims)
    return v;
  size_t last = r;  // the last dim not taken whole: every dim before it at one index
  while (last > 0 && sizes[last - 1] == x.dims[last - 1])
    --last;
  for (size_t d = 0; d + 1 < last; ++d)
    if (sizes[d] != 1)
      unsupported("a slice of token ids that is not one contiguous run of them (rows of a "
                  "microbatch)");
  int64_t start = 0, stride = 1;
  for (size_t d = r; d-- > 0;) {
    start += offsets[d] * stride;
    stride *= x.dims[d];
  }
  int64_t n = product(sizes);
  v.name = emit("slice", {x.name}, {{"offsets", json::array({start})}, {"sizes", json::array({n})}}, nullptr, cur->name);
  return v;
}

/// An all-gather of ids over mesh axes along a dim before which the view has only unit
/// dims: the gather of the id vector (ranks' runs concatenated in group order); an
/// all-to-all likewise, splitting and concatenating that dim.
Val Translator::idsExchange(const Val &x) {
  std::vector<size_t> axes = collectiveAxes();
  std::vector<int64_t> d = attrInts("dimensions"), dims = cur->shape.dims;
  const std::string &op = cur->opcode;
  if (!x.shift.empty())
    unsupported("an " + op + " of token ids shifted by a per-partition value");
  if (d.size() != 1 || d[0] < 0 || d[0] >= (int64_t)x.dims.size() || dims.size() != x.dims.size())
    malformed("an " + op + " of token ids needs one dimension of the operand");
  // Each index of the dims before the moved one is a contiguous run of the vector (the
  // dims from it on are whole in it): the collective moves each run on its own, and
  // the runs are put back in order (XLA's exchange of a view of several microbatches).
  int64_t lead = 1, run = 1;
  for (int64_t k = 0; k < (int64_t)x.dims.size(); ++k)
    (k < d[0] ? lead : run) *= x.dims[k];
  if (lead > 4096)
    unsupported("an " + op + " of token ids in more than 4096 runs");
  Val v = x;
  v.dims = dims;
  v.type = cur->shape.type;
  if (axes.empty())
    return v;
  auto move = [&](const std::string &ids, const std::string &base) {
    if (op == "all-gather")
      return emit("all_gather", {ids}, {{"axes", axisNames(axes)}, {"dim", 0}}, nullptr, base);
    return emit("all_to_all", {ids}, {{"axes", axisNames(axes)}, {"split_dim", 0}, {"concat_dim", 0}},
                nullptr, base);
  };
  if (lead == 1) {
    v.name = move(x.name, cur->name);
    return v;
  }
  std::vector<std::string> moved;
  for (int64_t a = 0; a < lead; ++a) {
    std::string piece = emit("slice", {x.name}, {{"offsets", json::array({a * run})}, {"sizes", json::array({run})}},
                             nullptr, cur->name + "_run");
    moved.push_back(move(piece, cur->name + "_part"));
  }
  v.name = emit("concat", moved, {{"dim", 0}}, nullptr, cur->name);
  return v;
}

/// one_hot(ids) as [T, classes]: the identity's rows selected by id (`one_hot`, the
/// identity never written out); by shifted ids, or in fewer classes than the ids range
/// over, the columns of a vocabulary shard (`off` its first class per partition, else
/// left empty).
/// ids + offset == c (or != c, `negate`) for a constant c their range does not decide:
/// a predicate on the data's side, the 0/1 column of class c - offset of the ids' one-hot
/// (`one_hot` with that offset: [id == c - offset]), viewed as the ids.
Val Translator::idsEqual(const Val &ids, int64_t c, bool negate, const std::vector<int64_t> &dims) {
  int64_t at;
  if (__builtin_sub_overflow(c, ids.offset, &at) || at < 0)
    unsupported("integer overflow in token-id arithmetic");
  int64_t tokens = product(ids.dims);
  if (product(dims) != tokens)
    unsupported("a comparison of token ids broadcast to other shapes");
  std::vector<int64_t> shape = {tokens, 1};
  std::vector<std::string> operands = {ids.name};
  if (at != 0)  // (class 0 is the first column, without an offset)
    operands.push_back(emit("arith.constant", {}, {{"value", at}}, nullptr, cur->name + "_class"));
  std::string p = emit("one_hot", operands, nullptr, &shape, cur->name + "_onehot");
  if (dims != shape)
    p = emit("reshape", {p}, nullptr, &dims, cur->name + "_eq");
  if (negate)
    p = oneMinus(p, dims);
  Val v = tensor(p, "pred", dims);
  v.kind = Val::Pred;
  return v;
}

/// A broadcast of ids `x` to `dims` that keeps their order and adds one dimension of
/// more than one element (and any of one): IdsSpread, to be compared with the positions
/// along the new dimension (jax.nn.one_hot).
Val Translator::idsSpread(const Val &x, const std::vector<int64_t> &dims) {
  std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
  if (bd.size() != x.dims.size())
    malformed("broadcast dimensions do not match the operand's rank");
  std::vector<bool> kept(dims.size(), false);
  for (size_t i = 0; i < bd.size(); ++i) {
    if (bd[i] < 0 || bd[i] >= (int64_t)dims.size() || (i > 0 && bd[i] <= bd[i - 1]))
      unsupported("a broadcast of token ids that reorders them");
    if (dims[bd[i]] != x.dims[i])
      unsupported("a broadcast of token ids that copies some of them");
    kept[bd[i]] = true;
  }
  int64_t spread = -1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (!kept[d] && dims[d] > 1) {
      if (spread >= 0)
        unsupported("a broadcast of token ids along two new dimensions");
      spread = d;
    }
  if (!x.kept.empty())
    unsupported("a broadcast of token ids partly replaced by a select");
  Val v = x;
  v.kind = Val::IdsSpread;
  v.dims = dims;
  v.spread = spread;
  v.type = cur->shape.type;
  return v;
}

/// `ids + offset == pos` (or !=, `negate`) with `ids` spread along dimension s and `pos`
/// the position along s plus a number per partition b[r]: [id == j + b[r] - offset] at
/// position j, the one-hot of the ids with that first class, its class dimension moved
/// to s. Exact for every id (an id outside the classes has a zero row, as in JAX).
Val Translator::idsOneHot(const Val &ids, const Val &pos, bool negate) {
  Val a;
  if (!affineOf(pos, a) || a.dims != ids.dims)
    unsupported("token ids compared with a value that is not their positions along the new "
                "dimension (jax.nn.one_hot)");
  int64_t s = ids.spread, classes = ids.dims[s];
  for (size_t d = 0; d < a.coeff.size(); ++d)
    if (ids.dims[d] > 1 && a.coeff[d] != ((int64_t)d == s ? 1 : 0))
      unsupported("token ids compared with positions other than those along the new "
                  "dimension (jax.nn.one_hot)");
  std::vector<int64_t> first(ranks);
  bool zero = true;
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t shift = ids.shift.empty() ? 0 : ids.shift[r];
    if (__builtin_sub_overflow(a.idx[r][0], ids.offset, &first[r]) ||
        __builtin_sub_overflow(first[r], shift, &first[r]))
      unsupported("integer overflow in token-id arithmetic");
    zero = zero && first[r] == 0;
  }
  std::vector<int64_t> shape = {product(ids.dims) / classes, classes};
  std::vector<std::string> operands = {ids.name};
  if (zero) {
    useRows(ids, classes);
  } else {
    if (!plan || !refBounds.count(ids.input))
      unsupported("a one-hot of shifted token ids outside the partitioned program");
    operands.push_back(rankValue(first, cur->name + "_class"));
  }
  std::string p = emit("one_hot", operands, nullptr, &shape, cur->name + "_onehot");
  if (ids.ignorable) {  // labels that may be ignored: no class equals one, a zero row
    Val kept;
    kept.kind = Val::Ids;
    kept.name = kept.input = ids.keptIds;
    kept.dims = {shape[0]};
    std::string k = idsEqual(kept, 1, false, kept.dims).name;
    k = emit("broadcast", {k}, {{"dims", {0}}}, &shape, cur->name + "_kept");
    p = emit("mul", {p, k}, nullptr, nullptr, cur->name + "_onehot_kept");
  }
  std::vector<int64_t> mid;  // the ids' dims, then the classes
  for (size_t d = 0; d < ids.dims.size(); ++d)
    if ((int64_t)d != s)
      mid.push_back(ids.dims[d]);
  mid.push_back(classes);
  if (mid != shape)
    p = emit("reshape", {p}, nullptr, &mid, cur->name + "_eq");
  if (s + 1 != (int64_t)ids.dims.size()) {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < (int64_t)ids.dims.size(); ++d)
      perm.push_back(d < s ? d : d == s ? (int64_t)ids.dims.size() - 1 : d - 1);
    p = emit("transpose", {p}, {{"perm", perm}}, nullptr, cur->name + "_t");
  }
  if (negate)
    p = oneMinus(p, ids.dims);
  Val v = tensor(p, "pred", ids.dims);
  v.kind = Val::Pred;
  return v;
}

std::string Translator::oneHot(const Val &ids, int64_t classes, std::vector<int64_t> &off) {
  int64_t tokens = 1; // the i64 input is flat: every id of the view
  for (int64_t d : ids.dims)
    tokens *= d;
  std::vector<int64_t> shape = {tokens, classes};
  std::string first;
  off.clear();
  if (shardOf(ids, classes, off, first))
  {
    filledIn(ids, off, classes);
    return emit("one_hot", {ids.name, first}, nullptr, &shape, cur->name + "_onehot");
  }
  useRows(ids, classes);
  filledIn(ids, off, classes);
  return emit("one_hot", {ids.name}, nullptr, &shape, cur->name + "_onehot");
}

/// gather in the two forms JAX emits for token ids:
///  - an embedding lookup (jnp.take(table, ids, axis=0)): rows of the table by id;
///  - take_along_axis on the last dim with the other dims as batch dims (the label's
///    log-probability in a cross-entropy): the sum over that dim of x * one_hot(id).
Val Translator::gather(const std::vector<const Val *> &in) {
  if (in.size() != 2)
    malformed("gather takes 2 operands");
  const Val &x = *in[0];
  checkTensor(x);
  const Val &ids = *in[1];
  if (ids.kind != Val::Ids)
    unsupported("'gather' with indices that are not token ids of an input");
  std::vector<int64_t> out = dimsOf(), collapsed = attrInts("collapsed_slice_dims"),
                       startMap = attrInts("start_index_map"), sizes = attrInts("slice_sizes"),
                       offsetDims = attrInts("offset_dims"),
                       opBatch = attrInts("operand_batching_dims"),
                       idxBatch = attrInts("start_indices_batching_dims");
  int64_t ivd = ints(attr("index_vector_dim"), "index_vector_dim").at(0);
  int64_t r = x.dims.size(), t = product(ids.dims);
  // the index vector has one component
  if (!(ivd == (int64_t)ids.dims.size() ||
        (ivd >= 0 && ivd < (int64_t)ids.dims.size() && ids.dims[ivd] == 1)))
    unsupported("a gather whose index vectors have more than one component");
  if (r >= 2 && opBatch.empty() && collapsed == std::vector<int64_t>{0} &&
      startMap == std::vector<int64_t>{0} && (int64_t)sizes.size() == r && sizes[0] == 1) {
    bool whole = true;
    for (int64_t d = 1; d < r; ++d)
      whole &= sizes[d] == x.dims[d];
    int64_t lead = out.size() - (r - 1);
    for (int64_t k = 0; k < r - 1; ++k)
      whole &= k < (int64_t)offsetDims.size() && offsetDims[k] == lead + k;
    if (whole && (int64_t)offsetDims.size() == r - 1) {
      std::vector<int64_t> rows = {x.dims[0], product(x.dims) / x.dims[0]}, off;
      std::string table = x.name, first;
      if (r > 2)
        table = emit("reshape", {table}, nullptr, &rows, cur->name + "_table");
      // Ids shifted (by partition), or a table of fewer rows than they range over: a
      // lookup in a vocabulary shard, XLA's value only on its rows (XlaShards.cpp).
      bool shard = shardOf(ids, rows[0], off, first);
      rowLookups.insert(ids.input);
      if (!shard)
        useRows(ids, x.dims[0]);
      filledIn(ids, off, rows[0]);
      std::string e = shard ? emit("embedding", {table, ids.name, first}, nullptr, nullptr, cur->name)
                            : emit("embedding", {table, ids.name}, nullptr, nullptr, cur->name);
      std::vector<int64_t> flat = {t, rows[1]};
      if (flat != out)
        e = emit("reshape", {e}, nullptr, &out, cur->name + "_r");
      Val v = tensor(e, x.type, out);
      return shard ? clampedOutside(v, ids, off, rows[0], rows[1]) : v;
    }
  }
  // take_along_axis over the last dim: batch dims paired in order, unit dims aside.
  if (r >= 1 && pairedBatch(x.dims, opBatch, ids.dims, idxBatch, ivd) &&
      collapsed == std::vector<int64_t>{r - 1} && startMap == std::vector<int64_t>{r - 1} &&
      (int64_t)(offsetDims.size() + opBatch.size()) == r - 1 &&
      std::all_of(sizes.begin(), sizes.end(), [](int64_t k) { return k == 1; }) &&
      (int64_t)sizes.size() == r && t == product(x.dims) / x.dims[r - 1] && product(out) == t) {
    int64_t v = x.dims[r - 1];
    std::vector<int64_t> flat = {t, v}, col = {t}, off;
    std::string oh = oneHot(ids, v, off);
    std::string xf = x.dims == flat ? x.name : emit("reshape", {x.name}, nullptr, &flat, cur->name + "_x");
    std::string pick = emit("mul", {xf, oh}, nullptr, nullptr, cur->name + "_pick");
    std::string s = emit("reduce_sum", {pick}, {{"dims", {1}}}, nullptr, cur->name + "_sum");
    if (out != col)
      s = emit("reshape", {s}, nullptr, &out, cur->name);
    // In a shard of the classes (a vocabulary-parallel cross-entropy): XLA's value only
    // for labels in the shard.
    return off.empty() ? tensor(s, x.type, out) : clampedOutside(tensor(s, x.type, out), ids, off, v, 1);
  }
  unsupported("a gather other than an embedding lookup or take_along_axis on the last dim");
}

/// scatter with an add computation, the adjoints of the two gathers above: rows added
/// by id (embedding_grad), or updates placed at each batch position's id (one-hot
/// times the update). Added to the scattered-into operand unless it is zeros.
Val Translator::scatterAdd(const std::vector<const Val *> &in) {
  if (in.size() != 3)
    unsupported("a variadic scatter");
  if (reductionKind() != "sum")
    unsupported("a scatter that does not add");
  const Val &base = *in[0], &upd = *in[2];
  checkTensor(base);
  if (upd.kind != Val::Tensor || upd.name.empty() || (!upd.runs.empty() && !upd.zeroed))
    checkTensor(upd);  // (a value zeroed on some tokens: scatterUpdates)
  const Val &ids = *in[1];
  if (ids.kind != Val::Ids)
    unsupported("'scatter' with indices that are not token ids of an input");
  std::vector<int64_t> window = attrInts("update_window_dims"), inserted = attrInts("inserted_window_dims"),
                       toOperand = attrInts("scatter_dims_to_operand_dims"),
                       inBatch = attrInts("input_batching_dims"),
                       idxBatch = attrInts("scatter_indices_batching_dims");
  int64_t r = base.dims.size(), t = product(ids.dims);
  std::vector<int64_t> ivdAttr = attrInts("index_vector_dim");
  int64_t ivd = ivdAttr.empty() ? (int64_t)ids.dims.size() : ivdAttr[0];
  bool zeros = !base.scalarConst.empty() && floatLiteral(base.scalarConst) == 0.0;
  std::string result;
  if (r >= 2 && inBatch.empty() && inserted == std::vector<int64_t>{0} &&
      toOperand == std::vector<int64_t>{0} && (int64_t)window.size() == r - 1 &&
      product(upd.dims) == t * (product(base.dims) / base.dims[0])) {
    std::vector<int64_t> rows = {base.dims[0], product(base.dims) / base.dims[0]}, flat = {t, rows[1]};
    std::string u = upd.dims == flat ? upd.name : emit("reshape", {upd.name}, nullptr, &flat, cur->name + "_u");
    // By shifted ids (a vocabulary shard's rows): XLA drops the updates whose index is
    // out of bounds, as embedding_grad with the shard's offset skips those ids.
    std::vector<int64_t> off;
    std::string first;
    bool shard = shardOf(ids, rows[0], off, first);
    rowLookups.insert(ids.input);
    if (!shard)
      useRows(ids, base.dims[0]);
    scatterUpdates(ids, upd, off, rows[0], rows[1]);
    if (shard) {
      result = emit("embedding_grad", {u, ids.name, first}, nullptr, &rows, cur->name + "_rows");
    } else {
      result = emit("embedding_grad", {u, ids.name}, nullptr, &rows, cur->name + "_rows");
    }
    if (rows != base.dims)
      result = emit("reshape", {result}, nullptr, &base.dims, cur->name + "_r");
  } else if (r >= 1 && pairedBatch(base.dims, inBatch, ids.dims, idxBatch, ivd) &&
             inserted == std::vector<int64_t>{r - 1} && toOperand == std::vector<int64_t>{r - 1} &&
             (int64_t)(window.size() + inBatch.size()) == r - 1 && product(upd.dims) == t &&
             t == product(base.dims) / base.dims[r - 1]) {
    int64_t v = base.dims[r - 1];
    std::vector<int64_t> flat = {t, v}, col = {t}, off;
    std::string oh = oneHot(ids, v, off);  // dropped updates: the shard's zero columns
    scatterUpdates(ids, upd, off, v, 1);
    std::string u = upd.dims == col ? upd.name : emit("reshape", {upd.name}, nullptr, &col, cur->name + "_u");
    u = emit("broadcast", {u}, {{"dims", {0}}}, &flat, cur->name + "_ub");
    result = emit("mul", {oh, u}, nullptr, nullptr, cur->name + "_place");
    if (flat != base.dims)
      result = emit("reshape", {result}, nullptr, &base.dims, cur->name + "_r");
  } else {
    unsupported("a scatter other than the adjoint of an embedding lookup or of "
                "take_along_axis on the last dim");
  }
  if (!zeros)
    result = emit("add", {base.name, result}, nullptr, nullptr, cur->name);
  return tensor(result, base.type, base.dims);
}

} // namespace planproof::xla
