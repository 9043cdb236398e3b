//===- Pipeline.cpp - stages, messages and the dataflow order of a plan ---===//
//
// A pipelined plan (`dist.pipeline = "pp"`) is one function whose ops each belong to a
// stage (`dist.stage = k`; a send to its source stage, a recv to its destination; ops
// without one run on every stage). This file works out, before any value is computed:
//
//  - which send each recv receives (same stages and tag, the n-th with the n-th);
//  - whether every value is used only on the stage that computes or receives it
//    (a value of stage j used on stage k is data no message carries);
//  - an execution order of the plan's ops in which every operand and every matching
//    send comes first. Each stage's own order is the order written (its schedule); how
//    the stages' ops interleave in the text does not matter.
//
// Defects of the plan (unmatched messages, values crossing stages, cycles) are recorded
// as ScheduleProblems for the verifier to report; malformed input is an error.
//
//===----------------------------------------------------------------------===//
#include "Spec/Spec.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <deque>
#include <map>

using namespace mlir;
using namespace planproof;

namespace {

std::string stageStr(int64_t s) { return s < 0 ? "every stage" : "stage " + std::to_string(s); }

/// The state analyzePipeline's steps share: the plan, its pipeline axis, and the stage
/// each value is computed (or received) on.
struct PipelineAnalysis {
  Spec &spec;
  Diagnostics &diags;
  func::FuncOp plan;
  Block &body;
  StringAttr axis;
  llvm::DenseMap<Value, int64_t> valueStage;

  PipelineAnalysis(Spec &spec, Diagnostics &diags)
      : spec(spec), diags(diags), plan(spec.plan), body(plan.getBody().front()) {}

  bool error(Location loc, const std::string &msg) {
    return diags.error(toSourceLoc(loc), msg, spec.path);
  }
  void problem(Operation *op, const std::string &msg, const std::string &hint) {
    spec.scheduleProblems.push_back({op, msg, hint});
  }

