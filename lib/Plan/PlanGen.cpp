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
#include "Plan/PlanGenInternal.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

namespace planproof::plangen {

//===----------------------------------------------------------------------===//
// Configuration, sizes, weights and the layer code
//===----------------------------------------------------------------------===//

bool Generator::setup(std::string &err) {
  auto fail = [&](const std::string &e) { return (err = e, false); };
  for (auto [n, v] : {std::pair<const char *, int64_t>{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp},
                      {"ep", p.ep}, {"cp", p.cp}, {"microbatches", p.microbatches}})
    if (v < 1 || v > (p.fullSize ? 1024 : 64))
      return fail(std::string(n) + " must be between 1 and " +
                  (p.fullSize ? "1024" : "64 (size=full allows 1024)"));
  if (p.seq && !p.fullSize)
    return fail("seq applies to size=full");
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
  if (!(p.fullSize ? fullSizes(err) : reducedSizes(err)))
    return false;
  // Counted before anything is written: the plan holds each layer once per microbatch
  // (a call each, written compact), and a plan past the input limit could be neither
  // written nor read back (2^40 layers ran until the time limit).
  if (L * std::max<int64_t>(1, p.microbatches) > kMaxLayerRuns)
    return fail(std::to_string(L) + " layers x " + std::to_string(p.microbatches) +
                " microbatches are more than the " + std::to_string(kMaxLayerRuns) +
                " layer runs a generated plan holds (its text would pass the input limit); "
                "choose layers=N");
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

bool Generator::partitionLayers(std::string &err) {
  int64_t n = p.pp * v;
  chunkStart.assign(1, 0);
  // Every chunk but the first and the last takes m = ceil(L / n) layers; those two
  // share the rest, the first taking the larger half: an even split when n divides L,
  // and otherwise Megatron's uneven one, whose first and last stages hold fewer
  // transformer layers beside the embedding and the loss (126 on 16: 7, 8 x 14, 7;
  // DeepSeek-V3's 61 on 8: 7, 8 x 6, 6).
  int64_t m = (L + n - 1) / n, rest = L - (n - 2) * m;
  if (n == 1 || rest >= 2) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t size = j == 0 ? (n == 1 ? L : (rest + 1) / 2) : j == n - 1 ? rest / 2 : m;
      chunkStart.push_back(chunkStart.back() + size);
    }
    return true;
  }
  err = "layers = " + std::to_string(L) + " are too few for the " + std::to_string(n) +
        " model chunks (pp" + (v > 1 ? " x chunks" : "") + "): with " + std::to_string(m) +
        " layers in each chunk but the first and the last, those two would get " +
        std::to_string(rest) + "; choose layers=N";
  return false;
}

/// Reduced sizes: each keeps the divisibility its splits need.
bool Generator::reducedSizes(std::string &err) {
  auto fail = [&](const std::string &e) { return (err = e, false); };
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
  if (!partitionLayers(err))
    return false;
  E = m.experts > 0 ? std::max<int64_t>(2 * p.ep, 2) : 0;
  k = m.experts > 0 ? std::max<int64_t>(1, std::min<int64_t>(m.topK, E / 2)) : 0;
  eff = 2 * p.tp;
  sff = m.sharedExperts > 0 ? 2 * p.tp : 0;
  groups = p.dp * p.ep * p.cp; // a capacity group: one rank's tokens (tp ranks share them)
  int64_t perGroup = B * S / groups / p.microbatches;
  C = perGroup; // no drops
  if (p.capacityFactor > 0 && E > 0)
    C = std::max<int64_t>(1, (int64_t)std::ceil(p.capacityFactor * perGroup * k / E));
  return true;
}

