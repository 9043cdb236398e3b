//===- Calls.cpp - repeated code stated once: func.call inlined at load -*- C++ -*-===//
//
// A spec may state a repeated piece of the step once -- a transformer layer, a
// microbatch's forward -- as a private func.func, and call it wherever it repeats
// (func.call). Every engine reads the step with the calls expanded: the callee's body
// is cloned in place of each call (its arguments replaced by the call's operands, its
// results by the returned values), so one definition of each op's meaning still serves
// every engine, and the derived backward passes (ref.grad) differentiate through what
// the calls compute. docs/calls.md states the rules.
//
// What is checked (malformed input is an error at the call or the function):
//   - a called function is private and has a body; the reference, plan and resuming
//     plan functions are public and never called;
//   - no function reaches itself through calls (the expansion must be finite);
//   - a callee on a mesh (plan code: its collectives name that mesh's axes) is called
//     only from functions on the same mesh;
//   - the expansion stays within Spec::maxExpandedOps ops over the whole module, measured
//     before anything is expanded; beyond it the spec is undecidable (inconclusive,
//     with the limit), never expanded.
// Names: a value computed inside a call is named after the call's first result and its
// own name in the callee, `%l5/attn_out` (nested calls nest the path), so a report
// names both the repetition and the op. Places: an expanded op's location is a call
// site location (the op's line in the callee, called from the call's line); reports
// give the callee line. A call's `dist.stage` marks every op it expands to.
//
//===----------------------------------------------------------------------===//
#include "Spec/Spec.h"
#include "Support/Limits.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <string>
#include <vector>

using namespace mlir;
using namespace planproof;

namespace {

/// The most ops the calls of one module may expand to (about 1 GiB of IR); a
/// production plan written out in full is 0.2-0.4 million.
/// The deepest chain of calls a module may have (the nesting bound of Limits.h).
constexpr int kMaxCallDepth = kMaxNesting;

struct Inliner {
  Inliner(ModuleOp module, Spec &spec, Diagnostics &diags)
      : module(module), spec(spec), diags(diags) {}

  ModuleOp module;
  Spec &spec;
  Diagnostics &diags;
  llvm::StringMap<func::FuncOp> functions;
  /// Per function: 0 unvisited, 1 on the DFS path, 2 measured.
  llvm::DenseMap<Operation *, int> visit;
  /// Per function: the ops its body holds once its calls are expanded (saturating).
  llvm::DenseMap<Operation *, uint64_t> size;
  /// Per function: its calls; and the functions measured, callees first.
  llvm::DenseMap<Operation *, std::vector<func::CallOp>> callees;
  std::vector<func::FuncOp> order;

  bool error(Location loc, const std::string &message) {
    diags.add(planproof::Diagnostic{toSourceLoc(loc), message, {}, ""});
    return false;
  }

  /// The callee of `call`, checked: defined here, private, with a body, not an entry.
  func::FuncOp calleeOf(func::CallOp call) {
    func::FuncOp f = functions.lookup(call.getCallee());
    if (!f) {
      error(call.getLoc(), "call of an undefined function @" + call.getCallee().str());
      return {};
    }
    if (!f.isPrivate() || f->hasAttr(ref::kReferenceAttr) || f->hasAttr(dist::kResumeAttr)) {
      error(call.getLoc(), "@" + call.getCallee().str() +
                               " is called, so it must be a private function without the "
                               "reference or resume attribute (`func.func private @" +
                               call.getCallee().str() + "`)");
      return {};
    }
    if (f.isExternal()) {
      error(call.getLoc(), "@" + call.getCallee().str() + " is called but has no body");
      return {};
    }
    // Plan code names its mesh's axes: a callee on a mesh runs only where that mesh is.
    auto caller = call->getParentOfType<func::FuncOp>();
    Attribute want = f->getAttr(dist::kMeshAttr);
    if (want && caller->getAttr(dist::kMeshAttr) != want) {
      error(call.getLoc(), "@" + call.getCallee().str() + " runs on the mesh @" +
                               cast<FlatSymbolRefAttr>(want).getValue().str() +
                               " (its 'dist.mesh'), and its caller @" +
                               caller.getSymName().str() + " does not");
      return {};
    }
    return f;
  }

