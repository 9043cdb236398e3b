//===- PlanGenInternal.h - the plan generator's internals -----*- C++ -*-===//
//
// The Generator of `planproof plan` (PlanGen.h): the text builder of one function
// (Body), the weights and sizes of a model configuration, and the generator itself,
// shared by PlanGen.cpp (configuration, reduced sizes, weights, the layer code and the
// loss) and PlanFunctions.cpp (the reference and plan functions, pipelined plans and
// their schedules). Internal to lib/Plan.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_PLAN_PLANGENINTERNAL_H
#define PLANPROOF_PLAN_PLANGENINTERNAL_H

#include "Plan/PlanGen.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace planproof::plangen {

/// The most layer runs (layers x microbatches) a generated plan holds: 16x the largest
/// production configuration written (Llama3-70B, 80 layers x 32 microbatches).
constexpr int64_t kMaxLayerRuns = 1 << 15;

using Shape = std::vector<int64_t>;

/// A line of a function being written: an op (built, not yet in a block), or a
/// comment, printed before the next op that has results.
struct Line {
  std::string comment;
  mlir::Operation *op = nullptr;
};

/// An argument of a generated function: its name, shape and attributes.
struct Arg {
  std::string name;
  Shape shape;
  mlir::NamedAttrList attrs;
};

/// One function body, built with MLIR's builders (PlanBody.cpp). Every op is created
/// unlinked -- its operands are Values, so the use-def chains hold -- and listed in
/// `lines` in the order the function will hold it; finishFunction places them. Values
/// are known by names unique in the function, which become their locations (NameLoc)
/// and so their printed SSA names.
struct Body {
  Body(mlir::MLIRContext &ctx, const std::vector<Arg> &args);

  mlir::MLIRContext *ctx;
  std::unique_ptr<mlir::Block> entry; // the function's arguments
  std::vector<Arg> args;
  std::vector<Line> lines;
  std::map<std::string, Shape> shape;
  std::map<std::string, mlir::Value> val;
  std::map<std::string, int> uses;
  std::set<std::string> taken;
  /// On a pipelined plan, the stage the ops being written run on (-1: every stage).
  int64_t stage = -1;

  /// A fresh SSA name: `base`, else `base_1`, `base_2`, ... (skipping names already
  /// used, including other bases that end in a number).
  std::string name(const std::string &base);
  mlir::Value v(const std::string &name) const;
  mlir::RankedTensorType type(const Shape &s) const;
  mlir::Location loc(const std::string &name) const;
  mlir::IntegerAttr i64(int64_t n) const;
  mlir::ArrayAttr axes(const std::vector<std::string> &a) const;
  void comment(const std::string &c) { lines.push_back({c, nullptr}); }

  /// Records `op`'s first result as `r` (a name from name()), marks it with the stage
  /// and lists it.
  std::string place(mlir::Operation *op, const std::string &r);
  /// Builds OpT of result type `s` from `operands` (values and attributes), named
  /// after `base`.
  template <typename OpT, typename... A>
  std::string make(const std::string &base, const Shape &s, A &&...operands) {
    return build<OpT>(base, type(s), std::forward<A>(operands)...);
  }
  /// Builds OpT from its builder's arguments `a` (after the location), named after
  /// `base`.
  template <typename OpT, typename... A> std::string build(const std::string &base, A &&...a) {
    std::string r = name(base);
    mlir::OpBuilder b(ctx);
    return place(OpT::create(b, loc(r), std::forward<A>(a)...), r);
  }

