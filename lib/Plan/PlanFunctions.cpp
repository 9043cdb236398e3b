//===- PlanFunctions.cpp - the reference and plan functions -----*- C++ -*-===//
//
// The Generator (PlanGenInternal.h), its second half: the functions' arguments and
// results, the reference step, the plan (one SPMD function), and pipelined plans --
// each stage's schedule (GPipe, 1F1B, interleaved 1F1B) and its sends and receives.
//
//===----------------------------------------------------------------------===//
#include "Plan/PlanGenInternal.h"

namespace planproof::plangen {

mlir::Attribute Generator::layoutOf(const std::vector<std::vector<std::string>> &dims,
                                   const std::vector<bool> &zigzag) const {
  mlir::SmallVector<mlir::Attribute> perDim;
  mlir::SmallVector<int64_t> segments;
  bool anyZigzag = false;
  for (size_t d = 0; d < dims.size(); ++d) {
    mlir::SmallVector<mlir::Attribute> axes;
    for (const std::string &a : dims[d])
      axes.push_back(mlir::StringAttr::get(&ctx, a));
    perDim.push_back(mlir::ArrayAttr::get(&ctx, axes));
    bool zz = d < zigzag.size() && zigzag[d];
    anyZigzag |= zz;
    segments.push_back(zz ? dist::kZigzagSegments : 1);
  }
  auto none = mlir::ArrayAttr::get(&ctx, {});
  return dist::LayoutAttr::get(&ctx, mlir::ArrayAttr::get(&ctx, perDim), none, none, none,
                               mlir::DenseI64ArrayAttr::get(
                                   &ctx, anyZigzag ? segments : mlir::SmallVector<int64_t>{}));
}

void Generator::stageField(mlir::NamedAttrList &attrs, int64_t stage) const {
  if (p.pp > 1)
    attrs.set(dist::kStageAttr, mlir::IntegerAttr::get(mlir::IntegerType::get(&ctx, 64), stage));
}

std::vector<Arg> Generator::functionArgs(bool plan) {
  std::vector<Arg> args;
  int64_t stage = 0;
  auto str = [&](const std::string &v) { return mlir::StringAttr::get(&ctx, v); };
  auto arg = [&](const std::string &n, const Shape &global, const Shape &local,
                 mlir::Attribute layout, int64_t bound = 0) {
    Arg a{n, plan ? local : global, {}};
    if (!plan) {
      a.attrs.set(ref::kNameAttr, str(n));
      if (bound)
        a.attrs.set("ref.bound", mlir::IntegerAttr::get(mlir::IntegerType::get(&ctx, 64), bound));
    } else {
      a.attrs.set(dist::kValueAttr, str(n));
      a.attrs.set(dist::kLayoutAttr, layout);
      stageField(a.attrs, stage);
    }
    args.push_back(std::move(a));
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
  arg("mask", {B, S}, {z.B, z.S}, layoutOf({tok[0], tok[1]}, {false, p.cp > 1}), 2);
  for (const Weight &w : weights) {
    stage = w.stage;
    arg(w.name, w.global, localShape(w), layoutOf(w.split));
  }
  return args;
}

void Generator::reference() {
  Body b(ctx, functionArgs(false));
  Sizes z = sizes(false);
  std::string count = b.reduceSum("tokens", "mask", {0, 1}, "loss-normalization");
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
  std::vector<std::string> grads, wrt;
  std::vector<std::pair<std::string, mlir::NamedAttrList>> results;
  auto named = [&](const std::string &n) {
    mlir::NamedAttrList attrs;
    attrs.set(ref::kNameAttr, mlir::StringAttr::get(&ctx, n));
    return attrs;
  };
  results.push_back({lossName, named("loss")});
  for (const Weight &w : weights) {
    grads.push_back(b.name("d_" + w.name));
    wrt.push_back(w.name);
    results.push_back({grads.back(), named("d_" + w.name)});
  }
  b.grad(grads, lossName, wrt);
  mlir::func::FuncOp f = finishFunction(module, "reference", b, b.lines, results, comments);
  f->setAttr(ref::kReferenceAttr, mlir::UnitAttr::get(&ctx));
}

Body Generator::planBody() { return Body(ctx, functionArgs(true)); }

void Generator::planFunction(Body &b, const std::vector<Line> &lines,
                             const std::vector<std::pair<std::string, mlir::NamedAttrList>> &results,
                             bool pipelined) {
  mlir::OpBuilder builder(&ctx);
  builder.setInsertionPointToEnd(module.getBody());
  mlir::SmallVector<mlir::Attribute> axes;
  for (const std::string &a : meshAxes)
    axes.push_back(builder.getStringAttr(a));
  dist::MeshOp::create(builder, builder.getUnknownLoc(), "mesh", builder.getArrayAttr(axes),
                       builder.getDenseI64ArrayAttr(meshShape));
  mlir::func::FuncOp f = finishFunction(module, "plan", b, lines, results, comments);
  f->setAttr(dist::kMeshAttr, mlir::FlatSymbolRefAttr::get(&ctx, "mesh"));
  if (pipelined)
    f->setAttr(dist::kPipelineAttr, builder.getStringAttr("pp"));
}

/// A plan output's attributes: the reference value it holds, its layout, its stage.
static mlir::NamedAttrList outputAttrs(mlir::MLIRContext &ctx, const std::string &value,
                                      mlir::Attribute layout) {
  mlir::NamedAttrList attrs;
  attrs.set(dist::kValueAttr, mlir::StringAttr::get(&ctx, value));
  attrs.set(dist::kLayoutAttr, layout);
  return attrs;
}

void Generator::plan() {
  if (p.pp > 1)
    return pipelinePlan();
  Sizes z = sizes(true);
  Body b = planBody();
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
    std::vector<std::string> gs, wrt;
    for (const Weight &w : weights) {
      gs.push_back(b.name("g_" + mb + w.name));
      wrt.push_back(w.name);
    }
    b.comment("The gradient of the sum of every rank's share (through the collectives).");
    b.grad(gs, part, wrt);
    for (size_t k = 0; k < weights.size(); ++k) {
      const std::string &n = weights[k].name;
      acc[n] = acc.count(n) ? b.binary<ref::AddOp>("acc_" + n, acc[n], gs[k]) : gs[k];
    }
  }
  // The reported loss: the summed cross-entropy over the global count, plus the
  // load-balancing terms (complete on every rank).
  std::vector<std::string> lossTerms;
  for (std::string ce : ces) {
    if (!tokenAndCp.empty())
      ce = b.allReduce("ce_all", ce, tokenAndCp);
    lossTerms.push_back(b.binary<ref::DivOp>("loss_ce", ce, count));
  }
  lossTerms.insert(lossTerms.end(), auxAll.begin(), auxAll.end());
  std::string lossOut = b.scale("loss", sumOf(b, "loss_sum", lossTerms), 1.0);
  b.comment("Gradients: summed over the axes that replicate each weight.");
  std::vector<std::pair<std::string, mlir::NamedAttrList>> results;
  results.push_back({lossOut, outputAttrs(ctx, "loss", layoutOf({}))});
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
    results.push_back({g, outputAttrs(ctx, "d_" + w.name, layoutOf(split))});
  }
  planFunction(b, b.lines, results, false);
}

