//===- Edit.cpp - changing a loaded plan in place -------------------------===//
//
// Edit.h. The edits of one call are resolved and parsed first (nothing changes if one
// names no op or does not parse), then applied in order, keeping each attribute's
// old value; each edited op is then checked as loading checks it, and a failure sets
// every old value back before it reports.
//
//===----------------------------------------------------------------------===//
#include "Spec/Edit.h"
#include "Support/Printable.h"
#include "Support/Limits.h"
#include "Support/Input.h"
#include "Ref/RefDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace mlir;
using namespace planproof;

namespace {

std::string printed(Attribute a) {
  if (!a)
    return "";
  std::string s;
  llvm::raw_string_ostream os(s);
  a.print(os);
  return s;
}

/// Whether the plan derives a backward pass (ref.grad): values replacing ref.grad
/// results are defined in it.
bool derivesBackward(const Spec &spec) {
  if (!spec.planGradSeeds.empty())
    return true;
  for (auto &[v, name] : spec.gradientOf)
    if (Operation *def = v.getDefiningOp())
      if (def->getParentOp() == spec.plan.getOperation())
        return true;
  return false;
}

/// Why edits cannot apply to this spec at all ("" when they can).
std::string notEditable(const Spec &spec) {
  if (!spec.plan)
    return "the spec has no plan function";
  if (!spec.undecidable.empty())
    return "the spec cannot be decided as loaded (" + spec.undecidable + ")";
  if (!spec.reducedDims.empty())
    return "the spec was loaded at reduced sizes (docs/shape-reduction.md): an edit of the "
           "reduced plan would not be an edit of the plan; edit the spec and load it again";
  if (derivesBackward(spec) && !spec.writtenMap)
    return "the plan derives its backward pass (ref.grad) and its ops as written were not "
           "kept: load the changed plan instead";
  return "";
}

/// The attribute of an adjoint collective that mirrors attribute `attr` of the
/// collective `op` whose derivative rule made it (Autodiff.h, `ruled`), or "" where
/// there is none; `why` says why the edit cannot be mirrored.
std::string mirrored(Operation *op, const std::string &attr, Attribute to, std::string &why) {
  std::string name = op->getName().getStringRef().str();
  if (isa<dist::AllReduceOp>(op)) {
    if (attr == "kind") {
      auto k = dyn_cast_or_null<StringAttr>(to);
      if (!k || (k.getValue() != "sum" && k.getValue() != "avg"))
        why = "the derivation has a rule for an all_reduce \"sum\" or \"avg\" only";
      return attr;
    }
    return attr == "axes" ? attr : "";
  }
  if (isa<dist::AllGatherOp, dist::ShardSliceOp, dist::ShardPadOp>(op) ||
      (isa<dist::ReduceScatterOp>(op) && attr != "kind"))
    return attr == "axes" || attr == "dim" || attr == "zigzag" ? attr : "";
  if (isa<dist::AllToAllOp>(op))
    return attr == "axes" ? attr : attr == "split_dim" ? "concat_dim"
                                 : attr == "concat_dim" ? "split_dim" : "";
  if (isa<dist::SelectOnOp>(op))
    return attr == "on" ? attr : "";
  return "";
}

const Spec::EditIndex &indexOf(Spec &spec) {
  if (!spec.editIndex) {
    auto index = std::make_shared<Spec::EditIndex>();
    Block &body = spec.plan.getBody().front();
    for (auto &[v, name] : spec.names)
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
        index->byName[name] = def;
    index->derived = derivesBackward(spec);
    spec.editIndex = index;
  }
  return *spec.editIndex;
}

struct Resolved {
  std::string value; // as the edit named it
  Operation *op;
  StringAttr name;
  Attribute to; // null: remove
  /// An adjoint collective the derivation made, edited alike (not written, no undo).
  bool mirror = false;
};

class Editor {
public:
  Editor(Spec &spec, Diagnostics &diags) : spec(spec), diags(diags) {}