  /// Measures `f`: size[f], the ops its body holds once its calls are expanded
  /// (saturating past the limit), checking its calls and that no function reaches
  /// itself. Nothing is expanded yet. False on malformed input (reported).
  bool measure(func::FuncOp f, int depth = 0) {
    int &state = visit[f];
    if (state == 2)
      return true;
    if (state == 1)
      return error(f.getLoc(), "@" + f.getSymName().str() +
                                   " calls itself (through calls): a repetition must be finite");
    // The walk recurses per level of calls, as every walk over them does: a chain of
    // 30,000 functions each calling the next once overflowed the stack.
    if (depth > kMaxCallDepth)
      return error(f.getLoc(), "calls nest more than " + std::to_string(kMaxCallDepth) +
                                   " levels deep here (like brackets, nesting is bounded)");
    state = 1;
    uint64_t n = 0;
    bool ok = true;
    f.walk([&](Operation *op) {
      ++n;
      auto c = dyn_cast<func::CallOp>(op);
      if (!c || !ok)
        return;
      func::FuncOp g = calleeOf(c);
      if (!g || !measure(g, depth + 1)) {
        ok = false;
        return;
      }
      n = std::min<uint64_t>(n + size[g], spec.maxExpandedOps + 1);
      callees[f].push_back(c);
    });
    if (!ok)
      return false;
    size[f] = n;
    visit[f] = 2;
    order.push_back(f); // callees before callers
    return true;
  }

  /// The name prefix of the values a call expands to.
  std::string prefixOf(func::CallOp call) {
    if (call.getNumResults()) {
      auto it = spec.names.find(call.getResult(0));
      if (it != spec.names.end())
        return it->second.substr(it->second.rfind('%') == 0 ? 1 : 0);
    }
    return "@" + call.getCallee().str();
  }