/// The model's own sizes: the divisibility the splits need is checked, not arranged.
bool Generator::fullSizes(std::string &err) {
  auto fail = [&](const std::string &e) { return (err = e, false); };
  hd = m.headDim;
  nkv = m.kvHeads;
  nh = m.heads;
  H = m.hidden;
  ffn = m.ffn;
  V = m.vocab;
  S = p.seq ? p.seq : 4096;
  B = p.dp * p.ep * p.microbatches;
  L = p.layers > 0 ? p.layers : m.layers;
  E = m.experts;
  k = m.experts > 0 ? m.topK : 0;
  eff = m.expertFfn;
  sff = m.sharedExperts * m.expertFfn;
  for (auto [what, n] : {std::pair<const char *, int64_t>{"heads", nh}, {"FFN", ffn},
                         {"expert FFN", eff}, {"shared FFN", sff}})
    if (n % p.tp != 0)
      return fail(std::string("tp = ") + std::to_string(p.tp) + " does not divide the " + what +
                  " width " + std::to_string(n));
  int64_t seqParts = 2 * p.cp * (p.sp ? p.tp : 1);
  if (S % seqParts != 0)
    return fail("seq = " + std::to_string(S) + " is not a multiple of " +
                std::to_string(seqParts) + " (cp zigzag chunks and sequence parallelism)");
  if (!partitionLayers(err))
    return false;
  groups = p.dp * p.ep * p.cp;
  int64_t perGroup = B * S / groups / p.microbatches;
  C = perGroup;
  if (p.capacityFactor > 0 && E > 0)
    C = std::max<int64_t>(1, (int64_t)std::ceil(p.capacityFactor * perGroup * k / E));
  // The largest tensors of the reference: the logits [T, V], the attention scores
  // [B * heads, S, S], an MoE layer's grouped dispatch mask [G, T / G, E, C] and its
  // experts' slots [E, G * C, max(H, expert FFN)].
  int64_t T = 0, bh = 0, gc = 0, logits, scores, mask = 0, slots = 0;
  if (!checkedMul(B, S, T) || !checkedMul(groups, C, gc) || !checkedMul(B, nh, bh) ||
      !checkedMul(T, V, logits) || !checkedMul(bh, S, scores) ||
      !checkedMul(scores, S, scores) ||
      (E > 0 && !(checkedMul(T, E, mask) && checkedMul(mask, C, mask) &&
                  checkedMul(E, gc, slots) &&
                  checkedMul(slots, std::max(H, eff), slots))) ||
      logits > kMaxElements || scores > kMaxElements || mask > kMaxElements ||
      slots > kMaxElements)
    return fail("at full size a tensor of this configuration would hold more than 2^40 "
                "elements (the logits, the attention scores, or an MoE layer's dispatch "
                "mask or expert slots: a capacity factor, cf=X, bounds the slots)");
  return true;
}

