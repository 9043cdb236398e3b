//===- Edit.h - changing a loaded plan in place -----------------*- C++ -*-===//
//
// A planner's loop changes a plan a little and verifies it again (docs/api.md, "A
// planner's loop"). Loading each candidate as text costs parsing and analyzing the
// whole plan; an edit changes the loaded plan in place instead: an attribute of one
// op -- the reduction of a collective, its axes, the dimension it gathers or
// scatters, a shard's axes -- and the engines' caches re-derive only what the edited
// ops reach (the layout engine: LayoutEngine.h, "Reuse").
//
// An edit is checked as a loaded plan is: the op's own verifier (its attribute kinds,
// its shape rules), the sizes and constants of Validate.cpp, and in a pipelined plan
// the pipeline analysis again. A failed check undoes every edit of the call.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SPEC_EDIT_H
#define PLANPROOF_SPEC_EDIT_H

#include "Spec/Spec.h"

#include <string>
#include <vector>

namespace planproof {

/// Attribute `attribute` of the plan op one of whose results the spec names `value`
/// ("%g1") is set to `to`, in MLIR's attribute syntax ("\"avg\"", `["dp", "tp"]`,
/// `1 : i64`); an empty `to` removes an optional attribute.
struct AttributeEdit {
  std::string value;
  std::string attribute;
  std::string to;
};

/// Applies `edits` to `spec.plan` (and to the plan as written, which checked fixes
/// edit) in place, in order, all or none; `undo` receives the edits that restore the
/// plan as it was. Only an attribute the op's definition declares (an inherent one)
/// may change: not `dist.*` annotations (stages, layouts, draws), which analyses read.
/// In a plan that derives its backward pass (ref.grad), the derived ops must stay what
/// a fresh derivation of the edited plan makes: an op no derivative rule read (it was
/// used as a value only) changes alone; a collective whose rule ran changes with the
/// adjoint collectives its rule made (the same axes, reduction, dimension; Autodiff.h);
/// anything else a rule read is refused, as is an op the derivation made.
/// Refused too, with an error naming the edit and nothing changed: a spec whose sizes
/// were reduced on load; dropout masks and checkpoint ops; names the plan does not
/// define; attribute text that does not parse; a result the op's verifier or the size
/// and constant checks reject.
bool editPlan(Spec &spec, const std::vector<AttributeEdit> &edits,
              std::vector<AttributeEdit> &undo, Diagnostics &diags);

} // namespace planproof

#endif
