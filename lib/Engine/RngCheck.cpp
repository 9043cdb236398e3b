//===- RngCheck.cpp - random streams in independent mode --------*- C++ -*-===//
#include "Engine/RngCheck.h"
#include "Engine/Solver.h"

#include "Ref/RefDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <map>
#include <optional>

using namespace mlir;
using namespace planproof;

namespace {

/// One symbolic draw: an element of a plan dropout mask on a rank, both unknown.
struct Draw {
  const DrawBinding *binding;
  int maskId;                    // which reference mask
  std::vector<z3::expr> coords;  // the rank's mesh coordinates
  std::vector<z3::expr> local;   // the element's index in the op's result
  std::vector<z3::expr> global;  // its index in the reference mask
  std::optional<z3::expr> key, counter;
};

class StreamChecker {
public:
  StreamChecker(const Spec &spec, const SolverBudget &budget, VerifyResult &result)
      : spec(spec), mesh(spec.mesh), budget(budget), result(result) {}

  void run() {
    // A draw stands for the reference's only with the same drop probability.
    for (const DrawBinding &db : spec.draws) {
      if (db.mismatch.empty())
        continue;
      Violation v;
      v.kind = "rng";
      v.location = toSourceLoc(db.op->getLoc());
      v.at = spec.nameOf(db.op->getResult(0));
      v.value = db.refName;
      v.message = "random draw `" + v.at + "` does not draw what the reference draws: " +
                  db.mismatch;
      v.hint = "draw with the reference's drop probability";
      v.notes.push_back("in independent RNG mode a plan draw is proved to stand for a piece of "
                        "the reference's mask; the stream position may differ, what is drawn "
                        "may not");
      result.violations.push_back(std::move(v));
    }
    for (const Binding &b : spec.planInputs)
      argRef[b.index] = b.refName;
    // The step's integer inputs, and the values the reference gives them next step.
    for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
      if (spec.reference.getArgument(i).getType().isIndex()) {
        const std::string &n = spec.refInputs[i];
        z3::expr v = ctx.int_const(("state." + n).c_str());
        state.emplace(n, v);
        stateDomain.push_back(v >= 0 && v < ctx.int_val((int64_t)kIndexBound));
      }
    std::map<std::string, z3::expr> next = state;
    bool advances = false;
    auto ret = cast<func::ReturnOp>(spec.reference.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto it = spec.stateUpdates.find(spec.refOutputs[i]);
      if (it == spec.stateUpdates.end() || !v.getType().isIndex())
        continue;
      std::optional<z3::expr> e = refIndex(v);
      if (!e)
        return;
      next.insert_or_assign(it->second, *e);
      advances = true;
    }
    llvm::DenseMap<Value, int> maskIds;
    for (const DrawBinding &db : spec.draws)
      if (!maskIds.count(db.refMask)) maskIds[db.refMask] = (int)maskIds.size();

    const auto &draws = spec.draws;
    for (size_t i = 0; i < draws.size(); ++i)
      for (size_t j = i; j < draws.size(); ++j) {
        std::optional<Draw> a = makeDraw(draws[i], maskIds, "a", state);
        std::optional<Draw> b = makeDraw(draws[j], maskIds, "b", state);
        if (!a || !b)
          return;
        z3::expr same = sameDraw(*a, *b);
        z3::expr stream = *a->key == *b->key && *a->counter == *b->counter;
        // (1) distinct elements, one pair.
        query(*a, *b, stream && !same, "collision");
        // (2) one element, replicas on two ranks, different pairs.
        query(*a, *b, same && !stream, "replica");
      }
    if (draws.empty())
      return;
    if (!advances) {
      result.inconclusiveReasons.push_back(
          {toSourceLoc(draws[0].op->getLoc()),
           "independent RNG mode: the reference returns no next value of its random state "
           "(an index result with 'ref.updates'), so whether the next step draws fresh "
           "(key, counter) pairs cannot be checked"});
      return;
    }
    // (3) a pair drawn in this step (state) is not drawn in the next (next state).
    for (size_t i = 0; i < draws.size(); ++i)
      for (size_t j = 0; j < draws.size(); ++j) {
        std::optional<Draw> a = makeDraw(draws[i], maskIds, "a", state);
        std::optional<Draw> b = makeDraw(draws[j], maskIds, "b", next);
        if (!a || !b)
          return;
        query(*a, *b, *a->key == *b->key && *a->counter == *b->counter, "reuse");
      }
  }

private:
  const Spec &spec;
  const Mesh &mesh;
  SolverBudget budget;
  uint64_t workSoFar = 0; // the shared context's resource count after the last query
  VerifyResult &result;
  z3::context ctx;
  std::map<unsigned, std::string> argRef;
  std::map<std::string, z3::expr> state;
  std::vector<z3::expr> stateDomain;
  std::set<std::pair<Operation *, std::string>> reported;

