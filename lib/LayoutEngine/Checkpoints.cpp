//===- Checkpoints.cpp - save, reshard and resume, by layouts -------------===//
//
// A checkpoint spec (docs/checkpoint.md) decided without elements or ranks: the saving
// plan's step, its dist.save pieces, and the resuming plan's step on its own mesh from
// the dist.load pieces, against two reference steps (docs/layout-engine.md,
// "Checkpoints").
//
// A piece's place is read off its offsets: an offset is a constant 0 plus rank
// coefficients (dist.axis_index times constants, Index.cpp), and the piece is the
// rank's block of the entry under the layout that splits the dimension over those
// axes, major to minor, when the coefficients are the blocks' offsets (the local size
// times the product of the more minor axes' sizes) -- padded when the blocks cover
// more than the entry (its padding not written, and read back as a fresh unknown).
// Any other offset is not modelled (inconclusive), never guessed.
//
// Then, as docs/checkpoint.md states the checks:
//   1. every saved piece holds its block of the reference output that updates the
//      entry's input (compared like an output with that layout: Run::outputs), and a
//      save restricted to some ranks (`on`) names only axes its layout replicates over,
//      so the ranks it stands for hold the same block;
//   2. every input the step updates is saved; a load of an entry never saved is unknown;
//   3. the resuming plan, its loads the blocks of the second step's inputs (the first
//      step's outputs) and its other inputs a fresh batch (`x@2`), computes the second
//      reference step's outputs (Run::outputs);
//   4. no argument of the resuming plan is bound to an input the step updates;
//   5. every saved entry is loaded.
// Where any of these is not shown the verdict is inconclusive with the reason; the
// element engine reports the violations.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/Bindings.h"
#include "LayoutEngine/Run.h"

#include "Dist/DistDialect.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

bool Run::pieceLayout(Operation &op, Layout &l, std::string &why) {
  auto piece = cast<dist::CheckpointOp>(op);
  ArrayRef<int64_t> shape = piece.getShape();
  Type type = isa<dist::SaveOp>(op) ? op.getOperand(0).getType() : op.getResult(0).getType();
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || t.getRank() != (int64_t)shape.size()) {
    why = "a checkpoint piece that is not a tensor of its entry's rank";
    return false;
  }
  l = Layout();
  l.dims.assign(shape.size(), {});
  int padded = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    const State &o = planStates[piece.getOffsets()[d]];
    int64_t base = -1, local = t.getDimSize(d);
    if (!o.known || !constantLeaf(terms, o.term, base) || base != 0) {
      why = "offset #" + std::to_string(d) + " of the piece is not a multiple of rank "
            "coordinates (a constant part other than 0, or a value not followed)";
      return false;
    }
    std::vector<std::pair<int, int64_t>> coeff;
    for (auto [a, k] : o.rankCoeff)
      if (spec.mesh.shape[a] > 1 && k != 0)
        coeff.push_back({a, k});
    std::sort(coeff.begin(), coeff.end(),
              [](const auto &x, const auto &y) { return x.second > y.second; });
    int64_t expect = local, blocks = 1;
    for (auto it = coeff.rbegin(); it != coeff.rend(); ++it) {
      if (it->second != expect) {
        why = "offset #" + std::to_string(d) + " is not the offset of the rank's block (" +
              std::to_string(it->second) + " per coordinate of `" +
              spec.mesh.axes[it->first] + "` where its block's would be " +
              std::to_string(expect) + ")";
        return false;
      }
      expect *= spec.mesh.shape[it->first];
      blocks *= spec.mesh.shape[it->first];
    }
    for (auto &[a, k] : coeff)
      l.dims[d].push_back(a);
    if (local * blocks < shape[d] || (blocks > 1 && local != (shape[d] + blocks - 1) / blocks) ||
        (blocks == 1 && local != shape[d])) {
      why = "the pieces of dimension " + std::to_string(d) + " (" + std::to_string(blocks) +
            " blocks of " + std::to_string(local) + ") do not tile the entry's " +
            std::to_string(shape[d]);
      return false;
    }
    padded += local * blocks > shape[d];
  }
  l.padded = padded > 0;
  if (padded > 1) {
    why = "pieces padded in more than one dimension";
    return false;
  }
  return true;
}

State Run::loadState(Operation &op) {
  auto load = cast<dist::LoadOp>(op);
  if (!entries)
    return State::unknown(&op, "a checkpoint load outside a resumed step");
  auto it = entries->find(load.getKey().str());
  if (it == entries->end())
    return State::unknown(&op, "entry `" + load.getKey().str() +
                                   "` is not in the checkpoint (no dist.save writes it)");
  const State &whole = it->second;
  if (load.getType().isIndex())
    return load.getShape().empty() ? whole
                                   : State::unknown(&op, "a per-rank index entry is not modelled");
  Layout l;
  std::string why;
  if (!pieceLayout(op, l, why))
    return State::unknown(&op, why);
  if (!whole.known || whole.global != Shape(load.getShape().begin(), load.getShape().end()))
    return State::unknown(&op, "the entry's shape is not the state's it restores");
  return layoutOf(ctx, spec.plan.getContext(), whole, l, load.getKey().str());
}

