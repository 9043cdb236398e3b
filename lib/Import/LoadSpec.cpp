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
#include "Support/Diagnostic.h"
#include "Support/Input.h"
#include "Support/Limits.h"

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

static bool loadAny(MLIRContext &ctx, const std::string &path, Spec &spec, Diagnostics &diags) {
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
  return loadAny(ctx, path, spec, diags) && analyzeSpec(spec, diags);
}

bool planproof::loadSpecPair(MLIRContext &ctx, const std::string &refPath,
                             const std::string &planPath, Spec &spec, Diagnostics &diags) {
  spec.path = planPath;
  return loadAny(ctx, refPath, spec, diags) && loadAny(ctx, planPath, spec, diags) &&
         analyzeSpec(spec, diags);
}

