//===- LoadSpec.cpp - loading a spec from files or text of either format --===//
//
// The front door of the library and the tools: a spec file is MLIR (lib/Spec) or JSON
// (lib/Import/JsonImport), chosen by its name; either way the loaded modules are then
// analyzed (Spec/Spec.h: analyzeSpec). Here rather than in lib/Spec so that the layers
// depend one way: Import builds on Spec, never the reverse.
//
//===----------------------------------------------------------------------===//
#include "Import/LoadSpec.h"

#include "Import/JsonImport.h"
#include "Plan/PlanGen.h"
#include "Support/Diagnostic.h"
#include "Support/Input.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringRef.h"

using namespace mlir;
using namespace planproof;
using llvm::StringRef;

static bool loadAnyText(MLIRContext &ctx, const std::string &path, const std::string &text,
                        Spec &spec, Diagnostics &diags) {
  if (StringRef(path).ends_with(".json"))
    return importJsonSpecText(ctx, path, text, spec, diags);
  return parseMlirSpecText(ctx, path, text, spec, diags);
}

/// Loads `path`; a generated spec's (`.plan`) expectation, which replaces the generated
/// module's own once the spec is analyzed, into `recipe`.
static bool loadAny(MLIRContext &ctx, const std::string &path, Spec &spec, Diagnostics &diags,
                    Expectation *recipe = nullptr) {
  if (StringRef(path).ends_with(".plan")) {
    plangen::Recipe r;
    if (!plangen::loadRecipe(path, r, diags) || !parseMlirSpecText(ctx, path, r.mlir, spec, diags))
      return false;
    if (r.expected && recipe) {
      recipe->present = true;
      recipe->verdict = r.verdict;
      recipe->kind = r.kind;
      recipe->at = r.at;
      recipe->engine = r.engine;
      recipe->atLine = r.verdict == "inconclusive" ? r.atLine : 0;
    }
    return true;
  }
  std::string text;
  return readInputFile(path, text, diags) && loadAnyText(ctx, path, text, spec, diags);
}

bool planproof::loadSpecText(MLIRContext &ctx, const std::string &name, const std::string &text,
                             Spec &spec, Diagnostics &diags) {
  spec.path = name;
  if ((int64_t)text.size() > kMaxInputBytes) {
    return diags.error({name}, "the input is larger than " +
                                   std::to_string(kMaxInputBytes >> 20) + " MiB");
  }
  return loadAnyText(ctx, name, text, spec, diags) && analyzeSpec(spec, diags);
}

bool planproof::loadSpec(MLIRContext &ctx, const std::string &path, Spec &spec,
                         Diagnostics &diags) {
  spec.path = path;
  Expectation recipe;
  if (!loadAny(ctx, path, spec, diags, &recipe) || !analyzeSpec(spec, diags))
    return false;
  if (recipe.present)
    spec.expect = recipe;
  return true;
}

bool planproof::loadSpecPair(MLIRContext &ctx, const std::string &refPath,
                             const std::string &planPath, Spec &spec, Diagnostics &diags) {
  spec.path = planPath;
  return loadAny(ctx, refPath, spec, diags) && loadAny(ctx, planPath, spec, diags) &&
         analyzeSpec(spec, diags);
}


bool planproof::loadPlanWithReference(MLIRContext &ctx, const Spec &base, const std::string &name,
                                      const std::string &text, Spec &spec, Diagnostics &diags) {
  spec.path = name;
  if (!base.reference)
    return diags.error({name}, "the base spec has no reference function");
  if (base.reference.getContext() != &ctx)
    return diags.error({name}, "the base spec belongs to another context");
  if ((int64_t)text.size() > kMaxInputBytes)
    return diags.error({name}, "the input is larger than " +
                                   std::to_string(kMaxInputBytes >> 20) + " MiB");
  if (StringRef(name).ends_with(".json"))
    return diags.error({name}, "a candidate plan is MLIR text (the mesh and the plan function)");
  // The derived reference, copied with the names and source lines its messages use.
  OwningOpRef<ModuleOp> refModule(ModuleOp::create(base.reference.getLoc()));
  IRMapping map;
  OpBuilder b(&ctx);
  b.setInsertionPointToEnd(refModule->getBody());
  b.clone(*base.reference.getOperation(), map);
  for (const auto &[v, n] : base.names)
    if (Value copy = map.lookupOrNull(v))
      spec.names[copy] = n;
  spec.sources = base.sources;
  spec.modules.push_back(std::move(refModule));
  return parseMlirSpecText(ctx, name, text, spec, diags) && analyzeSpec(spec, diags);
}