  bool assignStages();
  void checkStageUses();
  void matchMessages();
  void orderByDataflow();
};

/// Stages of ops and values.
bool PipelineAnalysis::assignStages() {
  for (const Binding &b : spec.planInputs)
    valueStage[plan.getArgument(b.index)] = b.stage;
  for (Operation &op : body) {
    int64_t s = -1;
    if (auto send = dyn_cast<dist::SendOp>(op))
      s = send.getFrom();
    else if (auto recv = dyn_cast<dist::RecvOp>(op))
      s = recv.getTo();
    else if (auto a = op.getAttrOfType<IntegerAttr>(dist::kStageAttr))
      s = a.getInt();
    if (isa<dist::SendOp, dist::RecvOp>(op) && op.hasAttr(dist::kStageAttr))
      return error(op.getLoc(), "a send or recv takes its stage from its 'from' and 'to'; "
                                "drop 'dist.stage'");
    if (s >= 0)
      spec.opStage[&op] = s;
    for (Value r : op.getResults())
      valueStage[r] = isa<dist::StageSelectOp>(op) ? -1 : s;
  }
  return true;
}

/// Every value used only on the stage that computes or receives it.
void PipelineAnalysis::checkStageUses() {
  auto nameOf = [&](Value v) { return spec.nameOf(v); };
  for (Operation &op : body) {
    int64_t s = spec.stageOf(&op);
    if (auto sel = dyn_cast<dist::StageSelectOp>(op)) {
      for (auto [k, v] : llvm::enumerate(sel.getValues()))
        if (valueStage[v] >= 0 && valueStage[v] != (int64_t)k)
          problem(&op, "operand #" + std::to_string(k) + " (`" + nameOf(v) + "`) is computed on " +
                           stageStr(valueStage[v]) + ", not on stage " + std::to_string(k),
                  "operand k of dist.stage_select must be a value of stage k");
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (const Binding &b : spec.planOutputs) {
        Value v = ret.getOperand(b.index);
        int64_t vs = valueStage[v];
        if (vs >= 0 && vs != b.stage)
          problem(plan, "result #" + std::to_string(b.index) + " ('" + b.refName + "') is `" +
                            nameOf(v) + "`, computed on stage " + std::to_string(vs) +
                            ", but the result says it is held by " + stageStr(b.stage),
                  "mark the result with 'dist.stage = " + std::to_string(vs) +
                      "', or send the value to the stages that hold it");
      }
      continue;
    }
    for (Value v : op.getOperands()) {
      int64_t vs = valueStage[v];
      if (vs >= 0 && vs != s)
        problem(&op, "`" + nameOf(v) + "` is computed on stage " + std::to_string(vs) +
                         " but used on " + stageStr(s) + ", and no message carries it there",
                "send it with dist.send and receive it with dist.recv on the stage that uses it");
    }
    // A collective of one stage must stay inside it; one over the pipeline axis joins
    // every stage.
    if (auto axes = op.getAttrOfType<ArrayAttr>("axes")) {
      bool overPipe = llvm::any_of(axes, [&](Attribute a) {
        return cast<StringAttr>(a).getValue() == axis.getValue();
      });
      if (overPipe && s >= 0)
        problem(&op, "a collective over the pipeline axis '" + axis.getValue().str() +
                         "' runs on stage " + std::to_string(s) + " only, but its group spans "
                         "every stage",
                "run collectives over the pipeline axis on every stage (no 'dist.stage'), with "
                "each stage's value joined by dist.stage_select");
    }
  }
}

/// Messages: the n-th send with the n-th recv of the same (from, to, tag).
void PipelineAnalysis::matchMessages() {
  std::map<std::tuple<int64_t, int64_t, std::string>, std::deque<Operation *>> sends, recvs;
  for (Operation &op : body) {
    if (auto send = dyn_cast<dist::SendOp>(op))
      sends[{send.getFrom(), send.getTo(), send.getTag().str()}].push_back(&op);
    if (auto recv = dyn_cast<dist::RecvOp>(op))
      recvs[{recv.getFrom(), recv.getTo(), recv.getTag().str()}].push_back(&op);
  }
  for (auto &[key, list] : recvs) {
    auto &from = sends[key];
    for (Operation *r : list) {
      if (from.empty()) {
        problem(r, "dist.recv from stage " + std::to_string(std::get<0>(key)) + " tag \"" +
                       std::get<2>(key) + "\" has no matching dist.send: stage " +
                       std::to_string(std::get<0>(key)) + " never sends it to stage " +
                       std::to_string(std::get<1>(key)),
                "every recv needs a send with the same stages and tag");
        continue;
      }
      Operation *s = from.front();
      from.pop_front();
      spec.recvFrom[r] = s;
      if (s->getOperand(0).getType() != r->getResult(0).getType()) {
        std::string sent, got;
        llvm::raw_string_ostream so(sent), go(got);
        s->getOperand(0).getType().print(so);
        r->getResult(0).getType().print(go);
        problem(r, "dist.recv of " + got + " receives a dist.send of " + sent,
                "send and receive the same shape");
      }
    }
  }
  for (auto &[key, list] : sends)
    for (Operation *s : list)
      problem(s, "dist.send to stage " + std::to_string(std::get<1>(key)) + " tag \"" +
                     std::get<2>(key) + "\" has no matching dist.recv on stage " +
                     std::to_string(std::get<1>(key)),
              "every send needs a recv with the same stages and tag on the destination stage");
}

/// The dataflow order (Kahn's algorithm, earliest written first).
void PipelineAnalysis::orderByDataflow() {
  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> pos;
  for (Operation &op : body) {
    pos[&op] = ops.size();
    ops.push_back(&op);
  }
  std::vector<std::vector<size_t>> users(ops.size());
  std::vector<int> pending(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    for (Value v : ops[i]->getOperands())
      if (Operation *d = v.getDefiningOp()) {
        users[pos[d]].push_back(i);
        ++pending[i];
      }
    auto m = spec.recvFrom.find(ops[i]);
    if (m != spec.recvFrom.end()) {
      users[pos[m->second]].push_back(i);
      ++pending[i];
    }
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < ops.size(); ++i)
    if (!pending[i])
      ready.insert(i);
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    spec.planOrder.push_back(ops[i]);
    for (size_t u : users[i])
      if (--pending[u] == 0)
        ready.insert(u);
  }
  if (spec.planOrder.size() != ops.size()) {
    for (size_t i = 0; i < ops.size(); ++i)
      if (pending[i]) {
        problem(ops[i], "this op waits, through sends and receives, on its own result: no "
                        "schedule can run it",
                "a value cannot be sent before it is computed");
        break;
      }
    spec.planOrder.clear();
    for (Operation *op : ops)
      spec.planOrder.push_back(op);
  }
}

} // namespace

bool planproof::analyzePipeline(Spec &spec, Diagnostics &diags) {
  PipelineAnalysis a(spec, diags);
  func::FuncOp plan = a.plan;
  spec.planOrder.clear();
  a.axis = plan->getAttrOfType<StringAttr>(dist::kPipelineAttr);
  bool anyStaged = false;
  for (Operation &op : a.body)
    anyStaged |= isa<dist::SendOp, dist::RecvOp, dist::StageSelectOp>(op) ||
                 op.hasAttr(dist::kStageAttr);
  if (!a.axis) {
    if (anyStaged)
      return a.error(plan.getLoc(), "the plan uses pipeline stages (dist.send, dist.recv, "
                                    "dist.stage_select or 'dist.stage') but does not name the "
                                    "mesh axis of its stages with 'dist.pipeline'");
    for (Operation &op : a.body)
      spec.planOrder.push_back(&op);
    return true;
  }
  spec.pipelineAxis = spec.mesh.axisIndex(a.axis.getValue().str());
  if (spec.pipelineAxis < 0)
    return a.error(plan.getLoc(), "'dist.pipeline' names '" + a.axis.getValue().str() +
                                      "', which is not an axis of the mesh");
  if (!a.assignStages())
    return false;
  a.checkStageUses();
  a.matchMessages();
  a.orderByDataflow();
  return true;
}