std::vector<Generator::Event> Generator::scheduleOf(int64_t s) const {
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

int64_t Generator::warmup(int64_t s) const {
  int64_t S = p.pp, total = p.microbatches * v;
  if (p.schedule == "gpipe")
    return total;
  if (v == 1)
    return std::min(S - 1 - s, total);
  return std::min((S - s - 1) * 2 + (v - 1) * S, total);
}

void Generator::post(std::vector<Line> &out, const std::vector<mlir::Operation *> &msgs,
                     int64_t &batches) {
  if (msgs.size() > 1)
    ++batches;
  for (mlir::Operation *m : msgs) {
    if (msgs.size() > 1)
      m->setAttr("batch", mlir::IntegerAttr::get(mlir::IntegerType::get(&ctx, 64), batches));
    out.push_back({"", m});
  }
}

namespace {

/// One event of a stage's schedule: the messages it receives, its ops, and the
/// messages it sends.
struct EventLines {
  std::vector<mlir::Operation *> recvs, sends;
  std::vector<Line> comp;
};

/// Writes a pipelined plan (Generator::pipelinePlan): the values its stages share.
struct PipelineWriter {
  Generator &gen;
  const Parallel &p;
  Sizes z, zm; // the rank's sizes, and a microbatch's
  Body b;
  int64_t S, M, v, Bm, last, stageRanks; // stageRanks: the ranks of one stage
  Shape act;
  std::vector<std::string> tokenAndCp;
  // Per (model chunk, microbatch): input, output, load-balancing terms; per
  // microbatch: the cross-entropy (sum and mean) on the last stage.
  std::vector<std::vector<std::string>> in, out;
  std::vector<std::vector<std::vector<std::string>>> aux;
  std::vector<std::string> ce, ceMean;
  std::map<std::string, std::vector<std::string>> grads; // per weight, per microbatch
  std::vector<std::string> stagePart; // each stage's terms of the reported loss
  std::vector<Line> body;
  std::vector<std::pair<std::string, mlir::NamedAttrList>> results; // (value, result attrs)
  int64_t batches = 0;

  explicit PipelineWriter(Generator &gen);

  std::string mbName(int64_t i) const {
    return M > 1 ? "mb" + std::to_string(i) + "_" : std::string();
  }
  static std::string tag(const char *kind, int64_t j, int64_t i) {
    return std::string(kind) + "/c" + std::to_string(j) + "/mb" + std::to_string(i);
  }

  /// Stage s: its events in its schedule's order, its gradients and its loss terms.
  void writeStage(int64_t s);
  /// On the last stage: the global count of labelled tokens.
  std::string globalCount();
  /// The forward of event `e` (chunk j = e.chunk * S + s) on stage s.
  EventLines forward(int64_t s, const Generator::Event &e, const std::string &count);
  /// The backward of event `e` on stage s: one ref.grad of the chunk's part of the loss.
  EventLines backward(int64_t s, const Generator::Event &e);
  /// The ref.grad of `part` with respect to chunk j's weights and (but on chunk 0) its
  /// input, whose gradient is sent back.
  void chunkGradient(int64_t s, int64_t j, int64_t i, const std::string &part,
                     EventLines &d);
  /// Stage s's events written in steps, with the messages between two steps posted
  /// together.
  void writeSteps(int64_t s, std::vector<EventLines> &events);
  /// The gradients of stage s's weights: accumulated and reduced.
  void stageGradients(int64_t s);
  /// Stage s's terms of the reported loss, summed into stagePart[s].
  void stageLoss(int64_t s, const std::string &count);
  /// The reported loss (its stage goes to `lossAttrs`).
  std::string reportedLoss(mlir::NamedAttrList &lossAttrs);
};

PipelineWriter::PipelineWriter(Generator &gen)
    : gen(gen), p(gen.p), z(gen.sizes(true)), b(gen.planBody()) {
  S = p.pp;
  M = p.microbatches;
  v = gen.v;
  Bm = z.B / M;
  last = S * v - 1;
  int64_t ranks = 1;
  for (int64_t n : gen.meshShape)
    ranks *= n;
  stageRanks = ranks / S;
  zm = z;
  zm.B = Bm;
  act = {Bm, z.Sres, gen.H};
  tokenAndCp = gen.tokenAxes;
  if (p.cp > 1)
    tokenAndCp.push_back("cp");
  in.assign(S * v, std::vector<std::string>(M));
  out.assign(S * v, std::vector<std::string>(M));
  aux.assign(S * v, std::vector<std::vector<std::string>>(M));
  ce.resize(M);
  ceMean.resize(M);
  for (const Weight &w : gen.weights)
    grads[w.name].resize(M);
  stagePart.resize(S);
}

void PipelineWriter::writeStage(int64_t s) {
  b.stage = s;
  std::vector<Generator::Event> order = gen.scheduleOf(s);
  std::string names;
  for (const Generator::Event &e : order)
    names += std::string(" ") + (e.forward ? "F" : "B") + std::to_string(e.mb) +
             (v > 1 ? "c" + std::to_string(e.chunk) : "");
  body.push_back({"Stage " + std::to_string(s) + " (" + p.schedule + "):" + names, nullptr});
  std::string count;
  if (s == S - 1)
    count = globalCount();
  std::vector<EventLines> events;
  for (const Generator::Event &e : order) {
    EventLines d = e.forward ? forward(s, e, count) : backward(s, e);
    d.comp = std::move(b.lines);
    b.lines.clear();
    events.push_back(std::move(d));
  }
  writeSteps(s, events);
  stageGradients(s);
  stageLoss(s, count);
  body.insert(body.end(), b.lines.begin(), b.lines.end());
  b.lines.clear();
}

std::string PipelineWriter::globalCount() {
  b.comment("The global count of labelled tokens.");
  std::string count = b.reduceSum("tokens_local", "mask", {0, 1});
  if (!tokenAndCp.empty())
    count = b.allReduce("tokens", count, tokenAndCp);
  body.insert(body.end(), b.lines.begin(), b.lines.end());
  b.lines.clear();
  return count;
}

EventLines PipelineWriter::forward(int64_t s, const Generator::Event &e,
                                   const std::string &count) {
  EventLines d;
  int64_t j = e.chunk * S + s, i = e.mb;
  std::string mb = mbName(i);
  b.comment("F: chunk " + std::to_string(j) + ", microbatch " + std::to_string(i));
  std::string h;
  if (j == 0) {
    h = M > 1 ? b.slice(mb + "x", "x", {i * Bm, 0, 0}, act) : "x";
  } else {
    h = b.name(mb + "c" + std::to_string(j) + "_in");
    in[j][i] = h;
    d.recvs.push_back(b.recv(h, (j - 1) % S, s, tag("act", j, i), act));
  }
  for (int64_t l = gen.chunkStart[j]; l < gen.chunkStart[j + 1]; ++l)
    h = gen.layer(b, zm, l, h, aux[j][i]);
  out[j][i] = h;
  if (j == last) {
    std::string li = "labels", mi = "mask";
    if (M > 1) {
      li = b.slice(mb + "labels", "labels", {i * Bm, 0, 0}, {Bm, z.S, gen.V});
      mi = b.slice(mb + "mask", "mask", {i * Bm, 0}, {Bm, z.S});
    }
    ceMean[i] = gen.head(b, zm, h, li, mi, count, mb, ce[i]);
  } else {
    d.sends.push_back(b.send(h, s, (j + 1) % S, tag("act", j + 1, i)));
  }
  return d;
}

EventLines PipelineWriter::backward(int64_t s, const Generator::Event &e) {
  EventLines d;
  int64_t j = e.chunk * S + s, i = e.mb;
  std::string mb = mbName(i);
  b.comment("B: chunk " + std::to_string(j) + ", microbatch " + std::to_string(i));
  // What this rank differentiates: on the last chunk its share of the loss (as
  // without pipelining); before it, the vector-Jacobian product of the chunk's
  // output with the cotangent the next chunk sends back.
  std::vector<std::string> shares;
  if (j == last) {
    shares.push_back(b.scale(mb + "ce_share", ceMean[i], 1.0 / (double)p.tp));
  } else {
    std::string dy = b.name(mb + "c" + std::to_string(j) + "_dout");
    d.recvs.push_back(b.recv(dy, (j + 1) % S, s, tag("grad", j + 1, i), act));
    std::string prod = b.binary<ref::MulOp>( mb + "c" + std::to_string(j) + "_vjp", out[j][i], dy);
    shares.push_back(b.reduceSum(mb + "c" + std::to_string(j) + "_vjp_sum", prod, {0, 1, 2}));
  }
  // A load-balancing term is complete on every rank of its stage.
  for (const std::string &a : aux[j][i])
    shares.push_back(b.scale(a + "_share", a, 1.0 / (double)stageRanks));
  std::string part = gen.sumOf(b, mb + "c" + std::to_string(j) + "_part", shares);
  chunkGradient(s, j, i, part, d);
  return d;
}

void PipelineWriter::chunkGradient(int64_t s, int64_t j, int64_t i, const std::string &part,
                                   EventLines &d) {
  std::string mb = mbName(i);
  std::vector<std::string> outs, wrt;
  std::vector<const Weight *> ws;
  for (const Weight &w : gen.weights)
    if (w.layer >= 0 ? gen.chunkOfLayer(w.layer) == j : j == last)
      ws.push_back(&w);
  for (const Weight *w : ws) {
    std::string g = b.name("g_" + mb + w->name);
    grads[w->name][i] = g;
    outs.push_back(g);
    wrt.push_back(w->name);
  }
  std::string din;
  if (j > 0) {
    din = b.name(mb + "c" + std::to_string(j) + "_din");
    outs.push_back(din);
    wrt.push_back(in[j][i]);
  }
  b.grad(outs, part, wrt);
  if (j > 0)
    d.sends.push_back(b.send(din, s, (j - 1) % S, tag("grad", j, i)));
}

void PipelineWriter::writeSteps(int64_t s, std::vector<EventLines> &events) {
  // Steps: a warm-up forward, a steady forward-and-backward pair, or a cool-down
  // backward; the messages between two steps are posted together (Megatron's
  // send_forward_recv_backward and friends).
  int64_t first = p.schedule == "gpipe" ? 0 : gen.warmup(s);
  int64_t end = p.schedule == "gpipe" ? 0 : first + 2 * (M * v - first);
  std::vector<mlir::Operation *> comm;
  for (size_t e = 0; e < events.size();) {
    size_t n = ((int64_t)e >= first && (int64_t)e + 1 < end) ? 2 : 1;
    for (size_t k = e; k < e + n; ++k)
      comm.insert(comm.end(), events[k].recvs.begin(), events[k].recvs.end());
    gen.post(body, comm, batches);
    comm.clear();
    for (size_t k = e; k < e + n; ++k) {
      body.insert(body.end(), events[k].comp.begin(), events[k].comp.end());
      comm.insert(comm.end(), events[k].sends.begin(), events[k].sends.end());
    }
    e += n;
  }
  gen.post(body, comm, batches);
}

void PipelineWriter::stageGradients(int64_t s) {
  b.comment("Stage " + std::to_string(s) + ": gradients accumulated over the microbatches "
            "(in order), then summed over the axes that replicate each weight.");
  for (const Weight &w : gen.weights) {
    if (w.stage != s)
      continue;
    std::string g = grads[w.name][0];
    for (int64_t i = 1; i < M; ++i)
      g = b.binary<ref::AddOp>("acc_" + w.name, g, grads[w.name][i]);
    std::vector<std::string> sum, scatter;
    auto split = gen.gradSplit(w, sum, scatter);
    if (!scatter.empty())
      g = b.reduceScatter("d_" + w.name + "_rs", g, scatter, 0, gen.groupSize(scatter));
    g = sum.empty() ? b.scale("d_" + w.name, g, 1.0) : b.allReduce("d_" + w.name, g, sum);
    mlir::NamedAttrList attrs;
    attrs.set(dist::kValueAttr, mlir::StringAttr::get(&gen.ctx, "d_" + w.name));
    attrs.set(dist::kLayoutAttr, gen.layoutOf(split));
    gen.stageField(attrs, s);
    results.push_back({g, attrs});
  }
}

void PipelineWriter::stageLoss(int64_t s, const std::string &count) {
  // The stage's terms of the reported loss: the load-balancing terms of its
  // chunks, and on the last stage the cross-entropy over the global count.
  std::vector<std::string> terms;
  if (s == S - 1)
    for (int64_t i = 0; i < M; ++i) {
      std::string c = ce[i];
      if (!tokenAndCp.empty())
        c = b.allReduce("ce_all", c, tokenAndCp);
      terms.push_back(b.binary<ref::DivOp>("loss_ce", c, count));
    }
  for (int64_t j = s; j < S * v; j += S)
    for (int64_t i = 0; i < M; ++i)
      terms.insert(terms.end(), aux[j][i].begin(), aux[j][i].end());
  if (!terms.empty())
    stagePart[s] = gen.sumOf(b, "loss_stage" + std::to_string(s), terms);
}

std::string PipelineWriter::reportedLoss(mlir::NamedAttrList &lossAttrs) {
  // The reported loss. When only the last stage has terms it returns it; otherwise
  // every stage's terms are joined over the pipeline axis.
  b.stage = -1;
  bool spread = false;
  for (int64_t s = 0; s + 1 < S; ++s)
    spread |= !stagePart[s].empty();
  if (!spread) {
    b.stage = S - 1;
    gen.stageField(lossAttrs, S - 1);
    return b.scale("loss", stagePart[S - 1], 1.0);
  }
  b.comment("The reported loss: every stage's load-balancing terms and the last stage's "
            "cross-entropy, joined over the pipeline axis.");
  for (int64_t s = 0; s < S; ++s) {
    if (stagePart[s].empty()) {
      b.stage = s;
      stagePart[s] = b.constant("loss_stage" + std::to_string(s), 0.0, {});
    }
  }
  b.stage = -1;
  std::string joined = b.stageSelect("loss_stages", stagePart);
  return b.allReduce("loss", joined, {"pp"});
}

} // namespace

void Generator::pipelinePlan() {
  PipelineWriter pw(*this);
  for (int64_t s = 0; s < pw.S; ++s)
    pw.writeStage(s);
  mlir::NamedAttrList lossAttrs;
  lossAttrs.set(dist::kValueAttr, mlir::StringAttr::get(&ctx, "loss"));
  lossAttrs.set(dist::kLayoutAttr, layoutOf({}));
  std::string loss = pw.reportedLoss(lossAttrs);
  Body &b = pw.b;
  std::vector<Line> &body = pw.body;
  body.insert(body.end(), b.lines.begin(), b.lines.end());
  std::vector<std::pair<std::string, mlir::NamedAttrList>> results;
  results.push_back({loss, lossAttrs});
  results.insert(results.end(), pw.results.begin(), pw.results.end());
  planFunction(b, body, results, true);
}

} // namespace planproof::plangen
