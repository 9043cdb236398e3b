//===- PlanGen.cpp - reference and plan of a model configuration ----------===//
//
// The reference and the plan are written by the same layer code: the reference is
// the plan of a mesh with every degree 1 (no collectives, the whole batch, every head
// and expert). The plan's backward pass is one ref.grad of each rank's share of the
// loss (it differentiates through the collectives, docs/moe.md); each weight's
// gradient is then summed over the mesh axes that replicate the weight, or
// reduce-scattered over the data axes under ZeRO-2.
//
//===----------------------------------------------------------------------===//
#include "Plan/PlanGen.h"
#include "Support/Input.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

using nlohmann::json;

namespace planproof::plangen {
namespace {

using Shape = std::vector<int64_t>;

std::string ty(const Shape &s) {
  std::string t = "tensor<";
  for (int64_t d : s)
    t += std::to_string(d) + "x";
  return t + "f32>";
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

std::string list(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string axesList(const std::vector<std::string> &a) {
  std::string s = "[";
  for (size_t i = 0; i < a.size(); ++i)
    s += (i ? ", \"" : "\"") + a[i] + "\"";
  return s + "]";
}

/// One function body: SSA values with their shapes.
struct Body {
  std::vector<std::string> lines;
  std::map<std::string, Shape> shape;
  std::map<std::string, int> uses;

  std::set<std::string> taken;
  /// On a pipelined plan, the stage the ops being written run on (-1: every stage).
  int64_t stage = -1;
  std::string stageAttr() const {
    return stage < 0 ? "" : " {dist.stage = " + std::to_string(stage) + "}";
  }
  /// A fresh SSA name: `base`, else `base_1`, `base_2`, ... (skipping names already
  /// used, including other bases that end in a number).
  std::string name(const std::string &base) {
    int &n = uses[base];
    std::string r = base;
    while (taken.count(r))
      r = base + "_" + std::to_string(++n);
    taken.insert(r);
    return r;
  }
  std::string t(const std::string &v) const { return ty(shape.at(v)); }
  std::string emit(const std::string &base, std::string rhs, Shape s) {
    std::string r = name(base);
    shape[r] = std::move(s);
    if (stage >= 0) {
      size_t at = rhs.find(" : ");
      rhs.insert(at == std::string::npos ? rhs.size() : at, stageAttr());
    }
    lines.push_back("%" + r + " = " + rhs);
    return r;
  }
  void comment(const std::string &c) { lines.push_back("// " + c); }

  std::string matmul(const std::string &r, const std::string &a, const std::string &b,
                     int ld = 1, int rd = 0) {
    Shape sa = shape.at(a), sb = shape.at(b);
    return emit(r, "ref.matmul %" + a + ", %" + b + " contract(" + std::to_string(ld) + ", " +
                       std::to_string(rd) + ") : " + t(a) + ", " + t(b),
                {sa[1 - ld], sb[1 - rd]});
  }
  std::string bmm(const std::string &r, const std::string &a, const std::string &b, int ld, int rd) {
    Shape sa = shape.at(a), sb = shape.at(b);
    return emit(r, "ref.batch_matmul %" + a + ", %" + b + " contract(" + std::to_string(ld) +
                       ", " + std::to_string(rd) + ") : " + t(a) + ", " + t(b),
                {sa[0], sa[3 - ld], sb[3 - rd]});
  }
  std::string reshape(const std::string &r, const std::string &x, Shape s) {
    return emit(r, "ref.reshape %" + x + " : " + t(x) + " -> " + ty(s), s);
  }
  std::string transpose(const std::string &r, const std::string &x, std::vector<int64_t> perm) {
    Shape s;
    for (int64_t p : perm)
      s.push_back(shape.at(x)[p]);
    return emit(r, "ref.transpose %" + x + " perm " + list(perm) + " : " + t(x), s);
  }
  std::string broadcast(const std::string &r, const std::string &x, std::vector<int64_t> dims,
                        Shape s) {
    return emit(r, "ref.broadcast %" + x + " dims " + list(dims) + " : " + t(x) + " -> " + ty(s), s);
  }
  std::string unary(const std::string &op, const std::string &r, const std::string &x,
                    const std::string &attrs = "") {
    return emit(r, "ref." + op + " %" + x + attrs + " : " + t(x), shape.at(x));
  }
  std::string binary(const std::string &op, const std::string &r, const std::string &a,
                     const std::string &b) {
    return emit(r, "ref." + op + " %" + a + ", %" + b + " : " + t(a), shape.at(a));
  }
  std::string scale(const std::string &r, const std::string &x, double f) {
    return emit(r, "ref.scale %" + x + " by " + num(f) + " : " + t(x), shape.at(x));
  }
  std::string norm(const std::string &r, const std::string &x, const std::string &w) {
    return emit(r, "ref.rms_norm %" + x + ", %" + w + " eps 1.0e-5 : " + t(x) + ", " + t(w),
                shape.at(x));
  }
  std::string reduceSum(const std::string &r, const std::string &x, std::vector<int64_t> dims,
                        const std::string &attrs = "") {
    Shape s;
    for (size_t d = 0; d < shape.at(x).size(); ++d)
      if (std::find(dims.begin(), dims.end(), (int64_t)d) == dims.end())
        s.push_back(shape.at(x)[d]);
    return emit(r, "ref.reduce_sum %" + x + " dims " + list(dims) + attrs + " : " + t(x), s);
  }
  std::string slice(const std::string &r, const std::string &x, std::vector<int64_t> off,
                    Shape sizes) {
    return emit(r, "ref.slice %" + x + " offsets " + list(off) + " sizes " + list(sizes) +
                       " : " + t(x),
                sizes);
  }
  std::string concat(const std::string &r, const std::string &a, const std::string &b, int dim) {
    Shape s = shape.at(a);
    s[dim] += shape.at(b)[dim];
    return emit(r, "ref.concat %" + a + ", %" + b + " dim " + std::to_string(dim) + " : " + t(a) +
                       ", " + t(b),
                s);
  }
  // Collectives.
  std::string allReduce(const std::string &r, const std::string &x,
                        const std::vector<std::string> &axes, const std::string &kind = "sum") {
    return emit(r, "dist.all_reduce %" + x + " over " + axesList(axes) + " \"" + kind + "\" : " +
                       t(x) + " -> " + t(x),
                shape.at(x));
  }
  std::string allGather(const std::string &r, const std::string &x,
                        const std::vector<std::string> &axes, int dim, int64_t n, bool zigzag) {
    Shape s = shape.at(x);
    s[dim] *= n;
    return emit(r, "dist.all_gather %" + x + " over " + axesList(axes) + " dim " +
                       std::to_string(dim) + (zigzag ? " zigzag" : "") + " : " + t(x) + " -> " +
                       ty(s),
                s);
  }
  std::string reduceScatter(const std::string &r, const std::string &x,
                            const std::vector<std::string> &axes, int dim, int64_t n) {
    Shape s = shape.at(x);
    s[dim] /= n;
    return emit(r, "dist.reduce_scatter %" + x + " over " + axesList(axes) + " dim " +
                       std::to_string(dim) + " \"sum\" : " + t(x) + " -> " + ty(s),
                s);
  }
  std::string shardSlice(const std::string &r, const std::string &x,
                         const std::vector<std::string> &axes, int dim, int64_t n) {
    Shape s = shape.at(x);
    s[dim] /= n;
    return emit(r, "dist.shard_slice %" + x + " over " + axesList(axes) + " dim " +
                       std::to_string(dim) + " : " + t(x) + " -> " + ty(s),
                s);
  }
  std::string allToAll(const std::string &r, const std::string &x,
                       const std::vector<std::string> &axes, int split, int cat, int64_t n) {
    Shape s = shape.at(x);
    s[split] /= n;
    s[cat] *= n;
    return emit(r, "dist.all_to_all %" + x + " over " + axesList(axes) + " split_dim " +
                       std::to_string(split) + " concat_dim " + std::to_string(cat) + " : " +
                       t(x) + " -> " + ty(s),
                s);
  }
};

/// A weight: its reference shape, and per dimension the mesh axes splitting it.
struct Weight {
  std::string name;
  Shape global;
  std::vector<std::vector<std::string>> split;
  int64_t layer = -1; // -1: the final norm and the LM head
  int64_t stage = 0;  // the pipeline stage holding it
};

/// The sizes one function (reference or plan rank) computes with.
struct Sizes {
  bool plan = false;
  int64_t B = 0, S = 0;        // the function's batch and sequence (local in the plan)
  int64_t Sres = 0;            // sequence of the residual stream (S / tp under SP)
  int64_t H = 0, hd = 0, nh = 0, nkv = 0, ffn = 0, V = 0;
  int64_t E = 0, k = 0, eff = 0, sff = 0, C = 0, groups = 1;
  int64_t cp = 1, tp = 1, ep = 1, Sglobal = 0;
  bool sp = false;
  std::vector<std::string> tokenAxes; // mesh axes splitting the batch (plan only)
  std::vector<std::string> allAxes;
};

struct Generator {
  const Model &m;
  const Parallel &p;
  // Reduced global sizes.
  int64_t B, S, H, hd, nh, nkv, ffn, V, E, k, eff, sff, L, groups, C;
  int64_t v = 1; // model chunks per pipeline stage (interleaved schedule)
  std::vector<std::string> meshAxes;
  std::vector<int64_t> meshShape;
  std::vector<std::string> tokenAxes;
  std::vector<Weight> weights;
  std::vector<bool> moeLayer;

  Generator(const Model &m, const Parallel &p) : m(m), p(p) {}

  bool setup(std::string &err) {
    auto fail = [&](const std::string &e) { return (err = e, false); };
    for (auto [n, v] : {std::pair<const char *, int64_t>{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp},
                        {"ep", p.ep}, {"cp", p.cp}, {"microbatches", p.microbatches}})
      if (v < 1 || v > 64)
        return fail(std::string(n) + " must be between 1 and 64");
    if (p.zero != 0 && p.zero != 1 && p.zero != 2)
      return fail("zero must be 0, 1 or 2 (ZeRO-3 gathers parameters, which the generator "
                  "does not write yet)");
    if (p.sp && p.tp < 2)
      return fail("sp needs tp > 1");
    if (p.sp && p.cp > 1)
      return fail("sp with cp > 1 is not generated yet");
    if (p.ep > 1 && m.experts == 0)
      return fail("ep = " + std::to_string(p.ep) + " but model '" + m.name + "' has no experts");
    if (m.kvHeads < p.tp || m.kvHeads % p.tp != 0)
      return fail("tp = " + std::to_string(p.tp) + " does not divide the " +
                  std::to_string(m.kvHeads) + " KV heads of '" + m.name + "'");
    if (m.experts > 0 && m.experts % p.ep != 0)
      return fail("ep = " + std::to_string(p.ep) + " does not divide the " +
                  std::to_string(m.experts) + " experts of '" + m.name + "'");
    if (p.schedule != "1f1b" && p.schedule != "gpipe" && p.schedule != "interleaved")
      return fail("unknown schedule '" + p.schedule + "' (expected gpipe, 1f1b or interleaved)");
    if (p.chunks < 0 || p.chunks > 8)
      return fail("chunks must be between 1 and 8");
    if (p.chunks > 1 && (p.schedule != "interleaved" || p.pp < 2))
      return fail("chunks = " + std::to_string(p.chunks) +
                  " needs pp > 1 and schedule=interleaved (model chunks per stage)");
    v = p.pp > 1 && p.schedule == "interleaved" ? (p.chunks ? p.chunks : 2) : 1;
    if (v > 1 && p.microbatches % p.pp != 0)
      return fail("the interleaved schedule needs microbatches to be a multiple of pp = " +
                  std::to_string(p.pp) + " (Megatron's virtual pipeline does too)");
    if (p.pp * v > m.layers)
      return fail("pp = " + std::to_string(p.pp) + (v > 1 ? " x " + std::to_string(v) + " chunks" : "") +
                  " needs at least that many layers; '" + m.name + "' has " +
                  std::to_string(m.layers));
    // Reduced sizes: each keeps the divisibility its splits need.
    hd = 2;
    nkv = p.tp;
    nh = nkv * std::min<int64_t>(m.heads / m.kvHeads, 2);
    H = 4;
    ffn = 2 * p.tp;
    V = 3;
    S = std::max<int64_t>(4, 2 * p.cp * (p.sp ? p.tp : 1));
    B = p.dp * p.ep * p.microbatches;
    L = p.layers > 0 ? p.layers : p.pp > 1 ? p.pp * v : std::min<int64_t>(m.layers, 2);
    if (L > 16)
      return fail("layers must be at most 16 for the element engine");
    if (L % (p.pp * v) != 0)
      return fail("layers = " + std::to_string(L) + " must be a multiple of the " +
                  std::to_string(p.pp * v) + " model chunks (pp" +
                  (v > 1 ? " x chunks" : "") + ")");
    E = m.experts > 0 ? std::max<int64_t>(2 * p.ep, 2) : 0;
    k = m.experts > 0 ? std::max<int64_t>(1, std::min<int64_t>(m.topK, E / 2)) : 0;
    eff = 2 * p.tp;
    sff = m.sharedExperts > 0 ? 2 * p.tp : 0;
    groups = p.dp * p.ep * p.cp; // a capacity group: one rank's tokens (tp ranks share them)
    int64_t perGroup = B * S / groups / p.microbatches;
    C = perGroup; // no drops
    if (p.capacityFactor > 0 && E > 0)
      C = std::max<int64_t>(1, (int64_t)std::ceil(p.capacityFactor * perGroup * k / E));
    for (int64_t l = 0; l < L; ++l)
      moeLayer.push_back(m.experts > 0 && l >= std::min(m.firstDenseLayers, L - 1));
    for (auto [n, d] : {std::pair<const char *, int64_t>{"pp", p.pp}, {"dp", p.dp},
                        {"ep", p.ep}, {"cp", p.cp}, {"tp", p.tp}})
      if (d > 1) {
        meshAxes.push_back(n);
        meshShape.push_back(d);
      }
    if (meshAxes.empty()) {
      meshAxes = {"dp"};
      meshShape = {1};
    }
    for (auto [n, v] : {std::pair<const char *, int64_t>{"dp", p.dp}, {"ep", p.ep}})
      if (v > 1)
        tokenAxes.push_back(n);
    return true;
  }

  /// Pipeline: model chunk j (L / (pp * v) consecutive layers) runs on stage j mod pp.
  int64_t chunkLayers() const { return L / (p.pp * v); }
  int64_t stageOfLayer(int64_t l) const { return (l / chunkLayers()) % p.pp; }

  std::vector<std::string> tp() const { return p.tp > 1 ? std::vector<std::string>{"tp"} : std::vector<std::string>{}; }
  std::vector<std::string> ep() const { return p.ep > 1 ? std::vector<std::string>{"ep"} : std::vector<std::string>{}; }

  void addWeights() {
    int64_t layer = -1;
    auto W = [&](std::string n, Shape s, std::vector<std::vector<std::string>> split) {
      weights.push_back({std::move(n), std::move(s), std::move(split), layer,
                         layer < 0 ? p.pp - 1 : stageOfLayer(layer)});
    };
    for (int64_t l = 0; l < L; ++l) {
      layer = l;
      std::string P = "l" + std::to_string(l) + "_";
      W(P + "norm1", {H}, {{}});
      W(P + "wq", {H, nh * hd}, {{}, tp()});
      W(P + "wk", {H, nkv * hd}, {{}, tp()});
      W(P + "wv", {H, nkv * hd}, {{}, tp()});
      W(P + "wo", {nh * hd, H}, {tp(), {}});
      W(P + "norm2", {H}, {{}});
      if (!moeLayer[l]) {
        W(P + "wg", {H, ffn}, {{}, tp()});
        W(P + "wu", {H, ffn}, {{}, tp()});
        W(P + "wd", {ffn, H}, {tp(), {}});
      } else {
        W(P + "router", {H, E}, {{}, {}});
        W(P + "w1", {E, H, eff}, {ep(), {}, tp()});
        W(P + "w2", {E, eff, H}, {ep(), tp(), {}});
        if (sff) {
          W(P + "ws1", {H, sff}, {{}, tp()});
          W(P + "ws2", {sff, H}, {tp(), {}});
        }
      }
    }
    layer = -1;
    W("normf", {H}, {{}});
    W("lm_head", {H, V}, {{}, {}});
  }

  int64_t groupSize(const std::vector<std::string> &axes) const {
    int64_t n = 1;
    for (const std::string &a : axes)
      for (size_t i = 0; i < meshAxes.size(); ++i)
        if (meshAxes[i] == a)
          n *= meshShape[i];
    return n;
  }

  Shape localShape(const Weight &w) const {
    Shape s = w.global;
    for (size_t d = 0; d < s.size(); ++d)
      s[d] /= groupSize(w.split[d]);
    return s;
  }

  static std::string layoutOf(const std::vector<std::vector<std::string>> &dims,
                              const std::vector<bool> &zigzag = {}) {
    std::string s = "#dist.layout<[";
    for (size_t d = 0; d < dims.size(); ++d) {
      s += d ? ", " : "";
      if (dims[d].empty())
        s += "_";
      else if (dims[d].size() == 1)
        s += dims[d][0];
      else {
        s += "(";
        for (size_t i = 0; i < dims[d].size(); ++i)
          s += (i ? ", " : "") + dims[d][i];
        s += ")";
      }
      if (d < zigzag.size() && zigzag[d])
        s += " zigzag";
    }
    return s + "]>";
  }

  /// The sequence positions the rank holds, and the local sizes.
  Sizes sizes(bool plan) const {
    Sizes z;
    z.plan = plan;
    z.H = H;
    z.hd = hd;
    z.V = V;
    z.Sglobal = S;
    z.k = k;
    z.C = C;
    if (!plan) {
      z.B = B;
      z.S = S;
      z.Sres = S;
      z.nh = nh;
      z.nkv = nkv;
      z.ffn = ffn;
      z.E = E;
      z.eff = eff;
      z.sff = sff;
      z.groups = groups * p.microbatches;
      return z;
    }
    z.B = B / (p.dp * p.ep);
    z.S = S / p.cp;
    z.Sres = p.sp ? z.S / p.tp : z.S;
    z.nh = nh / p.tp;
    z.nkv = nkv / p.tp;
    z.ffn = ffn / p.tp;
    z.E = E;
    z.eff = eff / p.tp;
    z.sff = sff / p.tp;
    z.cp = p.cp;
    z.tp = p.tp;
    z.ep = p.ep;
    z.sp = p.sp;
    z.groups = 1;
    z.tokenAxes = tokenAxes;
    z.allAxes = meshAxes;
    return z;
  }

  /// x [B, Sres, H] -> the layer's output; `P` prefixes names.
  std::string layer(Body &b, const Sizes &z, int64_t l, std::string x,
                    std::vector<std::string> &auxTerms) {
    std::string P = "l" + std::to_string(l) + "_";
    auto w = [&](const std::string &n) { return P + n; };
    int64_t Bl = z.B, Sl = z.S, T = Bl * Sl, g = z.nh / z.nkv;
    bool tpOn = z.plan && z.tp > 1, cpOn = z.plan && z.cp > 1;
    // The entry of a tensor-parallel region (Megatron's f): the identity on the
    // replicated input, and in the backward the average of the tp ranks' partial
    // cotangents -- an all_reduce avg, whose adjoint is that average. Every rank then
    // holds 1/tp of the complete cotangent, as it holds 1/tp of the loss.
    auto gatherSeq = [&](const std::string &v) {
      if (z.plan && z.sp)
        return b.allGather(P + "sp_gather", v, {"tp"}, 1, z.tp, false);
      if (tpOn)
        return b.allReduce(P + "tp_entry", v, {"tp"}, "avg");
      return v;
    };
    // A partial-over-tp [T, H] result back to the residual stream [B, Sres, H].
    auto toResidual = [&](const std::string &v, const std::string &n) {
      std::string r = b.reshape(P + n + "_3d", v, {Bl, Sl, z.H});
      if (!tpOn)
        return r;
      if (z.sp)
        return b.reduceScatter(P + n + "_rs", r, {"tp"}, 1, z.tp);
      return b.allReduce(P + n + "_ar", r, {"tp"});
    };
    b.comment("layer " + std::to_string(l) + ": attention");
    std::string h = gatherSeq(b.norm(P + "h1", x, w("norm1")));
    std::string h2 = b.reshape(P + "h1_2d", h, {T, z.H});
    std::string q = b.matmul(P + "q", h2, w("wq"));
    std::string kk = b.matmul(P + "k", h2, w("wk"));
    std::string v = b.matmul(P + "v", h2, w("wv"));
    auto heads = [&](const std::string &t2, int64_t n, const std::string &nm) {
      std::string t4 = b.reshape(P + nm + "_4d", t2, {Bl, Sl, n, z.hd});
      return b.transpose(P + nm + "_h", t4, {0, 2, 1, 3}); // [B, n, S, hd]
    };
    std::string qh = heads(q, z.nh, "q"), kh = heads(kk, z.nkv, "k"), vh = heads(v, z.nkv, "v");
    int64_t Skv = Sl;
    if (cpOn) {
      kh = b.allGather(P + "k_all", kh, {"cp"}, 2, z.cp, true);
      vh = b.allGather(P + "v_all", vh, {"cp"}, 2, z.cp, true);
      Skv = z.Sglobal;
    }
    auto expand = [&](const std::string &t4, const std::string &nm) {
      std::string t5 = b.broadcast(P + nm + "_rep", t4, {0, 1, 3, 4}, {Bl, z.nkv, g, Skv, z.hd});
      return b.reshape(P + nm + "_3", t5, {Bl * z.nh, Skv, z.hd});
    };
    std::string k3 = expand(kh, "k"), v3 = expand(vh, "v");
    std::string q3 = b.reshape(P + "q_3", qh, {Bl * z.nh, Sl, z.hd});
    double scale = 1.0 / std::sqrt((double)z.hd);
    std::string ctx;
    if (cpOn) {
      // Two chunks per rank (p and 2cp-1-p), masked from their global starts.
      int64_t Cq = Sl / 2;
      std::string pos = b.name(P + "cp_rank");
      b.lines.push_back("%" + pos + " = dist.axis_index \"cp\" : index");
      std::string ch = b.name(P + "chunk"), last = b.name(P + "last");
      b.lines.push_back("%" + ch + " = arith.constant " + std::to_string(Cq) + " : index");
      b.lines.push_back("%" + last + " = arith.constant " + std::to_string(2 * z.cp - 1) + " : index");
      std::string s0 = b.name(P + "start0"), mir = b.name(P + "mirror"), s1 = b.name(P + "start1");
      b.lines.push_back("%" + s0 + " = arith.muli %" + pos + ", %" + ch + " : index");
      b.lines.push_back("%" + mir + " = arith.subi %" + last + ", %" + pos + " : index");
      b.lines.push_back("%" + s1 + " = arith.muli %" + mir + ", %" + ch + " : index");
      std::string outs[2];
      for (int j = 0; j < 2; ++j) {
        std::string qj = b.slice(P + "q_c" + std::to_string(j), q3, {0, j * Cq, 0},
                                 {Bl * z.nh, Cq, z.hd});
        std::string sj = b.scale(P + "s_c" + std::to_string(j), b.bmm(P + "scores_c" + std::to_string(j), qj, k3, 2, 2), scale);
        std::string pj = b.emit(P + "p_c" + std::to_string(j),
                                "ref.causal_softmax %" + sj + " offset %" + (j ? s1 : s0) + " : " + b.t(sj),
                                b.shape.at(sj));
        outs[j] = b.bmm(P + "o_c" + std::to_string(j), pj, v3, 2, 1);
      }
      ctx = b.concat(P + "ctx", outs[0], outs[1], 1);
    } else {
      std::string s = b.scale(P + "scaled", b.bmm(P + "scores", q3, k3, 2, 2), scale);
      std::string pr = b.unary("causal_softmax", P + "probs", s);
      ctx = b.bmm(P + "ctx", pr, v3, 2, 1);
    }
    std::string c4 = b.reshape(P + "ctx_4d", ctx, {Bl, z.nh, Sl, z.hd});
    std::string ct = b.transpose(P + "ctx_t", c4, {0, 2, 1, 3});
    std::string c2 = b.reshape(P + "ctx_2d", ct, {T, z.nh * z.hd});
    std::string attn = toResidual(b.matmul(P + "attn", c2, w("wo")), "attn");
    x = b.binary("add", P + "x_attn", x, attn);

    std::string hn = gatherSeq(b.norm(P + "h2", x, w("norm2")));
    std::string hm = b.reshape(P + "h2_2d", hn, {T, z.H});
    if (!moeLayer[l]) {
      b.comment("layer " + std::to_string(l) + ": SwiGLU MLP");
      std::string gt = b.unary("silu", P + "gate_act", b.matmul(P + "gate", hm, w("wg")));
      std::string up = b.matmul(P + "up", hm, w("wu"));
      std::string act = b.binary("mul", P + "act", gt, up);
      std::string down = toResidual(b.matmul(P + "down", act, w("wd")), "mlp");
      return b.binary("add", P + "x_out", x, down);
    }
    b.comment("layer " + std::to_string(l) + ": mixture of experts (top-" + std::to_string(z.k) +
              " of " + std::to_string(z.E) + ", capacity " + std::to_string(z.C) + ")");
    // The reference routes its tokens in the order of the ranks' groups (under cp, a
    // rank's tokens are two zigzag chunks of each sequence), so capacity slots are
    // assigned in the same order; the output is put back in sequence order after.
    std::vector<int64_t> order; // segment starts (rows of hm), in group order
    int64_t seg = 0;
    std::string hmSeq = hm; // the tokens in sequence order (the shared expert's input)
    if (!z.plan && p.cp > 1) {
      int64_t Cq = z.S / (2 * p.cp), rowsPer = z.B / (p.dp * p.ep);
      seg = Cq;
      for (int64_t de = 0; de < p.dp * p.ep; ++de)
        for (int64_t c = 0; c < p.cp; ++c)
          for (int64_t r = de * rowsPer; r < (de + 1) * rowsPer; ++r)
            for (int64_t ch : {c, 2 * p.cp - 1 - c})
              order.push_back(r * z.S + ch * Cq);
      std::string cat;
      for (size_t i = 0; i < order.size(); ++i) {
        std::string piece = b.slice(P + "grp_seg", hm, {order[i], 0}, {Cq, z.H});
        cat = cat.empty() ? piece : b.concat(P + "grp_tokens", cat, piece, 0);
      }
      hm = cat;
    }
    std::string logits = b.matmul(P + "router_logits", hm, w("router"));
    std::string probs = b.unary("softmax", P + "router_probs", logits);
    std::string chosen = b.unary("topk_mask", P + "chosen", logits, " k " + std::to_string(z.k));
    std::string picked = b.binary("mul", P + "picked", probs, chosen);
    std::string psum = b.reduceSum(P + "picked_sum", picked, {1});
    std::string gates = b.binary("div", P + "gates", picked,
                                 b.broadcast(P + "picked_sum_b", psum, {0}, {T, z.E}));
    int64_t slots = z.groups * z.C;
    std::string dispatch = b.emit(P + "dispatch",
                                  "ref.capacity_dispatch %" + chosen + " capacity " +
                                      std::to_string(z.C) + " groups " + std::to_string(z.groups) +
                                      " : " + b.t(chosen),
                                  {T, z.E, slots});
    std::string d2 = b.reshape(P + "dispatch_2d", dispatch, {T, z.E * slots});
    std::string sl2 = b.matmul(P + "slots_2d", d2, hm, 0, 0);
    std::string sl = b.reshape(P + "slots", sl2, {z.E, slots, z.H});
    bool epOn = z.plan && z.ep > 1;
    if (epOn)
      sl = b.allToAll(P + "to_experts", sl, {"ep"}, 0, 1, z.ep);
    std::string h1 = b.bmm(P + "expert_h", sl, w("w1"), 2, 1);
    std::string a1 = b.unary("gelu", P + "expert_act", h1);
    std::string eo = b.bmm(P + "expert_out", a1, w("w2"), 2, 1);
    if (tpOn)
      eo = b.allReduce(P + "expert_out_ar", eo, {"tp"});
    if (epOn)
      eo = b.allToAll(P + "from_experts", eo, {"ep"}, 1, 0, z.ep);
    std::string gb = b.broadcast(P + "gates_b", gates, {0, 1}, {T, z.E, slots});
    std::string comb = b.binary("mul", P + "combine", dispatch, gb);
    std::string comb2 = b.reshape(P + "combine_2d", comb, {T, z.E * slots});
    std::string eo2 = b.reshape(P + "expert_out_2d", eo, {z.E * slots, z.H});
    std::string y = b.matmul(P + "moe_out", comb2, eo2);
    if (!order.empty()) {
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      std::string cat;
      for (int64_t start : sorted) {
        int64_t k = std::find(order.begin(), order.end(), start) - order.begin();
        std::string piece = b.slice(P + "seq_seg", y, {k * seg, 0}, {seg, z.H});
        cat = cat.empty() ? piece : b.concat(P + "moe_seq", cat, piece, 0);
      }
      y = cat;
    }
    // The routed output is complete on every tp rank; back to the residual stream.
    std::string y3 = b.reshape(P + "moe_3d", y, {Bl, Sl, z.H});
    if (z.plan && z.sp)
      y3 = b.shardSlice(P + "moe_sp", y3, {"tp"}, 1, z.tp);
    if (z.sff) {
      std::string sh = b.unary("gelu", P + "shared_act", b.matmul(P + "shared_h", hmSeq, w("ws1")));
      std::string so = toResidual(b.matmul(P + "shared_out", sh, w("ws2")), "shared");
      y3 = b.binary("add", P + "ffn_out", y3, so);
    }
    // Load balancing (Switch): fraction of assignments and mean probability per expert,
    // over every token of the step.
    std::string f = b.reduceSum(P + "f_count", chosen, {0});
    std::string pm = b.reduceSum(P + "p_total", probs, {0});
    std::vector<std::string> statAxes = z.tokenAxes;
    if (z.plan && z.cp > 1)
      statAxes.push_back("cp");
    if (z.plan && !statAxes.empty()) {
      f = b.allReduce(P + "f_count_all", f, statAxes);
      pm = b.allReduce(P + "p_total_all", pm, statAxes);
    }
    int64_t allTokens = B * S / p.microbatches;
    std::string fp = b.binary("mul", P + "fp", b.scale(P + "f", f, 1.0 / (double)(allTokens * z.k)),
                              b.scale(P + "p_mean", pm, 1.0 / (double)allTokens));
    auxTerms.push_back(b.scale(P + "aux", b.reduceSum(P + "fp_sum", fp, {0}), 0.01 * z.E));
    return b.binary("add", P + "x_out", x, y3);
  }

  /// The forward of one microbatch: its cross-entropy sum over the global count, and
  /// (in `aux`) its layers' load-balancing terms.
  std::string step(Body &b, const Sizes &z, const std::string &x, const std::string &labels,
                   const std::string &mask, const std::string &count, const std::string &mb,
                   std::string &ceOut, std::vector<std::string> &aux) {
    std::string h = x;
    for (int64_t l = 0; l < L; ++l)
      h = layer(b, z, l, h, aux);
    return head(b, z, h, labels, mask, count, mb, ceOut);
  }

  /// The final norm, the LM head and the cross-entropy of one microbatch: its sum
  /// (`ceOut`) and the result, that sum over the global count.
  std::string head(Body &b, const Sizes &z, const std::string &h, const std::string &labels,
                   const std::string &mask, const std::string &count, const std::string &mb,
                   std::string &ceOut) {
    b.comment("final norm, LM head, cross-entropy");
    std::string hf = b.norm(mb + "hf", h, "normf");
    if (z.plan && z.sp)
      hf = b.allGather(mb + "hf_gather", hf, {"tp"}, 1, z.tp, false);
    int64_t T = z.B * z.S;
    std::string logits = b.matmul(mb + "logits", b.reshape(mb + "hf_2d", hf, {T, z.H}), "lm_head");
    std::string lab = b.reshape(mb + "labels_2d", labels, {T, z.V});
    std::string msk = b.reshape(mb + "mask_1d", mask, {T});
    ceOut = b.emit(mb + "ce", "ref.cross_entropy_sum %" + logits + ", %" + lab + ", %" + msk +
                                  " : " + b.t(logits) + ", " + b.t(msk),
                   {});
    return b.binary("div", mb + "ce_mean", ceOut, count);
  }

  std::string sumOf(Body &b, const std::string &name, std::vector<std::string> terms) {
    std::string r = terms[0];
    for (size_t i = 1; i < terms.size(); ++i)
      r = b.binary("add", name, r, terms[i]);
    return r;
  }

  /// `, dist.stage = k` for a value held by one pipeline stage (none without pp).
  std::string stageField(int64_t stage) const {
    return p.pp > 1 ? ", dist.stage = " + std::to_string(stage) : "";
  }

  std::string functionArgs(bool plan) {
    std::vector<std::string> args;
    int64_t stage = 0;
    auto arg = [&](const std::string &n, const Shape &global, const Shape &local,
                   const std::string &layout, const std::string &extra = "") {
      if (!plan)
        args.push_back("%" + n + ": " + ty(global) + " {ref.name = \"" + n + "\"" + extra + "}");
      else
        args.push_back("%" + n + ": " + ty(local) + " {dist.value = \"" + n +
                       "\", dist.layout = " + layout + stageField(stage) + "}");
    };
    Sizes z = sizes(true);
    std::vector<std::vector<std::string>> tok = {tokenAxes, {}, {}};
    std::vector<bool> zz = {false, p.cp > 1, false};
    if (p.cp > 1)
      tok[1] = {"cp"};
    std::vector<std::vector<std::string>> res = tok;
    if (p.sp)
      res[1] = {"tp"};
    arg("x", {B, S, H}, {z.B, z.Sres, H}, layoutOf(res, zz));
    stage = p.pp - 1; // the loss's inputs: on the last stage
    arg("labels", {B, S, V}, {z.B, z.S, V}, layoutOf(tok, zz));
    arg("mask", {B, S}, {z.B, z.S}, layoutOf({tok[0], tok[1]}, {false, p.cp > 1}),
        ", ref.bound = 2 : i64");
    for (const Weight &w : weights) {
      stage = w.stage;
      arg(w.name, w.global, localShape(w), layoutOf(w.split));
    }
    std::string s;
    for (size_t i = 0; i < args.size(); ++i)
      s += (i ? ",\n                  " : "") + args[i];
    return s;
  }

  /// Per weight: the gradient output's layout and the reduction producing it.
  std::vector<std::vector<std::string>> gradSplit(const Weight &w, std::vector<std::string> &sum,
                                                  std::vector<std::string> &scatter) const {
    std::vector<std::string> splitting;
    for (auto &d : w.split)
      splitting.insert(splitting.end(), d.begin(), d.end());
    sum.clear();
    scatter.clear();
    for (const std::string &a : meshAxes)
      if (a != "pp" && groupSize({a}) > 1 &&
          std::find(splitting.begin(), splitting.end(), a) == splitting.end())
        sum.push_back(a); // pipeline stages hold different weights: never summed over pp
    auto split = w.split;
    if (p.zero == 2) {
      // ZeRO-2: the data axes reduce-scatter the first dimension when it divides.
      std::vector<std::string> data;
      for (const std::string &a : sum)
        if (a == "dp" || a == "ep" || a == "cp")
          data.push_back(a);
      Shape local = localShape(w);
      if (!data.empty() && local[0] % groupSize(data) == 0) {
        scatter = data;
        std::vector<std::string> rest;
        for (const std::string &a : sum)
          if (std::find(data.begin(), data.end(), a) == data.end())
            rest.push_back(a);
        sum = rest;
        split[0].insert(split[0].end(), data.begin(), data.end());
      }
    }
    return split;
  }

  std::string reference() {
    Body b;
    Sizes z = sizes(false);
    for (const Weight &w : weights)
      b.shape[w.name] = w.global;
    b.shape["x"] = {B, S, H};
    b.shape["labels"] = {B, S, V};
    b.shape["mask"] = {B, S};
    for (auto &[n, sh] : b.shape)
      b.taken.insert(n); // the function's arguments
    std::string count = b.reduceSum("tokens", "mask", {0, 1}, " {ref.role = \"loss-normalization\"}");
    // Microbatch i of the step is microbatch i of every data rank's share of the batch
    // (gradient accumulation: each has its own load-balancing statistics).
    int64_t m = p.microbatches, ranks = p.dp * p.ep, Bl = B / ranks, Bm = Bl / m;
    std::vector<std::string> terms;
    for (int64_t i = 0; i < m; ++i) {
      std::string mb = m > 1 ? "mb" + std::to_string(i) + "_" : "";
      std::string xi = "x", li = "labels", mi = "mask";
      if (m > 1) {
        std::vector<std::string> xs, ls, ms;
        for (int64_t r = 0; r < ranks; ++r) {
          int64_t at = r * Bl + i * Bm;
          xs.push_back(b.slice(mb + "x_r" + std::to_string(r), "x", {at, 0, 0}, {Bm, S, H}));
          ls.push_back(b.slice(mb + "labels_r" + std::to_string(r), "labels", {at, 0, 0}, {Bm, S, V}));
          ms.push_back(b.slice(mb + "mask_r" + std::to_string(r), "mask", {at, 0}, {Bm, S}));
        }
        xi = xs[0], li = ls[0], mi = ms[0];
        for (int64_t r = 1; r < ranks; ++r) {
          xi = b.concat(mb + "x", xi, xs[r], 0);
          li = b.concat(mb + "labels", li, ls[r], 0);
          mi = b.concat(mb + "mask", mi, ms[r], 0);
        }
      }
      Sizes zm = z;
      zm.B = B / m;
      zm.groups = groups;
      std::string ce;
      std::vector<std::string> aux;
      terms.push_back(step(b, zm, xi, li, mi, count, mb, ce, aux));
      terms.insert(terms.end(), aux.begin(), aux.end());
    }
    std::string loss = sumOf(b, "loss_sum", terms);
    std::string lossName = b.scale("loss", loss, 1.0);
    std::string grads, wrt, tys;
    for (const Weight &w : weights) {
      grads += (grads.empty() ? "%d_" : ", %d_") + w.name;
      wrt += (wrt.empty() ? "%" : ", %") + w.name;
      tys += (tys.empty() ? "" : ", ") + ty(w.global);
    }
    b.lines.push_back(grads + " = ref.grad %" + lossName + " wrt " + wrt);
    b.lines.push_back("    : tensor<f32>, " + tys + " -> " + tys);
    std::string outs = "tensor<f32> {ref.name = \"loss\"}";
    for (const Weight &w : weights)
      outs += ", " + ty(w.global) + " {ref.name = \"d_" + w.name + "\"}";
    std::string body;
    for (const std::string &l : b.lines)
      body += "    " + l + "\n";
    return "  func.func @reference(" + functionArgs(false) + ")\n      -> (" + outs +
           ")\n      attributes {ref.reference} {\n" + body + "    return %" + lossName + ", " +
           grads + " : tensor<f32>, " + tys + "\n  }\n\n";
  }

  /// A plan function's body with its arguments (local shapes) declared.
  Body planBody(const Sizes &z) const {
    Body b;
    for (const Weight &w : weights)
      b.shape[w.name] = localShape(w);
    b.shape["x"] = {z.B, z.Sres, H};
    b.shape["labels"] = {z.B, z.S, V};
    b.shape["mask"] = {z.B, z.S};
    for (auto &[n, sh] : b.shape)
      b.taken.insert(n); // the function's arguments
    return b;
  }

  /// The mesh and the plan function around `body`.
  std::string planFunction(const std::vector<std::string> &body, const std::string &outs,
                           const std::string &rets, const std::string &rtys,
                           const std::string &attrs) {
    std::string text;
    for (const std::string &l : body)
      text += "    " + l + "\n";
    std::string shape;
    for (size_t i = 0; i < meshShape.size(); ++i)
      shape += (i ? ", " : "") + std::to_string(meshShape[i]);
    return "  dist.mesh @mesh axes = " + axesList(meshAxes) + " shape = [" + shape + "]\n\n" +
           "  func.func @plan(" + functionArgs(true) + ")\n      -> (" + outs +
           ")\n      attributes {dist.mesh = @mesh" + attrs + "} {\n" + text + "    return " +
           rets + " : " + rtys + "\n  }\n";
  }

  std::string plan() {
    if (p.pp > 1)
      return pipelinePlan();
    Sizes z = sizes(true);
    Body b = planBody(z);
    b.comment("The global count of labelled tokens.");
    std::string count = b.reduceSum("tokens_local", "mask", {0, 1});
    std::vector<std::string> tokenAndCp = tokenAxes;
    if (p.cp > 1)
      tokenAndCp.push_back("cp");
    if (!tokenAndCp.empty())
      count = b.allReduce("tokens", count, tokenAndCp);
    int64_t m = p.microbatches, Bm = z.B / m, ranks = 1;
    for (int64_t n : meshShape)
      ranks *= n;
    std::map<std::string, std::string> acc;
    std::vector<std::string> ces, auxAll;
    for (int64_t i = 0; i < m; ++i) {
      std::string mb = m > 1 ? "mb" + std::to_string(i) + "_" : "";
      Sizes zm = z;
      zm.B = Bm;
      std::string xi = "x", li = "labels", mi = "mask";
      if (m > 1) {
        b.comment("microbatch " + std::to_string(i));
        xi = b.slice(mb + "x", "x", {i * Bm, 0, 0}, {Bm, z.Sres, H});
        li = b.slice(mb + "labels", "labels", {i * Bm, 0, 0}, {Bm, z.S, V});
        mi = b.slice(mb + "mask", "mask", {i * Bm, 0}, {Bm, z.S});
      }
      std::string ce;
      std::vector<std::string> aux;
      std::string ceMean = step(b, zm, xi, li, mi, count, mb, ce, aux);
      ces.push_back(ce);
      auxAll.insert(auxAll.end(), aux.begin(), aux.end());
      // This rank's share of the loss: the tp ranks of a group hold the same tokens
      // (1/tp of its cross-entropy each), and every rank holds the whole load-balancing
      // terms (1/ranks of them each). The shares of all ranks sum to the loss.
      std::vector<std::string> shares = {b.scale(mb + "ce_share", ceMean, 1.0 / (double)p.tp)};
      for (const std::string &a : aux)
        shares.push_back(b.scale(a + "_share", a, 1.0 / (double)ranks));
      std::string part = sumOf(b, mb + "part", shares);
      std::string grads, wrt, tys;
      std::vector<std::string> gs;
      for (const Weight &w : weights) {
        std::string g = b.name("g_" + mb + w.name);
        b.shape[g] = localShape(w);
        gs.push_back(g);
        grads += (grads.empty() ? "%" : ", %") + g;
        wrt += (wrt.empty() ? "%" : ", %") + w.name;
        tys += (tys.empty() ? "" : ", ") + ty(localShape(w));
      }
      b.comment("The gradient of the sum of every rank's share (through the collectives).");
      b.lines.push_back(grads + " = ref.grad %" + part + " wrt " + wrt);
      b.lines.push_back("    : tensor<f32>, " + tys + " -> " + tys);
      for (size_t k = 0; k < weights.size(); ++k) {
        const std::string &n = weights[k].name;
        acc[n] = acc.count(n) ? b.binary("add", "acc_" + n, acc[n], gs[k]) : gs[k];
      }
    }
    // The reported loss: the summed cross-entropy over the global count, plus the
    // load-balancing terms (complete on every rank).
    std::vector<std::string> lossTerms;
    for (std::string ce : ces) {
      if (!tokenAndCp.empty())
        ce = b.allReduce("ce_all", ce, tokenAndCp);
      lossTerms.push_back(b.binary("div", "loss_ce", ce, count));
    }
    lossTerms.insert(lossTerms.end(), auxAll.begin(), auxAll.end());
    std::string lossOut = b.scale("loss", sumOf(b, "loss_sum", lossTerms), 1.0);
    b.comment("Gradients: summed over the axes that replicate each weight.");
    std::string rets = "%" + lossOut, rtys = "tensor<f32>", outs;
    outs = "tensor<f32> {dist.value = \"loss\", dist.layout = #dist.layout<[]>}";
    for (const Weight &w : weights) {
      std::vector<std::string> sum, scatter;
      auto split = gradSplit(w, sum, scatter);
      std::string g = acc[w.name];
      if (!scatter.empty())
        g = b.reduceScatter("d_" + w.name + "_rs", g, scatter, 0, groupSize(scatter));
      if (!sum.empty())
        g = b.allReduce("d_" + w.name, g, sum);
      else
        g = b.scale("d_" + w.name, g, 1.0);
      rets += ", %" + g;
      rtys += ", " + b.t(g);
      outs += ",\n          " + b.t(g) + " {dist.value = \"d_" + w.name + "\", dist.layout = " +
              layoutOf(split) + "}";
    }
    return planFunction(b.lines, outs, rets, rtys, "");
  }
  //===--------------------------------------------------------------------===//
  // Pipeline parallelism
  //===--------------------------------------------------------------------===//

  /// One step of a stage's schedule: the forward (or backward) of a model chunk of the
  /// stage on one microbatch.
  struct Event {
    bool forward;
    int64_t chunk, mb; // chunk: the stage's c-th chunk (model chunk c * pp + stage)
  };

  /// Stage s's order of events: GPipe (every forward, then every backward), 1F1B
  /// (pp - 1 - s warm-up forwards, then one forward and one backward alternately), or
  /// Megatron's interleaved 1F1B over v chunks per stage.
  std::vector<Event> scheduleOf(int64_t s) const {
    int64_t S = p.pp, M = p.microbatches, total = M * v;
    std::vector<Event> fwd, bwd;
    if (v == 1)
      for (int64_t m = 0; m < M; ++m) {
        fwd.push_back({true, 0, m});
        bwd.push_back({false, 0, m});
      }
    else
      for (int64_t k = 0; k < total; ++k) {
        // Virtual microbatch k: groups of S microbatches go through chunk 0, 1, ...
        // forward, and through the chunks in reverse backward.
        int64_t c = (k % (S * v)) / S, m = (k / (S * v)) * S + k % S;
        fwd.push_back({true, c, m});
        bwd.push_back({false, v - 1 - c, m});
      }
    if (p.schedule == "gpipe") {
      fwd.insert(fwd.end(), bwd.begin(), bwd.end());
      return fwd;
    }
    int64_t warm = warmup(s);
    std::vector<Event> order(fwd.begin(), fwd.begin() + warm);
    size_t f = warm;
    for (const Event &e : bwd) {
      if (f < fwd.size())
        order.push_back(fwd[f++]);
      order.push_back(e);
    }
    return order;
  }
  int64_t warmup(int64_t s) const {
    int64_t S = p.pp, total = p.microbatches * v;
    if (p.schedule == "gpipe")
      return total;
    if (v == 1)
      return std::min(S - 1 - s, total);
    return std::min((S - s - 1) * 2 + (v - 1) * S, total);
  }

  /// Marks messages posted together as one batch (batch_isend_irecv) when there are two
  /// or more.
  void post(std::vector<std::string> &out, std::vector<std::string> msgs, int64_t &batches) {
    if (msgs.size() > 1) {
      ++batches;
      for (std::string &m : msgs)
        m.insert(m.rfind(" : "), " {batch = " + std::to_string(batches) + "}");
    }
    out.insert(out.end(), msgs.begin(), msgs.end());
  }

  /// The plan on a mesh with a pipeline axis: stage s runs model chunks s, s + pp, ...
  /// (each L / (pp * v) consecutive layers), stage 0 reads the batch, the last stage
  /// holds the final norm, the LM head and the loss's inputs. A chunk's forward on a
  /// microbatch receives its input from the previous chunk's stage and sends its output
  /// to the next; its backward is one ref.grad of the vector-Jacobian product
  /// sum(output * received cotangent) (on the last chunk: the rank's loss share) plus
  /// the chunk's load-balancing shares, with respect to the chunk's weights and input,
  /// whose gradient is sent back. Each stage writes its events in its schedule's order.
  std::string pipelinePlan() {
    Sizes z = sizes(true);
    Body b = planBody(z);
    const int64_t S = p.pp, M = p.microbatches, Bm = z.B / M, last = S * v - 1;
    int64_t ranks = 1;
    for (int64_t n : meshShape)
      ranks *= n;
    const int64_t stageRanks = ranks / S; // the ranks of one stage
    Sizes zm = z;
    zm.B = Bm;
    Shape act = {Bm, z.Sres, H};
    std::vector<std::string> tokenAndCp = tokenAxes;
    if (p.cp > 1)
      tokenAndCp.push_back("cp");
    auto mbName = [&](int64_t i) { return M > 1 ? "mb" + std::to_string(i) + "_" : std::string(); };
    auto tag = [](const char *kind, int64_t j, int64_t i) {
      return std::string("\"") + kind + "/c" + std::to_string(j) + "/mb" + std::to_string(i) + "\"";
    };

    // Per (model chunk, microbatch): input, output, load-balancing terms; per
    // microbatch: the cross-entropy (sum and mean) on the last stage.
    std::vector<std::vector<std::string>> in(S * v, std::vector<std::string>(M)),
        out(S * v, std::vector<std::string>(M));
    std::vector<std::vector<std::vector<std::string>>> aux(
        S * v, std::vector<std::vector<std::string>>(M));
    std::vector<std::string> ce(M), ceMean(M);
    std::map<std::string, std::vector<std::string>> grads; // per weight, per microbatch
    for (const Weight &w : weights)
      grads[w.name].resize(M);
    std::vector<std::string> stagePart(S); // each stage's terms of the reported loss
    std::vector<std::string> body;
    std::vector<std::pair<std::string, std::string>> results; // (value, result attrs)
    int64_t batches = 0;

    for (int64_t s = 0; s < S; ++s) {
      b.stage = s;
      std::vector<Event> order = scheduleOf(s);
      std::string names;
      for (const Event &e : order)
        names += std::string(" ") + (e.forward ? "F" : "B") + std::to_string(e.mb) +
                 (v > 1 ? "c" + std::to_string(e.chunk) : "");
      body.push_back("// Stage " + std::to_string(s) + " (" + p.schedule + "):" + names);
      std::string count;
      if (s == S - 1) {
        b.comment("The global count of labelled tokens.");
        count = b.reduceSum("tokens_local", "mask", {0, 1});
        if (!tokenAndCp.empty())
          count = b.allReduce("tokens", count, tokenAndCp);
        body.insert(body.end(), b.lines.begin(), b.lines.end());
        b.lines.clear();
      }
      struct Done {
        std::vector<std::string> recvs, comp, sends;
      };
      std::vector<Done> events;
      for (const Event &e : order) {
        Done d;
        int64_t j = e.chunk * S + s, i = e.mb;
        std::string mb = mbName(i);
        if (e.forward) {
          b.comment("F: chunk " + std::to_string(j) + ", microbatch " + std::to_string(i));
          std::string h;
          if (j == 0) {
            h = M > 1 ? b.slice(mb + "x", "x", {i * Bm, 0, 0}, act) : "x";
          } else {
            h = b.name(mb + "c" + std::to_string(j) + "_in");
            b.shape[h] = act;
            in[j][i] = h;
            d.recvs.push_back("%" + h + " = dist.recv from " + std::to_string((j - 1) % S) +
                              " to " + std::to_string(s) + " tag " + tag("act", j, i) + " : " +
                              ty(act));
          }
          for (int64_t l = j * chunkLayers(); l < (j + 1) * chunkLayers(); ++l)
            h = layer(b, zm, l, h, aux[j][i]);
          out[j][i] = h;
          if (j == last) {
            std::string li = "labels", mi = "mask";
            if (M > 1) {
              li = b.slice(mb + "labels", "labels", {i * Bm, 0, 0}, {Bm, z.S, V});
              mi = b.slice(mb + "mask", "mask", {i * Bm, 0}, {Bm, z.S});
            }
            ceMean[i] = head(b, zm, h, li, mi, count, mb, ce[i]);
          } else {
            d.sends.push_back("dist.send %" + h + " from " + std::to_string(s) + " to " +
                              std::to_string((j + 1) % S) + " tag " + tag("act", j + 1, i) +
                              " : " + ty(act));
          }
        } else {
          b.comment("B: chunk " + std::to_string(j) + ", microbatch " + std::to_string(i));
          // What this rank differentiates: on the last chunk its share of the loss (as
          // without pipelining); before it, the vector-Jacobian product of the chunk's
          // output with the cotangent the next chunk sends back.
          std::vector<std::string> shares;
          if (j == last) {
            shares.push_back(b.scale(mb + "ce_share", ceMean[i], 1.0 / (double)p.tp));
          } else {
            std::string dy = b.name(mb + "c" + std::to_string(j) + "_dout");
            b.shape[dy] = act;
            d.recvs.push_back("%" + dy + " = dist.recv from " + std::to_string((j + 1) % S) +
                              " to " + std::to_string(s) + " tag " + tag("grad", j + 1, i) +
                              " : " + ty(act));
            std::string prod = b.binary("mul", mb + "c" + std::to_string(j) + "_vjp", out[j][i], dy);
            shares.push_back(b.reduceSum(mb + "c" + std::to_string(j) + "_vjp_sum", prod, {0, 1, 2}));
          }
          // A load-balancing term is complete on every rank of its stage.
          for (const std::string &a : aux[j][i])
            shares.push_back(b.scale(a + "_share", a, 1.0 / (double)stageRanks));
          std::string part = sumOf(b, mb + "c" + std::to_string(j) + "_part", shares);
          std::string gl, wrt, tys;
          std::vector<const Weight *> ws;
          for (const Weight &w : weights)
            if (w.layer >= 0 ? w.layer / chunkLayers() == j : j == last)
              ws.push_back(&w);
          std::vector<std::string> outs;
          for (const Weight *w : ws) {
            std::string g = b.name("g_" + mb + w->name);
            b.shape[g] = localShape(*w);
            grads[w->name][i] = g;
            outs.push_back(g);
            wrt += (wrt.empty() ? "%" : ", %") + w->name;
            tys += (tys.empty() ? "" : ", ") + ty(localShape(*w));
          }
          std::string din;
          if (j > 0) {
            din = b.name(mb + "c" + std::to_string(j) + "_din");
            b.shape[din] = act;
            outs.push_back(din);
            wrt += ", %" + in[j][i];
            tys += ", " + ty(act);
          }
          for (const std::string &o : outs)
            gl += (gl.empty() ? "%" : ", %") + o;
          b.lines.push_back(gl + " = ref.grad %" + part + " wrt " + wrt + b.stageAttr());
          b.lines.push_back("    : tensor<f32>, " + tys + " -> " + tys);
          if (j > 0)
            d.sends.push_back("dist.send %" + din + " from " + std::to_string(s) + " to " +
                              std::to_string((j - 1) % S) + " tag " + tag("grad", j, i) + " : " +
                              ty(act));
        }
        d.comp = std::move(b.lines);
        b.lines.clear();
        events.push_back(std::move(d));
      }
      // Steps: a warm-up forward, a steady forward-and-backward pair, or a cool-down
      // backward; the messages between two steps are posted together (Megatron's
      // send_forward_recv_backward and friends).
      int64_t first = p.schedule == "gpipe" ? 0 : warmup(s);
      int64_t end = p.schedule == "gpipe" ? 0 : first + 2 * (M * v - first);
      std::vector<std::string> comm;
      for (size_t e = 0; e < events.size();) {
        size_t n = ((int64_t)e >= first && (int64_t)e + 1 < end) ? 2 : 1;
        for (size_t k = e; k < e + n; ++k)
          comm.insert(comm.end(), events[k].recvs.begin(), events[k].recvs.end());
        post(body, comm, batches);
        comm.clear();
        for (size_t k = e; k < e + n; ++k) {
          body.insert(body.end(), events[k].comp.begin(), events[k].comp.end());
          comm.insert(comm.end(), events[k].sends.begin(), events[k].sends.end());
        }
        e += n;
      }
      post(body, comm, batches);

      b.comment("Stage " + std::to_string(s) + ": gradients accumulated over the microbatches "
                "(in order), then summed over the axes that replicate each weight.");
      for (const Weight &w : weights) {
        if (w.stage != s)
          continue;
        std::string g = grads[w.name][0];
        for (int64_t i = 1; i < M; ++i)
          g = b.binary("add", "acc_" + w.name, g, grads[w.name][i]);
        std::vector<std::string> sum, scatter;
        auto split = gradSplit(w, sum, scatter);
        if (!scatter.empty())
          g = b.reduceScatter("d_" + w.name + "_rs", g, scatter, 0, groupSize(scatter));
        g = sum.empty() ? b.scale("d_" + w.name, g, 1.0) : b.allReduce("d_" + w.name, g, sum);
        results.push_back({g, b.t(g) + " {dist.value = \"d_" + w.name + "\", dist.layout = " +
                                  layoutOf(split) + stageField(s) + "}"});
      }
      // The stage's terms of the reported loss: the load-balancing terms of its
      // chunks, and on the last stage the cross-entropy over the global count.
      std::vector<std::string> terms;
      if (s == S - 1)
        for (int64_t i = 0; i < M; ++i) {
          std::string c = ce[i];
          if (!tokenAndCp.empty())
            c = b.allReduce("ce_all", c, tokenAndCp);
          terms.push_back(b.binary("div", "loss_ce", c, count));
        }
      for (int64_t j = s; j < S * v; j += S)
        for (int64_t i = 0; i < M; ++i)
          terms.insert(terms.end(), aux[j][i].begin(), aux[j][i].end());
      if (!terms.empty())
        stagePart[s] = sumOf(b, "loss_stage" + std::to_string(s), terms);
      body.insert(body.end(), b.lines.begin(), b.lines.end());
      b.lines.clear();
    }
    // The reported loss. When only the last stage has terms it returns it; otherwise
    // every stage's terms are joined over the pipeline axis.
    b.stage = -1;
    std::string loss, lossAttrs = "tensor<f32> {dist.value = \"loss\", dist.layout = #dist.layout<[]>";
    bool spread = false;
    for (int64_t s = 0; s + 1 < S; ++s)
      spread |= !stagePart[s].empty();
    if (!spread) {
      b.stage = S - 1;
      loss = b.scale("loss", stagePart[S - 1], 1.0);
      lossAttrs += stageField(S - 1);
    } else {
      b.comment("The reported loss: every stage's load-balancing terms and the last stage's "
                "cross-entropy, joined over the pipeline axis.");
      std::string sel = "dist.stage_select ", tys;
      for (int64_t s = 0; s < S; ++s) {
        if (stagePart[s].empty()) {
          b.stage = s;
          stagePart[s] = b.emit("loss_stage" + std::to_string(s),
                                "ref.constant 0.0 : tensor<f32>", {});
        }
        sel += (s ? ", %" : "%") + stagePart[s];
        tys += (s ? ", " : "") + std::string("tensor<f32>");
      }
      b.stage = -1;
      std::string joined = b.emit("loss_stages", sel + " : " + tys + " -> tensor<f32>", {});
      loss = b.allReduce("loss", joined, {"pp"});
    }
    lossAttrs += "}";
    body.insert(body.end(), b.lines.begin(), b.lines.end());
    std::string rets = "%" + loss, rtys = "tensor<f32>", outs = lossAttrs;
    for (auto &[g, attrs] : results) {
      rets += ", %" + g;
      rtys += ", " + b.t(g);
      outs += ",\n          " + attrs;
    }
    return planFunction(body, outs, rets, rtys, ", dist.pipeline = \"pp\"");
  }

};

} // namespace

bool readModel(const std::string &path, Model &m, std::string &err) {
  std::string text, errors;
  if (!readInputFile(path, text, errors) || !checkNesting(path, text, Syntax::Json, errors)) {
    err = errors.empty() ? path + ": error: cannot read the model configuration" : errors;
    while (!err.empty() && err.back() == '\n')
      err.pop_back();
    return false;
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return (err = path + ": error: malformed JSON", false);
  if (!j.is_object())
    return (err = path + ": error: a model configuration is a JSON object", false);
  auto field = [&](const json &o, const std::string &ptr, const char *key, int64_t &out,
                   bool required) {
    if (!o.contains(key)) {
      if (required)
        err = path + ": error: " + ptr + key + ": missing (an integer)";
      return !required;
    }
    const json &v = o[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 40)) {
      err = path + ": error: " + ptr + key + ": must be an integer in [0, 2^40]";
      return false;
    }
    out = v.get<int64_t>();
    return true;
  };
  if (j.contains("name") && !j["name"].is_string())
    return (err = path + ": error: name: must be a string", false);
  m.name = j.contains("name") ? j["name"].get<std::string>() : path;
  if (!field(j, "", "layers", m.layers, true) || !field(j, "", "hidden", m.hidden, true) ||
      !field(j, "", "heads", m.heads, true) || !field(j, "", "kv_heads", m.kvHeads, true) ||
      !field(j, "", "head_dim", m.headDim, true) || !field(j, "", "ffn", m.ffn, true) ||
      !field(j, "", "vocab", m.vocab, true))
    return false;
  if (m.layers < 1 || m.heads < 1 || m.kvHeads < 1 || m.heads % m.kvHeads != 0)
    return (err = path + ": error: layers and heads must be positive and heads a multiple of "
                         "kv_heads",
            false);
  if (j.contains("moe")) {
    const json &e = j["moe"];
    if (!e.is_object())
      return (err = path + ": error: moe: must be an object", false);
    if (!field(e, "moe.", "experts", m.experts, true) || !field(e, "moe.", "top_k", m.topK, true) ||
        !field(e, "moe.", "shared_experts", m.sharedExperts, false) ||
        !field(e, "moe.", "expert_ffn", m.expertFfn, true) ||
        !field(e, "moe.", "first_dense_layers", m.firstDenseLayers, false))
      return false;
    if (m.experts < 2 || m.topK < 1 || m.topK > m.experts)
      return (err = path + ": error: moe: needs at least 2 experts and 1 <= top_k <= experts",
              false);
  }
  return true;
}

bool parseParallel(const std::string &text, Parallel &p, std::string &err) {
  std::stringstream ss(text);
  std::string item;
  std::set<std::string> seen;
  while (std::getline(ss, item, ',')) {
    if (item.empty())
      continue;
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (!seen.insert(key).second)
      return (err = "--parallel: '" + key + "' is given twice", false);
    if (key == "sp") {
      if (eq != std::string::npos)
        return (err = "--parallel: sp takes no value", false);
      p.sp = true;
      continue;
    }
    if (key == "schedule") {
      if (val != "gpipe" && val != "1f1b" && val != "interleaved")
        return (err = "--parallel: unknown schedule '" + val + "' (expected gpipe, 1f1b or interleaved)",
                false);
      p.schedule = val;
      continue;
    }
    if (key == "cf") {
      char *end = nullptr;
      p.capacityFactor = std::strtod(val.c_str(), &end);
      // Written so that NaN fails too.
      if (val.empty() || *end || !(p.capacityFactor >= 0 && p.capacityFactor <= 64))
        return (err = "--parallel: cf must be a number in [0, 64]", false);
      continue;
    }
    int64_t *slot = key == "dp" ? &p.dp : key == "tp" ? &p.tp : key == "pp" ? &p.pp
                  : key == "ep" ? &p.ep : key == "cp" ? &p.cp : key == "zero" ? &p.zero
                  : key == "microbatches" ? &p.microbatches : key == "layers" ? &p.layers
                  : key == "chunks" ? &p.chunks : nullptr;
    if (!slot)
      return (err = "--parallel: unknown item '" + item +
                    "' (expected dp, tp, pp, ep, cp, zero, microbatches, layers, chunks, cf = N, "
                    "sp, schedule = gpipe|1f1b|interleaved)",
              false);
    char *end = nullptr;
    long v = std::strtol(val.c_str(), &end, 10);
    if (val.empty() || *end || v < 0 || v > 1024)
      return (err = "--parallel: " + key + " needs an integer in [0, 1024]", false);
    *slot = v;
  }
  return true;
}

bool generate(const Model &m, const Parallel &p, std::string &mlir, std::string &err) {
  Generator g(m, p);
  if (!g.setup(err))
    return false;
  g.addWeights();
  std::ostringstream h;
  h << "// GENERATED by planproof plan -- model '" << m.name << "'\n";
  h << "// model:    " << m.layers << " layers, hidden " << m.hidden << ", " << m.heads
    << " heads (" << m.kvHeads << " KV) of " << m.headDim << ", FFN " << m.ffn << ", vocabulary "
    << m.vocab;
  if (m.experts)
    h << ", " << m.experts << " experts top-" << m.topK << " (expert FFN " << m.expertFfn << ", "
      << m.sharedExperts << " shared, first " << m.firstDenseLayers << " layers dense)";
  h << "\n// parallel: dp=" << p.dp << " tp=" << p.tp << (p.sp ? " sp" : "") << " ep=" << p.ep
    << " cp=" << p.cp << " zero=" << p.zero << " microbatches=" << p.microbatches;
  if (p.pp > 1)
    h << " pp=" << p.pp << " schedule=" << p.schedule
      << (g.v > 1 ? " chunks=" + std::to_string(g.v) : "");
  h << "\n";
  h << "// reduced:  " << g.L << " layers, hidden " << g.H << ", " << g.nh << " heads (" << g.nkv
    << " KV) of " << g.hd << ", FFN " << g.ffn << ", vocabulary " << g.V << ", batch " << g.B
    << " x sequence " << g.S;
  if (m.experts)
    h << ", " << g.E << " experts top-" << g.k << " capacity " << g.C << " per group of "
      << g.B * g.S / g.groups / p.microbatches << " tokens";
  h << "\n";
  mlir = h.str() + "module attributes {planproof.expect = {verdict = \"verified\"}} {\n" +
         g.reference() + g.plan() + "}\n";
  return true;
}

} // namespace planproof::plangen
