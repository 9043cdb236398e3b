//===- Counterexample.cpp - a verifier's counterexample run on numbers ----===//
//
// checkCounterexample (Replay.h): the reference and the plan run concretely in fp64 on
// the counterexample's inputs (every other input 0), through the CPU replay's domain
// and plan walk; the claimed output element must differ.
//
//===----------------------------------------------------------------------===//
#include "Replay/Replay.h"
#include "Replay/ReplayInternal.h"

#include "Engine/Decide.h"
#include "Engine/Verifier.h"

#include <cmath>

using namespace mlir;
using namespace planproof;
using namespace planproof::replay;

namespace {
/// "x[1,0]" -> ("x", {1, 0}); "seed" -> ("seed", {}).
bool parseElement(const std::string &s, std::string &name, std::vector<int64_t> &idx) {
  auto open = s.find('[');
  name = s.substr(0, open);
  idx.clear();
  if (open == std::string::npos)
    return true;
  if (s.back() != ']')
    return false;
  std::string inner = s.substr(open + 1, s.size() - open - 2);
  size_t pos = 0;
  while (pos <= inner.size() && !inner.empty()) {
    size_t comma = inner.find(',', pos);
    std::string part = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char *end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end)
      return false;
    idx.push_back(v);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return true;
}
} // namespace

CounterexampleCheck planproof::checkCounterexample(const Spec &spec, const Counterexample &cx) {
  if (spec.resume)
    return {"not replayable", "checkpoint specs run two steps"};
  NumericDomain exact{ReplayDtype::F64, ReduceOrder::Rank};
  std::map<std::string, NumTensor> inputs;
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
    Shape shape;
    if (auto r = dyn_cast<RankedTensorType>(spec.reference.getArgument(i).getType()))
      shape.assign(r.getShape().begin(), r.getShape().end());
    inputs[spec.refInputs[i]] = NumTensor(shape, 0.0);
  }
  for (auto &[elem, value] : cx.inputs) {
    std::string name;
    std::vector<int64_t> idx;
    if (!parseElement(elem, name, idx))
      return {"not replayable", "input '" + elem + "' is not an element name"};
    auto it = inputs.find(name);
    if (it == inputs.end() || idx.size() != it->second.shape.size())
      return {"not replayable", "input '" + elem + "' is not a reference input element "
                                "(padding or other state the replay draws itself)"};
    for (size_t d = 0; d < idx.size(); ++d)
      if (idx[d] < 0 || idx[d] >= it->second.shape[d])
        return {"refuted", "input element '" + elem + "' is out of range"};
    it->second.at(idx) = value;
  }
  std::map<std::string, NumTensor> truth;
  std::vector<std::vector<NumTensor>> plan;
  llvm::DenseMap<Value, NumTensor> refVals;
  llvm::DenseMap<Value, std::vector<NumTensor>> planVals;
  RunFailure f{"", spec.plan.getLoc()};
  if (!runReference(spec, exact, inputs, truth, f, refVals) ||
      !runPlan(spec, exact, inputs, 0, plan, f, planVals))
    return {"not replayable", f.why};
  std::string name;
  std::vector<int64_t> at;
  if (!parseElement(cx.element, name, at))
    return {"not replayable", "element '" + cx.element + "'"};
  auto want = truth.find(name);
  if (want == truth.end())
    return {"not replayable", "'" + name + "' is not a reference output"};
  const Mesh &mesh = spec.mesh;
  std::string refutation;
  for (size_t o = 0; o < spec.planOutputs.size(); ++o) {
    const Binding &b = spec.planOutputs[o];
    if (b.refName != name)
      continue;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      if ((b.layout.isPartial() && mesh.positionInGroup(r, b.layout.partialAxes()) != 0) ||
          !spec.onStage(r, b.stage))
        continue;
      for (int64_t l = 0; l < (int64_t)plan[o][r].data.size(); ++l) {
        if (b.layout.globalIndex(mesh, r, b.localShape, plan[o][r].unravel(l)) != at)
          continue;
        double got;
        if (!gatherPartial(exact, mesh, b.layout, plan[o], r, l, got))
          continue; // max mixed with sum: not a layout values are gathered through
        double w = want->second.at(at);
        auto close = [](double x, double y) {
          // A value that does not exist: the report says nan (the verifier does not tell
          // 0/0 from 1/0); the float replay gives NaN or an infinity.
          if (!std::isfinite(x) || !std::isfinite(y))
            return !std::isfinite(x) && !std::isfinite(y);
          return std::fabs(x - y) <= 1e-12 * std::max({1.0, std::fabs(x), std::fabs(y)});
        };
        std::ostringstream why;
        why.precision(9);
        why << "at these inputs " << cx.element << " is " << w << " in the reference and " << got
            << " in the plan (rank " << mesh.rankStr(r) << "); the report says " << cx.reference
            << " and " << cx.plan;
        // The verifier's own criterion: values that differ, or a plan value that does
        // not exist where the reference's does.
        bool differs = numericallyDifferent(w, got) || (std::isfinite(w) && !std::isfinite(got));
        bool same = close(w, cx.reference) && close(got, cx.plan);
        if (differs && same)
          return {"confirmed", why.str()};
        // Another output may hold the same reference value (a tied weight's copy on
        // another stage): the counterexample may be about that one.
        refutation = why.str();
      }
    }
  }
  if (!refutation.empty())
    return {"refuted", refutation};
  return {"not replayable", "no plan output holds " + cx.element};
}