  std::string matmul(const std::string &r, const std::string &a, const std::string &b,
                     int ld = 1, int rd = 0);
  std::string bmm(const std::string &r, const std::string &a, const std::string &b, int ld, int rd);
  std::string reshape(const std::string &r, const std::string &x, Shape s);
  std::string transpose(const std::string &r, const std::string &x, std::vector<int64_t> perm);
  std::string broadcast(const std::string &r, const std::string &x, std::vector<int64_t> dims,
                        Shape s);
  /// An op of one operand and its shape (softmax, silu, gelu, ...).
  template <typename OpT> std::string unary(const std::string &r, const std::string &x) {
    return make<OpT>(r, shape.at(x), v(x));
  }
  /// An elementwise op of two operands of one shape.
  template <typename OpT>
  std::string binary(const std::string &r, const std::string &a, const std::string &b) {
    return make<OpT>(r, shape.at(a), v(a), v(b));
  }
  std::string topk(const std::string &r, const std::string &x, int64_t k);
  std::string scale(const std::string &r, const std::string &x, double f);
  std::string norm(const std::string &r, const std::string &x, const std::string &w);
  /// `role`: the reference's ref.role attribute ("" for none).
  std::string reduceSum(const std::string &r, const std::string &x, std::vector<int64_t> dims,
                        const std::string &role = "");
  std::string slice(const std::string &r, const std::string &x, std::vector<int64_t> off,
                    Shape sizes);
  std::string concat(const std::string &r, const std::string &a, const std::string &b, int dim);
  /// Causal softmax; `offset`, when given, names the index value of the rows' start.
  std::string causalSoftmax(const std::string &r, const std::string &x,
                            const std::string &offset = "");
  std::string capacityDispatch(const std::string &r, const std::string &chosen, int64_t capacity,
                               int64_t groups, Shape s);
  std::string crossEntropySum(const std::string &r, const std::string &logits,
                              const std::string &labels, const std::string &mask);
  std::string constant(const std::string &r, double value, Shape s);
  /// Index arithmetic: the rank's position on `axis`, constants, products, differences.
  std::string axisIndex(const std::string &r, const std::string &axis);
  std::string indexConstant(const std::string &r, int64_t n);
  std::string muli(const std::string &r, const std::string &a, const std::string &b);
  std::string subi(const std::string &r, const std::string &a, const std::string &b);
  /// The gradients of `loss` with respect to `wrt`, named `outs` (fresh names whose
  /// shapes are recorded).
  void grad(const std::vector<std::string> &outs, const std::string &loss,
            const std::vector<std::string> &wrt);
  // Collectives.
  std::string allReduce(const std::string &r, const std::string &x,
                        const std::vector<std::string> &axes, const std::string &kind = "sum");
  std::string allGather(const std::string &r, const std::string &x,
                        const std::vector<std::string> &axes, int dim, int64_t n, bool zigzag);
  std::string reduceScatter(const std::string &r, const std::string &x,
                            const std::vector<std::string> &axes, int dim, int64_t n);
  std::string shardSlice(const std::string &r, const std::string &x,
                         const std::vector<std::string> &axes, int dim, int64_t n);
  std::string allToAll(const std::string &r, const std::string &x,
                       const std::vector<std::string> &axes, int split, int cat, int64_t n);
  std::string stageSelect(const std::string &r, const std::vector<std::string> &values);
  /// Pipeline messages: built but not listed (the pipeline writer posts them in
  /// batches). recv names its result `r`.
  mlir::Operation *recv(const std::string &r, int64_t from, int64_t to, const std::string &tag,
                        Shape s);
  mlir::Operation *send(const std::string &x, int64_t from, int64_t to, const std::string &tag);
};

/// The comments of a module being written, by function and by the name of the first
/// result of the op each precedes.
using Comments = std::map<std::pair<std::string, std::string>, std::vector<std::string>>;

/// Finishes function `name` of `module`: body's arguments (with their attributes), its
/// lines placed in order (their comments recorded in `comments`), and a return of
/// `results` (values with their result attributes).
mlir::func::FuncOp finishFunction(
    mlir::ModuleOp module, const std::string &name, Body &body, const std::vector<Line> &lines,
    const std::vector<std::pair<std::string, mlir::NamedAttrList>> &results, Comments &comments);