  void inlineCall(func::CallOp call, func::FuncOp callee) {
    Block &body = callee.getBody().front();
    IRMapping map;
    for (auto [formal, actual] : llvm::zip(body.getArguments(), call.getOperands()))
      map.map(formal, actual);
    std::string prefix = prefixOf(call);
    Attribute stage = call->getAttr(dist::kStageAttr);
    OpBuilder b(call);
    llvm::DenseSet<Value> made;
    for (Operation &op : body.without_terminator()) {
      Operation *copy = b.clone(op, map);
      copy->walk([&](Operation *inner) {
        // (An op of a function the callee calls keeps the function it was written in.)
        spec.functionAt.try_emplace(toSourceLoc(inner->getLoc()).str(),
                                    "@" + callee.getSymName().str());
        inner->setLoc(CallSiteLoc::get(inner->getLoc(), call.getLoc()));
        if (stage && !inner->hasAttr(dist::kStageAttr) && inner == copy)
          inner->setAttr(dist::kStageAttr, stage);
      });
      // Names: the callee's own (a result of each op, block arguments of its regions).
      auto nameCopy = [&](Value from, Value to) {
        auto it = spec.names.find(from);
        if (it == spec.names.end())
          return;
        std::string own = it->second.substr(it->second.rfind('%') == 0 ? 1 : 0);
        spec.names[to] = "%" + prefix + "/" + own;
      };
      for (auto [from, to] : llvm::zip(op.getResults(), copy->getResults())) {
        nameCopy(from, to);
        made.insert(to);
      }
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (auto [result, value] : llvm::zip(call.getResults(), ret.getOperands())) {
      Value now = map.lookupOrDefault(value);
      // The value the callee returns is known by the call's result name (the name the
      // caller wrote), unless it is the caller's own (an argument passed through).
      auto it = spec.names.find(result);
      if (it != spec.names.end() && (made.count(now) || !spec.names.count(now)))
        spec.names[now] = it->second;
      result.replaceAllUsesWith(now);
    }
    for (Value r : call.getResults())
      spec.names.erase(r);
    call.erase();
  }

  /// The checks; with `expand`, the expansion (or the spec made undecidable past the
  /// limit).
  bool run(bool expand = true) {
    std::vector<func::FuncOp> all;
    module.walk([&](func::FuncOp f) {
      functions[f.getSymName()] = f;
      all.push_back(f);
    });
    for (func::FuncOp f : all)
      if (f.isPrivate() && (f->hasAttr(ref::kReferenceAttr) || f->hasAttr(dist::kResumeAttr)))
        return error(f.getLoc(), "@" + f.getSymName().str() +
                                     " is private: the reference and resuming plan functions "
                                     "are public (private functions are only called)");
    bool anyCall = false;
    module.walk([&](func::CallOp) { anyCall = true; });
    if (!anyCall)
      return true;
    for (func::FuncOp f : all)
      if (!f.isPrivate() && !measure(f))
        return false;
    if (!expand)
      return true;
    // Expanding callees first materializes each measured function once: the entries'
    // expansion and, at most as large again per level, the callees'.
    uint64_t entries = 0, everything = 0;
    for (func::FuncOp f : order) {
      everything = std::min<uint64_t>(everything + size[f], 4 * spec.maxExpandedOps);
      if (!f.isPrivate())
        entries = std::min<uint64_t>(entries + size[f], spec.maxExpandedOps + 1);
    }
    if (entries > spec.maxExpandedOps || everything >= 4 * spec.maxExpandedOps) {
      spec.undecidable = "its calls expand to more than " + std::to_string(spec.maxExpandedOps) +
                         " ops (the limit of one module's expansion)";
      spec.undecidableAt = toSourceLoc(module.getLoc());
      return true;
    }
    for (func::FuncOp f : order)
      for (func::CallOp c : callees[f])
        inlineCall(c, functions.lookup(c.getCallee()));
    // Every call is expanded: the functions stated once are no longer needed (and a
    // walk over the module must not see their ops twice). Their values' names go
    // first: a value allocated later at the same address must not inherit one.
    for (func::FuncOp f : all) {
      if (!f.isPrivate())
        continue;
      f.walk([&](Operation *op) {
        for (Value r : op->getResults())
          spec.names.erase(r);
        for (Region &region : op->getRegions())
          for (Block &block : region)
            for (Value a : block.getArguments())
              spec.names.erase(a);
      });
      f.erase();
    }
    return true;
  }
};

} // namespace

bool planproof::checkCalls(ModuleOp module, Spec &spec, Diagnostics &diags) {
  return Inliner(module, spec, diags).run(/*expand=*/false);
}

std::string planproof::keptCallsRefusal(const Spec &spec) {
  bool calls = false;
  std::string why;
  for (auto &m : spec.modules)
    m.get()->walk([&](Operation *op) {
      calls |= isa<func::CallOp>(op);
      auto f = op->getParentOfType<func::FuncOp>();
      if (!why.empty() || !f || !f.isPrivate())
        return;
      // What the layout engine reads only at the plan's top level (its schedule, its
      // pipeline routes, the draws' bindings, checkpoints): in a called function, the
      // spec is read expanded.
      bool pipelineWide = false;
      if (auto axes = op->getAttrOfType<ArrayAttr>("axes"); axes && spec.pipelineAxis >= 0)
        pipelineWide = llvm::any_of(axes, [&](Attribute a) {
          auto s = dyn_cast<StringAttr>(a);
          return s && s.getValue() == spec.mesh.axes[spec.pipelineAxis];
        });
      if (pipelineWide || op->hasAttr(dist::kStageAttr) ||
          isa<dist::SendOp, dist::RecvOp, dist::SaveOp, dist::LoadOp, dist::StageSelectOp,
              ref::DropoutMaskOp>(op))
        why = "@" + f.getSymName().str() + " holds a '" + op->getName().getStringRef().str() +
              "'" + (pipelineWide ? " over the pipeline axis" : "");
    });
  if (!calls)
    return kNoCalls;
  return why;
}

bool planproof::inlineCalls(ModuleOp module, Spec &spec, Diagnostics &diags) {
  if (!Inliner(module, spec, diags).run())
    return false;
  // The expanded functions are checked again as the parser checked them.
  return succeeded(verify(module));
}