bool Run::saves(std::set<std::string> &saved,
                std::vector<std::pair<SourceLoc, std::string>> &reasons) {
  bool ok = true;
  auto fail = [&](Operation &op, const std::string &why) {
    reasons.push_back({toSourceLoc(op.getLoc()), "`dist.save`: " + why});
    ok = false;
  };
  for (Operation &op : spec.plan.getBody().front()) {
    auto save = dyn_cast<dist::SaveOp>(op);
    if (!save)
      continue;
    std::string key = save.getKey().str(), out;
    for (auto &[o, in] : spec.stateUpdates)
      if (in == key)
        out = o;
    auto k = std::find(spec.refOutputs.begin(), spec.refOutputs.end(), out) -
             spec.refOutputs.begin();
    if (out.empty() || k >= (ptrdiff_t)refOutputs.size()) {
      fail(op, "entry `" + key + "` restores no input the step updates");
      continue;
    }
    if (!saved.insert(key).second) {
      fail(op, "entry `" + key + "` is written by more than one dist.save");
      continue;
    }
    if (save.getValue().getType().isIndex()) {
      const State &v = planStates[save.getValue()], &want = refOutputs[k];
      if (!save.getShape().empty() || !v.known || !v.rankCoeff.empty() || !want.known ||
          v.term != want.term || !(v.factor == want.factor))
        fail(op, "the index value saved as `" + key + "` is not shown to be the reference's `" +
                     out + "` on every rank");
      continue;
    }
    Layout l;
    std::string why;
    if (!pieceLayout(op, l, why)) {
      fail(op, why);
      continue;
    }
    // A save by some ranks only stands for the ranks that differ from them only along
    // axes the piece is replicated over.
    if (DictionaryAttr on = save.getOnAttr())
      for (NamedAttribute a : on) {
        auto axis = std::find(spec.mesh.axes.begin(), spec.mesh.axes.end(), a.getName().str());
        for (const auto &dims : l.dims)
          if (axis != spec.mesh.axes.end() &&
              std::find(dims.begin(), dims.end(), axis - spec.mesh.axes.begin()) != dims.end())
            fail(op, "saved only on some coordinates of `" + a.getName().str() +
                         "`, which splits the entry");
      }
    auto t = cast<RankedTensorType>(save.getValue().getType());
    Binding b{0, out, l, Shape(t.getShape().begin(), t.getShape().end()), op.getLoc()};
    extraChecks.push_back({b, save.getValue(), "checkpoint entry `" + key + "`"});
  }
  return ok;
}

/// The checkpoint spec's two steps (file comment); the verdict verified only where
/// every check holds.
void verifyCheckpointByLayouts(const Spec &spec, const VerifyOptions &options, TermPool &terms,
                               VerifyResult &r) {
  auto &reasons = r.inconclusiveReasons;
  if (spec.rngIndependent || spec.resume->hasAttr("dist.pipeline")) {
    reasons.push_back({SourceLoc{spec.path}, "checkpoint specs with independent random "
                                             "streams or a pipelined resuming plan are not "
                                             "modelled by the layout engine"});
    return;
  }
  Run one(spec, options, terms);
  one.reference(r.stats);
  one.plan(r.stats, nullptr);
  std::set<std::string> saved;
  bool ok = one.saves(saved, reasons);
  ok &= one.outputs(reasons, r.stats.obligations, r.departures);
  // The second step's state inputs: each the value the first step left, a symbol of
  // its own (`m@1`): the first step proved each saved piece its block of that value,
  // and what the second step is shown to compute from a symbol it computes from any
  // value of it (no bound is assumed of it).
  std::map<std::string, State> second;
  for (auto &[out, in] : spec.stateUpdates) {
    auto i = std::find(spec.refInputs.begin(), spec.refInputs.end(), in) - spec.refInputs.begin();
    if (i < (ptrdiff_t)spec.refInputs.size()) {
      Type type = spec.reference.getArgument(i).getType();
      State s;
      s.known = true;
      if (auto t = dyn_cast<RankedTensorType>(type)) {
        s.global.assign(t.getShape().begin(), t.getShape().end());
        s.split.assign(s.global.size(), {});
        s.term = terms.leaf(in + "@1", shapeText(s.global));
      } else {
        s.term = terms.leaf(in + "@1", "index");
      }
      second[in] = s;
    }
    if (!saved.count(in)) {
      reasons.push_back({SourceLoc{spec.path}, "checkpoint: the step updates `" + in +
                                                   "` (output `" + out +
                                                   "`) and no dist.save writes it"});
      ok = false;
    }
  }
  Spec view = spec.resumeStep();
  for (const Binding &b : view.planInputs)
    if (second.count(b.refName)) {
      reasons.push_back({toSourceLoc(b.loc), "checkpoint: the resuming plan's input `" +
                                                 b.refName + "` is state the step updates: "
                                                 "after a restart it is not the first step's"});
      ok = false;
    }
  std::set<std::string> loaded;
  view.plan.walk([&](dist::LoadOp l) { loaded.insert(l.getKey().str()); });
  for (const std::string &key : saved)
    if (!loaded.count(key)) {
      reasons.push_back({SourceLoc{spec.path},
                         "checkpoint: entry `" + key + "` is saved and never loaded"});
      ok = false;
    }
  std::map<std::string, State> entries;
  for (const std::string &key : saved)
    if (second.count(key))
      entries[key] = second[key];
  Run two(view, options, terms);
  two.secondStep = true;
  two.secondInputs = second;
  two.entries = &entries;
  two.reference(r.stats);
  two.plan(r.stats, nullptr);
  // (After the first step's reasons: a piece saved wrong is the cause of what the
  // resumed step then computes wrong.)
  std::vector<std::pair<SourceLoc, std::string>> resumed;
  ok &= two.outputs(resumed, r.stats.obligations, r.departures);
  reasons.insert(reasons.end(), resumed.begin(), resumed.end());
  if (ok && reasons.empty()) {
    r.verdict = Verdict::Verified;
    // The proof trace: the first step's outputs, then the resumed step's (named so).
    r.proof = std::move(one.proof);
    for (VerifyResult::Proof &p : two.proof) {
      p.output = "resumed step's " + p.output;
      r.proof.push_back(std::move(p));
    }
  }
}

} // namespace planproof::layouts