  bool run(const std::vector<AttributeEdit> &edits, std::vector<AttributeEdit> &undo) {
    undo.clear();
    if (std::string why = notEditable(spec); !why.empty())
      return diags.error({spec.path}, "cannot edit the plan: " + why);
    std::vector<Resolved> todo;
    if (!resolve(edits, todo))
      return false;
    // Apply in order, keeping the old values (the undo applies them in reverse order).
    std::vector<std::pair<Resolved, Attribute>> done;
    for (const Resolved &r : todo) {
      Attribute old = r.op->getAttr(r.name);
      set(r.op, r.name, r.to);
      done.push_back({r, old});
    }
    if (!check(done)) {
      for (auto it = done.rbegin(); it != done.rend(); ++it)
        set(it->first.op, it->first.name, it->second);
      if (spec.pipelineAxis >= 0) {
        Diagnostics ignored; // as it was before: it passed then
        reanalyzePipeline(ignored);
      }
      return false;
    }
    ++spec.generation;
    for (auto it = done.rbegin(); it != done.rend(); ++it)
      if (!it->first.mirror)
        undo.push_back({it->first.value, it->first.name.str(), printed(it->second)});
    for (auto &[r, old] : done) {
      spec.edited.push_back({spec.generation, r.op});
      if (r.mirror)
        continue;
      annotate(r.op, r.name.str(), printed(old), printed(r.to));
      // The plan as written, which checked fixes edit, changes alike.
      if (spec.writtenMap)
        if (Operation *copy = spec.writtenMap->lookupOrNull(r.op))
          set(copy, StringAttr::get(copy->getContext(), r.name.getValue()), r.to);
    }
    return true;
  }

private:
  Spec &spec;
  Diagnostics &diags;

  bool fail(size_t i, const std::string &msg) {
    return diags.error({spec.path}, "edits[" + std::to_string(i) + "]: " + msg);
  }

  /// The op's source line with its edits appended (Spec::editedLines).
  void annotate(Operation *op, const std::string &attr, const std::string &old,
                const std::string &now) {
    SourceLoc at = toSourceLoc(op->getLoc());
    auto file = spec.sources.find(at.file);
    if (file == spec.sources.end() || at.line == 0 || at.line > file->second.size())
      return;
    std::string &line = file->second[at.line - 1];
    auto [it, fresh] = spec.editedLines.try_emplace({at.file, at.line});
    if (fresh)
      it->second.written = line;
    auto [value, first] = it->second.values.try_emplace(attr, old, now);
    value->second.second = now;
    std::string edits;
    for (auto &[name, v] : it->second.values)
      if (v.first != v.second)
        edits += (edits.empty() ? "" : ", ") + name + " = " + (v.second.empty() ? "(none)" : v.second);
    line = it->second.written + (edits.empty() ? "" : "  // edited: " + edits);
  }

  static void set(Operation *op, StringAttr name, Attribute to) {
    if (to)
      op->setAttr(name, to);
    else
      op->removeAttr(name);
  }

  bool resolve(const std::vector<AttributeEdit> &edits, std::vector<Resolved> &todo) {
    const Spec::EditIndex &index = indexOf(spec);
    const std::map<std::string, Operation *> &byName = index.byName;
    MLIRContext *ctx = spec.plan.getContext();
    bool derived = index.derived;
    for (size_t i = 0; i < edits.size(); ++i) {
      const AttributeEdit &e = edits[i];
      std::string name = e.value.rfind('%', 0) == 0 ? e.value : "%" + e.value;
      auto it = byName.find(name);
      if (it == byName.end())
        return fail(i, "no op of the plan function defines `" + name + "`");
      Operation *op = it->second;
      std::string opName = op->getName().getStringRef().str();
      if (derived && !spec.writtenMap->lookupOrNull(op))
        return fail(i, "`" + name + "` was made by the derivation of the plan's backward pass "
                       "(ref.grad), not written: edit the op it was derived from");

      if (isa<func::ReturnOp>(op) || op->getNumRegions())
        return fail(i, "`" + opName + "` cannot be edited");
      if (isa<ref::DropoutMaskOp, dist::SaveOp, dist::LoadOp>(op))
        return fail(i, "`" + opName + "` (`" + name + "`) is bound by the spec's analyses "
                       "(random draws, checkpoints): load the changed plan instead");
      std::optional<RegisteredOperationName> info = op->getRegisteredInfo();
      bool inherent = false;
      if (info)
        for (StringAttr a : info->getAttributeNames())
          inherent |= a.getValue() == e.attribute;
      if (!inherent) {
        std::string known;
        if (info)
          for (StringAttr a : info->getAttributeNames())
            known += (known.empty() ? "" : ", ") + a.getValue().str();
        return fail(i, "`" + opName + "` (`" + name + "`) has no attribute '" + e.attribute +
                           "' that an edit may change" +
                           (known.empty() ? " (it has none)" : " (it has: " + known + ")"));
      }
      Resolved r{name, op, StringAttr::get(ctx, e.attribute), Attribute()};
      if (!e.to.empty() && !parse(i, e.to, ctx, r.to))
        return false;
      todo.push_back(r);
      // A derivative rule read the op: its adjoint collectives take the same change (a
      // fresh derivation would make them so); any other change would leave the derived
      // ops behind.
      if (derived && spec.ruled.count(op)) {
        std::string why, to = mirrored(op, e.attribute, r.to, why);
        if (to.empty() || !why.empty())
          return fail(i, "`" + name + "` is differentiated by the plan's derivation (ref.grad)" +
                             (why.empty() ? ", and only a collective's axes, dimensions or "
                                            "reduction change in place with its adjoint"
                                          : ": " + why) +
                             "; load the changed plan instead");
        auto it = spec.adjoints.find(op);
        if (it != spec.adjoints.end())
          for (Operation *adjoint : it->second)
            todo.push_back({name, adjoint, StringAttr::get(ctx, to), r.to, true});
      }
    }
    return true;
  }