/// The module's text: MLIR's printer (values named after their locations) with the
/// comments put back before their ops.
std::string printModule(mlir::ModuleOp module, const Comments &comments);

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

  mlir::MLIRContext &ctx;
  mlir::ModuleOp module;
  Comments comments;

  Generator(const Model &m, const Parallel &p, mlir::MLIRContext &ctx, mlir::ModuleOp module)
      : m(m), p(p), ctx(ctx), module(module) {}

  bool setup(std::string &err);
  bool reducedSizes(std::string &err);
  bool fullSizes(std::string &err);

  /// Pipeline: model chunk j (consecutive layers) runs on stage j mod pp.
  /// Model chunk j holds layers [chunkStart[j], chunkStart[j + 1]).
  std::vector<int64_t> chunkStart;
  /// Cuts the L layers into pp x v chunks: equal, or (when L + 2 divides) the first
  /// and last one layer short. False with the reason otherwise.
  bool partitionLayers(std::string &err);
  int64_t chunkOfLayer(int64_t l) const {
    return std::upper_bound(chunkStart.begin(), chunkStart.end(), l) - chunkStart.begin() - 1;
  }
  int64_t stageOfLayer(int64_t l) const { return chunkOfLayer(l) % p.pp; }

  std::vector<std::string> tp() const { return p.tp > 1 ? std::vector<std::string>{"tp"} : std::vector<std::string>{}; }
  std::vector<std::string> ep() const { return p.ep > 1 ? std::vector<std::string>{"ep"} : std::vector<std::string>{}; }

  void addWeights();

  int64_t groupSize(const std::vector<std::string> &axes) const {
    int64_t n = 1;
    for (const std::string &a : axes)
      for (size_t i = 0; i < meshAxes.size(); ++i)
        if (meshAxes[i] == a)
          n *= meshShape[i];
    return n;
  }

  Shape localShape(const Weight &w) const;

  /// #dist.layout<[...]>: per dimension the axes splitting it (zigzag where marked).
  mlir::Attribute layoutOf(const std::vector<std::vector<std::string>> &dims,
                           const std::vector<bool> &zigzag = {}) const;

  /// The sequence positions the rank holds, and the local sizes.
  Sizes sizes(bool plan) const;

  /// x [B, Sres, H] -> the layer's output; `P` prefixes names. Under `compact`, a
  /// call of the layer's function (layerCall).
  std::string layer(Body &b, const Sizes &z, int64_t l, std::string x,
                    std::vector<std::string> &auxTerms);

  /// A layer stated once (`compact`): its function's name, the names of its weight
  /// arguments (after `x`, without the layer prefix) and its result types.
  struct LayerFunction {
    std::string name;
    std::vector<std::string> weights;
    std::vector<mlir::Type> results;
  };
  /// By the sizes and kind of layer they compute.
  std::map<std::string, LayerFunction> layerFunctions;
  const LayerFunction &layerFunction(const Sizes &z, int64_t l);
  std::string layerCall(Body &b, const Sizes &z, int64_t l, const std::string &x,
                        std::vector<std::string> &auxTerms);

  /// The forward of one microbatch: its cross-entropy sum over the global count, and
  /// (in `aux`) its layers' load-balancing terms.
  std::string step(Body &b, const Sizes &z, const std::string &x, const std::string &labels,
                   const std::string &mask, const std::string &count, const std::string &mb,
                   std::string &ceOut, std::vector<std::string> &aux);

  /// The final norm, the LM head and the cross-entropy of one microbatch: its sum
  /// (`ceOut`) and the result, that sum over the global count.
  std::string head(Body &b, const Sizes &z, const std::string &h, const std::string &labels,
                   const std::string &mask, const std::string &count, const std::string &mb,
                   std::string &ceOut);

  std::string sumOf(Body &b, const std::string &name, std::vector<std::string> terms);

  /// dist.stage = k for a value held by one pipeline stage (none without pp).
  void stageField(mlir::NamedAttrList &attrs, int64_t stage) const;

  /// The arguments of the reference (global shapes) or of the plan (local shapes,
  /// layouts, stages).
  std::vector<Arg> functionArgs(bool plan);

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

  /// Writes the reference into `module`.
  void reference();

  /// A plan function's body with its arguments (local shapes) declared.
  Body planBody();

  /// Writes the mesh and the plan function of `lines` into `module`.
  void planFunction(Body &b, const std::vector<Line> &lines,
                    const std::vector<std::pair<std::string, mlir::NamedAttrList>> &results,
                    bool pipelined);

  /// Writes the plan into `module`.
  void plan();
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
  std::vector<Event> scheduleOf(int64_t s) const;
  int64_t warmup(int64_t s) const;

  /// Marks messages posted together as one batch (batch_isend_irecv) when there are two
  /// or more.
  void post(std::vector<Line> &out, const std::vector<mlir::Operation *> &msgs,
            int64_t &batches);

  /// The plan on a mesh with a pipeline axis: stage s runs model chunks s, s + pp, ...
  /// (each L / (pp * v) consecutive layers), stage 0 reads the batch, the last stage
  /// holds the final norm, the LM head and the loss's inputs. A chunk's forward on a
  /// microbatch receives its input from the previous chunk's stage and sends its output
  /// to the next; its backward is one ref.grad of the vector-Jacobian product
  /// sum(output * received cotangent) (on the last chunk: the rank's loss share) plus
  /// the chunk's load-balancing shares, with respect to the chunk's weights and input,
  /// whose gradient is sent back. Each stage writes its events in its schedule's order.
  void pipelinePlan();

};

} // namespace planproof::plangen

#endif
