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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace planproof::plangen {


using Shape = std::vector<int64_t>;

inline std::string ty(const Shape &s) {
  std::string t = "tensor<";
  for (int64_t d : s)
    t += std::to_string(d) + "x";
  return t + "f32>";
}

inline std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

inline std::string list(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

inline std::string axesList(const std::vector<std::string> &a) {
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

  bool setup(std::string &err);
  bool reducedSizes(std::string &err);
  bool fullSizes(std::string &err);

  /// Pipeline: model chunk j (L / (pp * v) consecutive layers) runs on stage j mod pp.
  int64_t chunkLayers() const { return L / (p.pp * v); }
  int64_t stageOfLayer(int64_t l) const { return (l / chunkLayers()) % p.pp; }

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
  Sizes sizes(bool plan) const;

  /// x [B, Sres, H] -> the layer's output; `P` prefixes names.
  std::string layer(Body &b, const Sizes &z, int64_t l, std::string x,
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

  /// `, dist.stage = k` for a value held by one pipeline stage (none without pp).
  std::string stageField(int64_t stage) const {
    return p.pp > 1 ? ", dist.stage = " + std::to_string(stage) : "";
  }

  std::string functionArgs(bool plan);

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

  std::string reference();

  /// A plan function's body with its arguments (local shapes) declared.
  Body planBody(const Sizes &z) const;

  /// The mesh and the plan function around `body`.
  std::string planFunction(const std::vector<std::string> &body, const std::string &outs,
                           const std::string &rets, const std::string &rtys,
                           const std::string &attrs);

  std::string plan();
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
  void post(std::vector<std::string> &out, std::vector<std::string> msgs, int64_t &batches);

  /// The plan on a mesh with a pipeline axis: stage s runs model chunks s, s + pp, ...
  /// (each L / (pp * v) consecutive layers), stage 0 reads the batch, the last stage
  /// holds the final norm, the LM head and the loss's inputs. A chunk's forward on a
  /// microbatch receives its input from the previous chunk's stage and sends its output
  /// to the next; its backward is one ref.grad of the vector-Jacobian product
  /// sum(output * received cotangent) (on the last chunk: the rank's loss share) plus
  /// the chunk's load-balancing shares, with respect to the chunk's weights and input,
  /// whose gradient is sent back. Each stage writes its events in its schedule's order.
  std::string pipelinePlan();

};

} // namespace planproof::plangen

#endif