void Generator::addWeights() {
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

Shape Generator::localShape(const Weight &w) const {
  Shape s = w.global;
  for (size_t d = 0; d < s.size(); ++d)
    s[d] /= groupSize(w.split[d]);
  return s;
}

Sizes Generator::sizes(bool plan) const {
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

namespace {

/// Writes one layer's ops (Generator::layer): its local sizes, the prefix of its names
/// and the steps its attention and its feed-forward share.
struct LayerWriter {
  const Generator &gen;
  Body &b;
  const Sizes &z;
  int64_t l;
  std::string P; // prefixes the layer's names
  int64_t Bl, Sl, T, g;
  bool tpOn, cpOn;
  // The reference routes its tokens in the order of the ranks' groups (under cp, a
  // rank's tokens are two zigzag chunks of each sequence), so capacity slots are
  // assigned in the same order; the output is put back in sequence order after.
  std::vector<int64_t> order; // segment starts (rows of hm), in group order
  int64_t seg = 0;

  /// `l` < 0: the body of a layer function (names without a layer prefix).
  LayerWriter(const Generator &gen, Body &b, const Sizes &z, int64_t l)
      : gen(gen), b(b), z(z), l(l), P(l < 0 ? "" : "l" + std::to_string(l) + "_"), Bl(z.B),
        Sl(z.S), T(Bl * Sl), g(z.nh / z.nkv), tpOn(z.plan && z.tp > 1),
        cpOn(z.plan && z.cp > 1) {}

  std::string label() const { return l < 0 ? "layer" : "layer " + std::to_string(l); }

  std::string w(const std::string &n) const { return P + n; }

  // The entry of a tensor-parallel region (Megatron's f): the identity on the
  // replicated input, and in the backward the average of the tp ranks' partial
  // cotangents -- an all_reduce avg, whose adjoint is that average. Every rank then
  // holds 1/tp of the complete cotangent, as it holds 1/tp of the loss.
  std::string gatherSeq(const std::string &v) {
    if (z.plan && z.sp)
      return b.allGather(P + "sp_gather", v, {"tp"}, 1, z.tp, false);
    if (tpOn)
      return b.allReduce(P + "tp_entry", v, {"tp"}, "avg");
    return v;
  }

  // A partial-over-tp [T, H] result back to the residual stream [B, Sres, H].
  std::string toResidual(const std::string &v, const std::string &n) {
    std::string r = b.reshape(P + n + "_3d", v, {Bl, Sl, z.H});
    if (!tpOn)
      return r;
    if (z.sp)
      return b.reduceScatter(P + n + "_rs", r, {"tp"}, 1, z.tp);
    return b.allReduce(P + n + "_ar", r, {"tp"});
  }

  /// The attention block: x + attention(norm1(x)).
  std::string attention(const std::string &x);
  /// Under cp: the attention context of the rank's two zigzag chunks of queries.
  std::string zigzagContext(const std::string &q3, const std::string &k3,
                            const std::string &v3, double scale);
  /// The feed-forward block's input: norm2(x) as [T, H] rows.
  std::string feedForwardInput(const std::string &x);
  /// The SwiGLU MLP block: x + mlp(norm2(x)).
  std::string mlp(const std::string &x);
  /// The mixture-of-experts block: x + moe(norm2(x)); its load-balancing term goes to
  /// `auxTerms`.
  std::string moe(const std::string &x, std::vector<std::string> &auxTerms);
  /// The reference's tokens `hm` regrouped in the ranks' group order (sets `order`).
  std::string toGroupOrder(const std::string &hm);
  /// The routed output `y` (in group order) put back in sequence order.
  std::string toSequenceOrder(const std::string &y);
  /// The Switch load-balancing term of the router's choices and probabilities.
  std::string loadBalancing(const std::string &chosen, const std::string &probs);
};

std::string LayerWriter::attention(const std::string &x) {
  b.comment(label() + ": attention");
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
    ctx = zigzagContext(q3, k3, v3, scale);
  } else {
    std::string s = b.scale(P + "scaled", b.bmm(P + "scores", q3, k3, 2, 2), scale);
    std::string pr = b.causalSoftmax(P + "probs", s);
    ctx = b.bmm(P + "ctx", pr, v3, 2, 1);
  }
  std::string c4 = b.reshape(P + "ctx_4d", ctx, {Bl, z.nh, Sl, z.hd});
  std::string ct = b.transpose(P + "ctx_t", c4, {0, 2, 1, 3});
  std::string c2 = b.reshape(P + "ctx_2d", ct, {T, z.nh * z.hd});
  std::string attn = toResidual(b.matmul(P + "attn", c2, w("wo")), "attn");
  return b.binary<ref::AddOp>(P + "x_attn", x, attn);
}

std::string LayerWriter::zigzagContext(const std::string &q3, const std::string &k3,
                                       const std::string &v3, double scale) {
  // Two chunks per rank (p and 2cp-1-p), masked from their global starts.
  int64_t Cq = Sl / 2;
  std::string pos = b.axisIndex(P + "cp_rank", "cp");
  std::string ch = b.indexConstant(P + "chunk", Cq);
  std::string last = b.indexConstant(P + "last", 2 * z.cp - 1);
  std::string s0 = b.muli(P + "start0", pos, ch);
  std::string mir = b.subi(P + "mirror", last, pos);
  std::string s1 = b.muli(P + "start1", mir, ch);
  std::string outs[2];
  for (int j = 0; j < 2; ++j) {
    std::string qj = b.slice(P + "q_c" + std::to_string(j), q3, {0, j * Cq, 0},
                             {Bl * z.nh, Cq, z.hd});
    std::string sj = b.scale(P + "s_c" + std::to_string(j),
                             b.bmm(P + "scores_c" + std::to_string(j), qj, k3, 2, 2), scale);
    std::string pj = b.causalSoftmax(P + "p_c" + std::to_string(j), sj, j ? s1 : s0);
    outs[j] = b.bmm(P + "o_c" + std::to_string(j), pj, v3, 2, 1);
  }
  return b.concat(P + "ctx", outs[0], outs[1], 1);
}

std::string LayerWriter::feedForwardInput(const std::string &x) {
  std::string hn = gatherSeq(b.norm(P + "h2", x, w("norm2")));
  return b.reshape(P + "h2_2d", hn, {T, z.H});
}

std::string LayerWriter::mlp(const std::string &x) {
  std::string hm = feedForwardInput(x);
  b.comment(label() + ": SwiGLU MLP");
  std::string gt = b.unary<ref::SiluOp>(P + "gate_act", b.matmul(P + "gate", hm, w("wg")));
  std::string up = b.matmul(P + "up", hm, w("wu"));
  std::string act = b.binary<ref::MulOp>(P + "act", gt, up);
  std::string down = toResidual(b.matmul(P + "down", act, w("wd")), "mlp");
  return b.binary<ref::AddOp>(P + "x_out", x, down);
}

std::string LayerWriter::moe(const std::string &x, std::vector<std::string> &auxTerms) {
  std::string hm = feedForwardInput(x);
  b.comment(label() + ": mixture of experts (top-" + std::to_string(z.k) +
            " of " + std::to_string(z.E) + ", capacity " + std::to_string(z.C) + ")");
  std::string hmSeq = hm; // the tokens in sequence order (the shared expert's input)
  if (!z.plan && gen.p.cp > 1)
    hm = toGroupOrder(hm);
  std::string logits = b.matmul(P + "router_logits", hm, w("router"));
  std::string probs = b.unary<ref::SoftmaxOp>(P + "router_probs", logits);
  std::string chosen = b.topk(P + "chosen", logits, z.k);
  std::string picked = b.binary<ref::MulOp>(P + "picked", probs, chosen);
  std::string psum = b.reduceSum(P + "picked_sum", picked, {1});
  std::string gates = b.binary<ref::DivOp>(P + "gates", picked,
                               b.broadcast(P + "picked_sum_b", psum, {0}, {T, z.E}));
  // GShard's grouped dispatch: the tokens in G groups (a plan rank holds its own one),
  // each group's [Tg, E, C] mask, slots [E, G * C] after a transpose.
  int64_t G = z.groups, Tg = T / G, slots = G * z.C;
  std::string chosenG = b.reshape(P + "chosen_g", chosen, {G, Tg, z.E});
  std::string dispatch = b.capacityDispatch(P + "dispatch", chosenG, z.C, 1, {G, Tg, z.E, z.C});
  std::string dg = b.reshape(P + "dispatch_g", dispatch, {G, Tg, z.E * z.C});
  std::string xg = b.reshape(P + "tokens_g", hm, {G, Tg, z.H});
  std::string slg = b.bmm(P + "slots_g", dg, xg, 1, 1);
  std::string sl4 = b.reshape(P + "slots_4d", slg, {G, z.E, z.C, z.H});
  std::string slt = b.transpose(P + "slots_t", sl4, {1, 0, 2, 3});
  std::string sl = b.reshape(P + "slots", slt, {z.E, slots, z.H});
  bool epOn = z.plan && z.ep > 1;
  if (epOn)
    sl = b.allToAll(P + "to_experts", sl, {"ep"}, 0, 1, z.ep);
  std::string h1 = b.bmm(P + "expert_h", sl, w("w1"), 2, 1);
  std::string a1 = b.unary<ref::GeluOp>(P + "expert_act", h1);
  std::string eo = b.bmm(P + "expert_out", a1, w("w2"), 2, 1);
  if (tpOn)
    eo = b.allReduce(P + "expert_out_ar", eo, {"tp"});
  if (epOn)
    eo = b.allToAll(P + "from_experts", eo, {"ep"}, 1, 0, z.ep);
  std::string gatesG = b.reshape(P + "gates_g", gates, {G, Tg, z.E});
  std::string gb = b.broadcast(P + "gates_b", gatesG, {0, 1, 2}, {G, Tg, z.E, z.C});
  std::string comb = b.binary<ref::MulOp>(P + "combine", dispatch, gb);
  std::string combG = b.reshape(P + "combine_g", comb, {G, Tg, z.E * z.C});
  std::string eo4 = b.reshape(P + "expert_out_4d", eo, {z.E, G, z.C, z.H});
  std::string eot = b.transpose(P + "expert_out_t", eo4, {1, 0, 2, 3});
  std::string eoG = b.reshape(P + "expert_out_g", eot, {G, z.E * z.C, z.H});
  std::string y = b.reshape(P + "moe_out", b.bmm(P + "moe_out_g", combG, eoG, 2, 1), {T, z.H});
  if (!order.empty())
    y = toSequenceOrder(y);
  // The routed output is complete on every tp rank; back to the residual stream.
  std::string y3 = b.reshape(P + "moe_3d", y, {Bl, Sl, z.H});
  if (z.plan && z.sp)
    y3 = b.shardSlice(P + "moe_sp", y3, {"tp"}, 1, z.tp);
  if (z.sff) {
    std::string sh = b.unary<ref::GeluOp>(P + "shared_act", b.matmul(P + "shared_h", hmSeq, w("ws1")));
    std::string so = toResidual(b.matmul(P + "shared_out", sh, w("ws2")), "shared");
    y3 = b.binary<ref::AddOp>(P + "ffn_out", y3, so);
  }
  auxTerms.push_back(loadBalancing(chosen, probs));
  return b.binary<ref::AddOp>(P + "x_out", x, y3);
}

std::string LayerWriter::toGroupOrder(const std::string &hm) {
  const Parallel &p = gen.p;
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
  return cat;
}

std::string LayerWriter::toSequenceOrder(const std::string &y) {
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::string cat;
  for (int64_t start : sorted) {
    int64_t k = std::find(order.begin(), order.end(), start) - order.begin();
    std::string piece = b.slice(P + "seq_seg", y, {k * seg, 0}, {seg, z.H});
    cat = cat.empty() ? piece : b.concat(P + "moe_seq", cat, piece, 0);
  }
  return cat;
}

std::string LayerWriter::loadBalancing(const std::string &chosen, const std::string &probs) {
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
  int64_t allTokens = gen.B * gen.S / gen.p.microbatches;
  std::string fp = b.binary<ref::MulOp>(P + "fp", b.scale(P + "f", f, 1.0 / (double)(allTokens * z.k)),
                            b.scale(P + "p_mean", pm, 1.0 / (double)allTokens));
  return b.scale(P + "aux", b.reduceSum(P + "fp_sum", fp, {0}), 0.01 * z.E);
}

} // namespace

std::string Generator::layer(Body &b, const Sizes &z, int64_t l, std::string x,
                  std::vector<std::string> &auxTerms) {
  if (p.compact)
    return layerCall(b, z, l, x, auxTerms);
  LayerWriter lw(*this, b, z, l);
  x = lw.attention(x);
  if (!moeLayer[l])
    return lw.mlp(x);
  return lw.moe(x, auxTerms);
}

/// The private function computing a layer like `l` at sizes `z` (written the first time
/// it is asked for): its arguments are the layer's input and weights, its results the
/// layer's output and load-balancing terms.
const Generator::LayerFunction &Generator::layerFunction(const Sizes &z, int64_t l) {
  std::ostringstream key;
  key << z.plan << moeLayer[l] << ' ' << z.B << ' ' << z.S << ' ' << z.Sres << ' ' << z.H << ' '
      << z.C << ' ' << z.groups << ' ' << z.Sglobal << ' ' << z.sp;
  for (const std::string &a : z.tokenAxes)
    key << ' ' << a;
  auto found = layerFunctions.find(key.str());
  if (found != layerFunctions.end())
    return found->second;
  LayerFunction f;
  f.name = std::string(z.plan ? "plan" : "ref") + "_layer" + (moeLayer[l] ? "_moe" : "");
  std::string base = f.name;
  for (int k = 2; module.lookupSymbol(f.name); ++k)
    f.name = base + "_" + std::to_string(k);
  std::vector<Arg> args{{"x", {z.B, z.Sres, z.H}, {}}};
  std::string prefix = "l" + std::to_string(l) + "_";
  for (const Weight &w : weights)
    if (w.layer == l) {
      f.weights.push_back(w.name.substr(prefix.size()));
      args.push_back({f.weights.back(), z.plan ? localShape(w) : w.global, {}});
    }
  Body cb(ctx, args);
  LayerWriter lw(*this, cb, z, -1);
  std::string x = lw.attention("x");
  std::vector<std::string> aux;
  std::string out = moeLayer[l] ? lw.moe(x, aux) : lw.mlp(x);
  std::vector<std::pair<std::string, mlir::NamedAttrList>> results{{out, {}}};
  for (const std::string &a : aux)
    results.push_back({a, {}});
  mlir::func::FuncOp fn = finishFunction(module, f.name, cb, cb.lines, results, comments);
  f.results.assign(fn.getResultTypes().begin(), fn.getResultTypes().end());
  fn.setPrivate();
  if (z.plan)
    fn->setAttr(dist::kMeshAttr, mlir::FlatSymbolRefAttr::get(&ctx, "mesh"));
  return layerFunctions[key.str()] = f;
}

std::string Generator::layerCall(Body &b, const Sizes &z, int64_t l, const std::string &x,
                                 std::vector<std::string> &auxTerms) {
  const LayerFunction &f = layerFunction(z, l);
  std::string prefix = "l" + std::to_string(l) + "_";
  mlir::SmallVector<mlir::Value> operands{b.v(x)};
  for (const std::string &w : f.weights)
    operands.push_back(b.v(prefix + w));
  std::string r = b.name(prefix + "out");
  mlir::OpBuilder builder(&ctx);
  auto call = mlir::func::CallOp::create(builder, b.loc(r), f.name, f.results, operands);
  b.place(call, r);
  for (size_t i = 1; i < f.results.size(); ++i) {
    std::string a = r + "#" + std::to_string(i);
    b.val[a] = call->getResult(i);
    b.shape[a] = {};
    auxTerms.push_back(a);
  }
  return r;
}

std::string Generator::step(Body &b, const Sizes &z, const std::string &x, const std::string &labels,
                 const std::string &mask, const std::string &count, const std::string &mb,
                 std::string &ceOut, std::vector<std::string> &aux) {
  std::string h = x;
  for (int64_t l = 0; l < L; ++l)
    h = layer(b, z, l, h, aux);
  return head(b, z, h, labels, mask, count, mb, ceOut);
}

std::string Generator::head(Body &b, const Sizes &z, const std::string &h, const std::string &labels,
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
  ceOut = b.crossEntropySum(mb + "ce", logits, lab, msk);
  return b.binary<ref::DivOp>(mb + "ce_mean", ceOut, count);
}

std::string Generator::sumOf(Body &b, const std::string &name, std::vector<std::string> terms) {
  std::string r = terms[0];
  for (size_t i = 1; i < terms.size(); ++i)
    r = b.binary<ref::AddOp>(name, r, terms[i]);
  return r;
}

bool generate(const Model &m, const Parallel &p, std::string &mlir, std::string &err) {
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  mlir::DialectRegistry registry;
  registry.insert<ref::RefDialect, dist::DistDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module(mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx)));
  Generator g(m, p, ctx, *module);
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
  h << (p.fullSize ? "// sizes:    " : "// reduced:  ") << g.L << " layers, hidden " << g.H << ", " << g.nh << " heads (" << g.nkv
    << " KV) of " << g.hd << ", FFN " << g.ffn << ", vocabulary " << g.V << ", batch " << g.B
    << " x sequence " << g.S;
  if (m.experts)
    h << ", " << g.E << " experts top-" << g.k << " capacity " << g.C << " per group of "
      << g.B * g.S / g.groups / p.microbatches << " tokens";
  h << "\n";
  mlir::Builder b(&ctx);
  (*module)->setAttr("planproof.expect",
                     b.getDictionaryAttr(b.getNamedAttr("verdict", b.getStringAttr("verified"))));
  g.reference();
  g.plan();
  // Built with the ops' own builders; verified before it is written, so a generator
  // bug is an error here, not a spec that fails to load.
  std::string problems;
  {
    mlir::ScopedDiagnosticHandler collect(&ctx, [&](mlir::Diagnostic &d) {
      problems += (problems.empty() ? "" : "; ") + d.str();
      return mlir::success();
    });
    if (mlir::failed(mlir::verify(*module)))
      return (err = "internal error: the generated spec does not verify: " + problems, false);
  }
  mlir = h.str() + printModule(*module, g.comments);
  return true;
}

} // namespace planproof::plangen