  bool unsupported(Location loc, const std::string &why) {
    result.inconclusiveReasons.push_back({toSourceLoc(loc), "independent RNG mode: " + why});
    return false;
  }

  /// An integer value of the reference as a Z3 term over the state symbols.
  std::optional<z3::expr> refIndex(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return state.at(spec.refInputs[arg.getArgNumber()]);
    return arith(v, [&](Value x) { return refIndex(x); });
  }

  /// An integer value of the plan on the rank with coordinates `coords`, for the
  /// random state `st`.
  std::optional<z3::expr> planIndex(Value v, const std::vector<z3::expr> &coords,
                                    const std::map<std::string, z3::expr> &st) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto it = argRef.find(arg.getArgNumber());
      if (it == argRef.end() || !st.count(it->second)) {
        unsupported(spec.plan.getLoc(), "plan argument #" + std::to_string(arg.getArgNumber()) +
                                            " is not an integer input of the step");
        return std::nullopt;
      }
      return st.at(it->second);
    }
    if (auto ax = v.getDefiningOp<dist::AxisIndexOp>())
      return coords[mesh.axisIndex(ax.getAxis().str())];
    return arith(v, [&](Value x) { return planIndex(x, coords, st); });
  }

  template <class Rec>
  std::optional<z3::expr> arith(Value v, Rec rec) {
    Operation *op = v.getDefiningOp();
    if (auto c = dyn_cast<arith::ConstantOp>(op))
      if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        return ctx.int_val((int64_t)i.getInt());
    if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op)) {
      std::optional<z3::expr> a = rec(op->getOperand(0)), b = rec(op->getOperand(1));
      if (!a || !b)
        return std::nullopt;
      return isa<arith::AddIOp>(op) ? *a + *b : isa<arith::SubIOp>(op) ? *a - *b : *a * *b;
    }
    unsupported(op->getLoc(), "'" + op->getName().getStringRef().str() +
                                  "' computes a random key or counter; only arith.constant, "
                                  "addi, subi and muli on index inputs and dist.axis_index are "
                                  "supported");
    return std::nullopt;
  }

  std::optional<Draw> makeDraw(const DrawBinding &db, const llvm::DenseMap<Value, int> &maskIds,
                               const std::string &tag, const std::map<std::string, z3::expr> &st) {
    Draw d{&db, maskIds.lookup(db.refMask), {}, {}, {}, std::nullopt, std::nullopt};
    for (size_t a = 0; a < mesh.axes.size(); ++a)
      d.coords.push_back(ctx.int_const((tag + "." + mesh.axes[a]).c_str()));
    auto dm = cast<ref::DropoutMaskOp>(db.op);
    auto shape = dm.getType().getShape();
    z3::expr linear = ctx.int_val(0);
    for (size_t k = 0; k < shape.size(); ++k) {
      d.local.push_back(ctx.int_const((tag + ".i" + std::to_string(k)).c_str()));
      linear = linear * ctx.int_val((int64_t)shape[k]) + d.local.back();
    }
    d.key = planIndex(dm.getKey(), d.coords, st);
    std::optional<z3::expr> base = planIndex(dm.getCounter(), d.coords, st);
    if (!d.key || !base)
      return std::nullopt;
    d.counter = *base + linear;
    // The element's place in the reference mask (Layout::globalIndex, symbolically).
    for (size_t k = 0; k < shape.size(); ++k) {
      z3::expr x = d.local[k] + ctx.int_val((int64_t)db.blockOffset[k]);
      const std::vector<int> &axes = db.layout.dims[k];
      if (axes.empty()) {
        d.global.push_back(x);
        continue;
      }
      z3::expr pos = ctx.int_val(0);
      for (int a : axes)
        pos = pos * ctx.int_val((int64_t)mesh.shape[a]) + d.coords[a];
      int64_t segs = db.layout.segmentsOf(k), piece = db.blockShape[k] / segs;
      z3::expr p = ctx.int_val(piece);
      if (db.layout.zigzagAt(k)) {
        // Layout.h's blockToWhole: the minor axis holds chunks c and 2n-1-c of the
        // block of the others.
        int64_t n = mesh.shape[axes.back()];
        int64_t chunk = db.blockShape[k] / 2, blockLen = 2 * chunk * n;
        z3::expr inner = d.coords[axes.back()], outer = pos / ctx.int_val(n);
        z3::expr ch = ctx.int_val(chunk);
        z3::expr which = z3::ite(x < ch, inner, ctx.int_val(2 * n - 1) - inner);
        d.global.push_back(outer * ctx.int_val(blockLen) + which * ch + z3::mod(x, ch));
        continue;
      }
      d.global.push_back((x / p) * ctx.int_val(piece * mesh.groupSize(axes)) + pos * p + z3::mod(x, p));
    }
    return d;
  }

  z3::expr sameDraw(const Draw &a, const Draw &b) {
    if (a.maskId != b.maskId)
      return ctx.bool_val(false);
    z3::expr same = ctx.bool_val(true);
    for (size_t k = 0; k < a.global.size(); ++k)
      same = same && a.global[k] == b.global[k];
    return same;
  }

  void domain(z3::solver &s, const Draw &d) {
    for (size_t a = 0; a < mesh.axes.size(); ++a)
      s.add(d.coords[a] >= 0 && d.coords[a] < ctx.int_val((int64_t)mesh.shape[a]));
    auto shape = cast<ref::DropoutMaskOp>(d.binding->op).getType().getShape();
    for (size_t k = 0; k < shape.size(); ++k)
      s.add(d.local[k] >= 0 && d.local[k] < ctx.int_val((int64_t)shape[k]));
  }

  std::string rankOf(z3::model &m, const Draw &d) {
    std::string s = "(";
    for (size_t a = 0; a < mesh.axes.size(); ++a)
      s += (a ? ", " : "") + mesh.axes[a] + "=" + m.eval(d.coords[a], true).get_decimal_string(0);
    return s + ")";
  }

  std::string elementOf(z3::model &m, const Draw &d) {
    std::string s = d.binding->refName + "[";
    for (size_t k = 0; k < d.global.size(); ++k)
      s += (k ? "," : "") + m.eval(d.global[k], true).get_decimal_string(0);
    return s + "]";
  }

  std::string localOf(z3::model &m, const Draw &d) {
    std::string s = spec.nameOf(d.binding->op->getResult(0)) + "[";
    for (size_t k = 0; k < d.local.size(); ++k)
      s += (k ? "," : "") + m.eval(d.local[k], true).get_decimal_string(0);
    return s + "]";
  }

  std::string splitAxes(const DrawBinding &db, bool split) {
    std::set<int> used;
    for (auto &axes : db.layout.dims)
      used.insert(axes.begin(), axes.end());
    std::string s;
    for (size_t a = 0; a < mesh.axes.size(); ++a)
      if (used.count((int)a) == split && mesh.shape[a] > 1)
        s += (s.empty() ? "" : ", ") + mesh.axes[a];
    return s;
  }

  void query(const Draw &a, const Draw &b, const z3::expr &property, const std::string &what) {
    Operation *at = b.binding->op;
    if (reported.count({at, what}))
      return;
    z3::solver s(ctx);
    limitSolver(ctx, s, budget);
    for (const z3::expr &c : stateDomain)
      s.add(c);
    domain(s, a);
    domain(s, b);
    s.add(property);
    z3::check_result r;
    ++result.stats.solverQueries; // (the verdict's stats count the stream queries too)
    try {
      r = s.check();
    } catch (const z3::exception &e) {
      throwIfDeadlineEnded(budget, "checking random streams");
      result.inconclusiveReasons.push_back({toSourceLoc(at->getLoc()),
                                            std::string("independent RNG mode: Z3 error: ") + e.msg()});
      return;
    }
    // The context is shared by the queries: its count grows over them.
    uint64_t count = solverWorkOf(s);
    result.stats.noteSolverWork(count > workSoFar ? count - workSoFar : 0);
    workSoFar = std::max(workSoFar, count);
    if (r == z3::unsat)
      return;
    if (r == z3::unknown) {
      throwIfDeadlineEnded(budget, "checking random streams");
      result.inconclusiveReasons.push_back(
          {toSourceLoc(at->getLoc()), "independent RNG mode, on the " + what + " property of `" +
                                          spec.nameOf(at->getResult(0)) + "`: " +
                                          solverLimitReason(budget, s.reason_unknown())});
      return;
    }
    reported.insert({at, what});
    z3::model m = s.get_model();
    Violation v;
    v.kind = "rng";
    v.location = toSourceLoc(at->getLoc());
    v.at = spec.nameOf(at->getResult(0));
    v.value = b.binding->refName;
    std::string ra = rankOf(m, a), rb = rankOf(m, b);
    v.ranks = {ra};
    if (rb != ra)
      v.ranks.push_back(rb);
    std::string pairA = "(" + m.eval(*a.key, true).get_decimal_string(0) + ", " +
                        m.eval(*a.counter, true).get_decimal_string(0) + ")";
    std::string pairB = "(" + m.eval(*b.key, true).get_decimal_string(0) + ", " +
                        m.eval(*b.counter, true).get_decimal_string(0) + ")";
    std::string opA = "`" + spec.nameOf(a.binding->op->getResult(0)) + "`";
    std::string opB = "`" + spec.nameOf(at->getResult(0)) + "`";
    std::string stateStr;
    for (auto &[n, e] : state)
      stateStr += (stateStr.empty() ? "" : ", ") + n + " = " + m.eval(e, true).get_decimal_string(0);
    if (what == "collision") {
      v.message = "random stream collision: " + localOf(m, a) + " on rank " + ra + " and " +
                  localOf(m, b) + " on rank " + rb + " draw the same (key, counter) = " + pairA +
                  " for different mask elements " + elementOf(m, a) + " and " + elementOf(m, b) +
                  " (their dropout masks are identical, not independent)";
      std::string axes = splitAxes(*b.binding, true);
      v.hint = a.binding == b.binding && !axes.empty()
                   ? "make the key or the counter depend on the coordinate of every axis that "
                     "splits this mask (" + axes + "), e.g. a per-rank key as in Megatron's "
                     "model-parallel RNG tracker or a counter offset of rank * local size"
                   : "give each draw its own counter range: advance the counter base by at "
                     "least the number of elements drawn before it";
    } else if (what == "replica") {
      v.message = "replicas diverge: rank " + ra + " draws " + pairA + " and rank " + rb +
                  " draws " + pairB + " for the same mask element " + elementOf(m, a) +
                  ", which both hold (the replicated activation it masks differs between them)";
      std::string axes = splitAxes(*b.binding, false);
      v.hint = "do not derive this mask's key or counter from the coordinates of the axes it "
               "is replicated over" + (axes.empty() ? std::string() : " (" + axes + ")") +
               ": use the default (data-parallel) stream, as Megatron does outside "
               "tensor-parallel regions";
    } else {
      v.message = "random stream reused across steps: " + localOf(m, b) + " on rank " + rb +
                  " in the next step draws " + pairB + ", which " + opA + " on rank " + ra +
                  " already drew in this step (as " + elementOf(m, a) + ")";
      v.hint = "derive every counter from the step's counter input and return the counter "
               "advanced past every draw of the step (the reference's next value)";
    }
    v.notes.push_back("with " + (stateStr.empty() ? std::string("no integer inputs") : stateStr));
    v.notes.push_back("proved with Z3 over symbolic rank coordinates and element indices; the "
                      "ranks and elements above are one witness");
    if (a.binding != b.binding)
      v.locatedNotes.push_back({toSourceLoc(a.binding->op->getLoc()), "the other draw is " + opA});
    result.violations.push_back(std::move(v));
  }
};

} // namespace

void planproof::checkRandomStreams(const Spec &spec, const SolverBudget &budget,
                                   VerifyResult &result) {
  try {
    StreamChecker(spec, budget, result).run();
  } catch (const z3::exception &e) {
    result.inconclusiveReasons.push_back(
        {toSourceLoc(spec.plan.getLoc()), std::string("independent RNG mode: Z3 error: ") + e.msg()});
  }
}