  bool parse(size_t i, const std::string &text, MLIRContext *ctx, Attribute &out) {
    std::string message;
    // MLIR's attribute parser recurses per nesting level: the text is checked as a
    // spec file is before it sees it (10^5 brackets once crashed the interpreter).
    Diagnostics nesting;
    if (!checkNesting("<edit>", text, Syntax::Mlir, nesting))
      return fail(i, "cannot read the attribute: " + nesting.list()[0].message);
    if ((int64_t)text.size() > kMaxInputBytes)
      return fail(i, "cannot read the attribute: it is larger than the input limit");
    {
      ScopedDiagnosticHandler capture(ctx, [&](mlir::Diagnostic &d) {
        if (message.empty())
          message = d.str();
        return success();
      });
      size_t read = 0;
      out = parseAttribute(text, ctx, Type(), &read);
      if (out && read != text.size()) {
        out = Attribute();
        message = "unexpected text after the attribute: `" + text.substr(read) + "`";
      }
    }
    if (!out)
      return fail(i, "cannot read the attribute `" + printable(text.substr(0, 200), false) + "`" +
                         (message.empty() ? "" : ": " + message));
    return true;
  }

  bool check(const std::vector<std::pair<Resolved, Attribute>> &done) {
    // (An op edited more than once is named by its last edit.)
    std::set<Operation *> seen;
    for (size_t i = done.size(); i-- > 0;) {
      Operation *op = done[i].first.op;
      if (!seen.insert(op).second)
        continue;
      std::string message;
      {
        ScopedDiagnosticHandler capture(op->getContext(), [&](mlir::Diagnostic &d) {
          if (message.empty())
            message = d.str();
          return success();
        });
        if (failed(verify(op)))
          return fail(i, "the edited `" + op->getName().getStringRef().str() + "` (`" +
                             spec.nameOf(op->getResult(0)) + "`) does not verify" +
                             (message.empty() ? "" : ": " + message));
      }
      if (!validateOpSizesAndConstants(op, spec.path, diags))
        return false;
    }
    return spec.pipelineAxis < 0 || reanalyzePipeline(diags);
  }

  /// The pipeline analysis reads collectives' axes (one of a stage may not span the
  /// pipeline axis) and the messages: run again on the edited plan.
  bool reanalyzePipeline(Diagnostics &d) {
    spec.opStage.clear();
    spec.recvFrom.clear();
    spec.planOrder.clear();
    spec.scheduleProblems.clear();
    return analyzePipeline(spec, d);
  }
};

} // namespace

bool planproof::editPlan(Spec &spec, const std::vector<AttributeEdit> &edits,
                         std::vector<AttributeEdit> &undo, Diagnostics &diags) {
  return Editor(spec, diags).run(edits, undo);
}
