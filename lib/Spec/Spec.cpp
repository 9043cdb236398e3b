//===- Spec.cpp - loading and validating specs ------------------*- C++ -*-===//
//
// Parses MLIR specs (keeping the SSA names users wrote, for reports), verifies them,
// finds the reference and plan functions, and checks every binding of a plan argument
// or result against the reference: names, layouts, and local vs global shapes.
//
//===----------------------------------------------------------------------===//
#include "Spec/Spec.h"
#include "Support/Printable.h"

#include "Ref/RefDialect.h"
#include "Support/Input.h"
#include "Support/Limits.h"
#include "Support/Rational.h"
#include "Transforms/Autodiff.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>

using namespace mlir;
using namespace planproof;

SourceLoc planproof::toSourceLoc(Location loc) {
  SourceLoc out;
  if (auto f = dyn_cast<FileLineColLoc>(loc)) {
    out.file = f.getFilename().str();
    out.line = f.getLine();
    out.col = f.getColumn();
  } else if (auto n = dyn_cast<NameLoc>(loc)) {
    return toSourceLoc(n.getChildLoc());
  } else if (auto c = dyn_cast<CallSiteLoc>(loc)) {
    return toSourceLoc(c.getCallee());
  } else if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations()) {
      SourceLoc s = toSourceLoc(l);
      if (s.known())
        return s;
    }
  }
  return out;
}

std::string planproof::attrText(Attribute a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto ints = dyn_cast_or_null<DenseI64ArrayAttr>(a)) {
    os << "[";
    llvm::interleaveComma(ints.asArrayRef(), os);
    os << "]";
  } else if (a) {
    a.print(os);
  }
  return s;
}

std::string Spec::nameOf(Value v) const {
  auto it = names.find(v);
  if (it != names.end())
    return it->second;
  if (auto arg = dyn_cast<BlockArgument>(v))
    return "%arg" + std::to_string(arg.getArgNumber());
  // Ops of a derived backward pass are named after the value they differentiate.
  if (auto n = dyn_cast<NameLoc>(v.getDefiningOp()->getLoc()))
    return "%" + n.getName().str();
  return "%<" + v.getDefiningOp()->getName().getStringRef().str() + ">";
}

std::string Spec::snippet(const SourceLoc &loc) const {
  auto it = sources.find(loc.file);
  if (it == sources.end() || loc.line == 0 || loc.line > it->second.size())
    return "";
  return it->second[loc.line - 1];
}

void planproof::registerDialects(MLIRContext &ctx) {
  DialectRegistry registry;
  registry.insert<ref::RefDialect, dist::DistDialect, func::FuncDialect, arith::ArithDialect,
                  tensor::TensorDialect, scf::SCFDialect>();
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

namespace {
/// The source line of `loc` with a caret under its column, as MLIR's SourceMgr handler
/// prints it; "" when `loc` is not in one of `sources`' buffers.
std::string excerptAt(llvm::SourceMgr *sources, Location loc) {
  SourceLoc at = toSourceLoc(loc);
  if (!sources || !at.known())
    return "";
  for (unsigned id = 1; id <= sources->getNumBuffers(); ++id) {
    if (sources->getMemoryBuffer(id)->getBufferIdentifier() != at.file)
      continue;
    SMLoc p = sources->FindLocForLineAndColumn(id, at.line, std::max(1u, at.col));
    if (!p.isValid())
      return "";
    std::string out;
    llvm::raw_string_ostream os(out);
    sources->GetMessage(p, llvm::SourceMgr::DK_Error, "")
        .print(nullptr, os, /*ShowColors=*/false, /*ShowKindLabel=*/false,
               /*ShowLocation=*/false);
    os.flush();
    return out.size() > 1 && out[0] == '\n' ? out.substr(1) : "";
  }
  return "";
}

/// "PLACE: KIND: MESSAGE" (without PLACE where the location is not in a file), and the
/// excerpt under it.
std::string noteText(llvm::SourceMgr *sources, Location loc, const char *kind,
                     const std::string &message) {
  SourceLoc at = toSourceLoc(loc);
  std::string place = at.known() ? printable(at.str(), false) + ": " : "";
  return place + kind + ": " + printable(message, false) + "\n" + excerptAt(sources, loc);
}
} // namespace

CollectMlirDiagnostics::CollectMlirDiagnostics(MLIRContext &ctx, Diagnostics &diags,
                                               llvm::SourceMgr *sources)
    : ctx(ctx) {
  id = ctx.getDiagEngine().registerHandler([&diags, sources](mlir::Diagnostic &d) {
    Location loc = d.getLocation();
    if (d.getSeverity() == DiagnosticSeverity::Error) {
      diags.add(Diagnostic{toSourceLoc(loc), d.str(), {}, excerptAt(sources, loc)});
    } else {
      const char *kind = d.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                         : d.getSeverity() == DiagnosticSeverity::Note  ? "note"
                                                                        : "remark";
      diags.note(noteText(sources, loc, kind, d.str()));
    }
    for (mlir::Diagnostic &n : d.getNotes())
      diags.note(noteText(sources, n.getLocation(), "note", n.str()));
    return success();
  });
}

CollectMlirDiagnostics::~CollectMlirDiagnostics() { ctx.getDiagEngine().eraseHandler(id); }

static void readSourceLines(Spec &spec, const std::string &path, StringRef text) {
  std::vector<std::string> lines;
  SmallVector<StringRef> parts;
  text.split(parts, '\n');
  for (StringRef p : parts)
    lines.push_back(p.rtrim("\r").str());
  spec.sources[path] = std::move(lines);
}

bool planproof::parseMlirSpecText(MLIRContext &ctx, const std::string &path, const std::string &contents,
                         Spec &spec, Diagnostics &diags) {
  if (!checkUtf8(path, contents, diags) || !checkNesting(path, contents, Syntax::Mlir, diags))
    return false;
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(contents, path);
  readSourceLines(spec, path, buffer->getBuffer());
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), SMLoc());
  CollectMlirDiagnostics collect(ctx, diags, &sourceMgr);
  AsmParserState state;
  OwningOpRef<ModuleOp> module(ModuleOp::create(FileLineColLoc::get(&ctx, path, 1, 1)));
  ParserConfig config(&ctx);
  if (failed(parseAsmSourceFile(sourceMgr, module->getBody(), config, &state)))
    return false;
  if (failed(verify(*module)))
    return false;
  auto text = [](SMRange r) {
    return std::string(r.Start.getPointer(), r.End.getPointer() - r.Start.getPointer());
  };
  for (const auto &def : state.getOpDefs())
    for (const auto &group : def.resultGroups)
      if (group.startIndex < def.op->getNumResults())
        spec.names[def.op->getResult(group.startIndex)] = text(group.definition.loc);
  for (const auto &def : state.getBlockDefs())
    for (auto [i, arg] : llvm::enumerate(def.arguments))
      if (i < def.block->getNumArguments() && arg.loc.isValid())
        spec.names[def.block->getArgument(i)] = text(arg.loc);
  if (!(spec.keepCalls ? checkCalls(*module, spec, diags) : inlineCalls(*module, spec, diags)))
    return false;
  spec.modules.push_back(std::move(module));
  return true;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {
struct Checker {
  Spec &spec;
  Diagnostics &diags;

  bool error(Location loc, const std::string &msg) {
    return diags.error(toSourceLoc(loc), msg, spec.path);
  }

  std::set<std::string> refIndex; // reference inputs and outputs of type index

  std::string layoutText(const Layout &l) { return l.str(spec.mesh); }

  bool convertLayout(dist::LayoutAttr attr, Layout &out) {
    out = Layout();
    for (Attribute d : attr.getDims()) {
      std::vector<int> axes;
      for (Attribute a : cast<ArrayAttr>(d))
        axes.push_back(spec.mesh.axisIndex(cast<StringAttr>(a).getValue().str()));
      out.dims.push_back(axes);
    }
    ReduceKind kinds[3] = {ReduceKind::Sum, ReduceKind::Avg, ReduceKind::Max};
    ArrayAttr lists[3] = {attr.getSum(), attr.getAvg(), attr.getMax()};
    for (int k = 0; k < 3; ++k)
      for (Attribute a : lists[k])
        out.partial.push_back({spec.mesh.axisIndex(cast<StringAttr>(a).getValue().str()), kinds[k]});
    std::sort(out.partial.begin(), out.partial.end());
    if (attr.getSegments())
      out.segments.assign(attr.getSegments().asArrayRef().begin(),
                          attr.getSegments().asArrayRef().end());
    return true;
  }

  bool bind(DictionaryAttr attrs, unsigned index, Type localType, Location loc, bool isInput,
            const std::map<std::string, Shape> &refShapes, Binding &b) {
    std::string what = (isInput ? "argument #" : "result #") + std::to_string(index);
    auto value = attrs ? attrs.getAs<StringAttr>(dist::kValueAttr) : StringAttr();
    auto layout = attrs ? attrs.getAs<dist::LayoutAttr>(dist::kLayoutAttr) : dist::LayoutAttr();
    if (localType.isIndex() && value && !layout) {
      // An integer (seed, counter, step) is one value, the same on every rank.
      MLIRContext *ctx = localType.getContext();
      ArrayAttr none = ArrayAttr::get(ctx, {});
      layout = dist::LayoutAttr::get(ctx, none, none, none, none, DenseI64ArrayAttr::get(ctx, {}));
    }
    if (!value || !layout)
      return error(loc, "plan " + what + " needs both '" + std::string(dist::kValueAttr) +
                            "' (the reference value it holds) and '" + dist::kLayoutAttr + "'");
    b.index = index;
    b.refName = value.getValue().str();
    b.loc = loc;
    auto it = refShapes.find(b.refName);
    if (it == refShapes.end()) {
      std::string known;
      for (auto &[n, s] : refShapes)
        known += (known.empty() ? "" : ", ") + n;
      return error(loc, "plan " + what + " holds '" + b.refName + "', which is not " +
                            (isInput ? "an input" : "an output") + " of the reference (" +
                            (isInput ? "inputs" : "outputs") + ": " + known + ")");
    }
    convertLayout(layout, b.layout);
    b.layout.padded = attrs && attrs.get(dist::kPaddedAttr);
    if (auto st = attrs ? attrs.getAs<IntegerAttr>(dist::kStageAttr) : IntegerAttr())
      b.stage = st.getInt();
    if (b.layout.padded && llvm::any_of(b.layout.segments, [](int64_t k) { return k != 1; }))
      return error(loc, "plan " + what + " ('" + b.refName +
                            "'): a padded layout cannot have interleaved or zigzag segments");
    if (isInput && b.layout.isPartial())
      return error(loc, "plan " + what + " ('" + b.refName +
                            "'): an input layout cannot be partial; inputs are complete values");
    const Shape &global = it->second;
    if (localType.isIndex() != (refIndex.count(b.refName) > 0))
      return error(loc, "plan " + what + " ('" + b.refName + "'): " +
                            (localType.isIndex() ? "an index value must hold an index value of "
                                                   "the reference"
                                                 : "the reference value is an index; the plan "
                                                   "value must be an index too"));
    if (localType.isIndex()) {
      b.localShape = {};
      return true;
    }
    auto tensor = cast<RankedTensorType>(localType);
    b.localShape = Shape(tensor.getShape().begin(), tensor.getShape().end());
    if (b.layout.dims.size() != global.size())
      return error(loc, "plan " + what + " ('" + b.refName + "'): layout has " +
                            std::to_string(b.layout.dims.size()) + " dimension entries but '" +
                            b.refName + "' has rank " + std::to_string(global.size()));
    Shape expected;
    if (!b.layout.localShape(spec.mesh, global, expected)) {
      for (size_t d = 0; d < global.size(); ++d) {
        int64_t parts = spec.mesh.groupSize(b.layout.dims[d]) * b.layout.segmentsOf(d);
        if (global[d] % parts != 0)
          return error(loc, "plan " + what + " ('" + b.refName + "'): dimension " +
                                std::to_string(d) + " of size " + std::to_string(global[d]) +
                                " does not divide into the " + std::to_string(parts) +
                                " blocks of its layout (if its shards are padded, as in ZeRO "
                                "flat buffers, mark it with 'dist.padded')");
      }
    }
    if (expected != b.localShape)
      return error(loc, "plan " + what + " ('" + b.refName + "'): local shape " +
                            shapeStr(b.localShape) + " is not the shard " + shapeStr(expected) +
                            " of reference shape " + shapeStr(global) + " under layout '" +
                            layoutText(b.layout) + "'");
    return true;
  }

  /// Independent RNG mode: every plan dropout mask says which piece of which
  /// reference mask it draws (dist.draws, dist.layout, dist.block_offset).
  bool bindDraws() {
    if (auto rng = spec.plan->getAttrOfType<StringAttr>(dist::kRngAttr))
      spec.rngIndependent = rng.getValue() == "independent";
    std::map<std::string, Value> refByName;
    spec.reference.walk([&](ref::DropoutMaskOp op) {
      std::string n = spec.nameOf(op.getResult());
      refByName[n.size() > 1 && n[0] == '%' ? n.substr(1) : n] = op.getResult();
    });
    bool ok = true;
    spec.plan.walk([&](ref::DropoutMaskOp op) {
      if (!ok)
        return;
      auto draws = op->getAttrOfType<StringAttr>(dist::kDrawsAttr);
      auto layout = op->getAttrOfType<dist::LayoutAttr>(dist::kLayoutAttr);
      if (!spec.rngIndependent)
        return;
      if (!draws || !layout) {
        ok = error(op.getLoc(), "in independent RNG mode every plan dropout mask needs '" +
                                    std::string(dist::kDrawsAttr) + "' (the reference mask it "
                                    "draws a piece of) and '" + dist::kLayoutAttr + "'");
        return;
      }
      std::string name = draws.getValue().str();
      if (name.size() > 1 && name[0] == '%')
        name = name.substr(1);
      auto it = refByName.find(name);
      if (it == refByName.end()) {
        std::string known;
        for (auto &[n, v] : refByName)
          known += (known.empty() ? "" : ", ") + n;
        ok = error(op.getLoc(), "'" + std::string(dist::kDrawsAttr) + "' names '" + name +
                                    "', which is not a ref.dropout_mask of the reference (" +
                                    (known.empty() ? "it has none" : known) + ")");
        return;
      }
      DrawBinding d{op, it->second, name, {}, {}, {}};
      convertLayout(layout, d.layout);
      if (d.layout.isPartial()) {
        ok = error(op.getLoc(), "a random draw's layout cannot be partial");
        return;
      }
      auto global = cast<RankedTensorType>(it->second.getType()).getShape();
      auto local = op.getType().getShape();
      if (!d.layout.localShape(spec.mesh, Shape(global.begin(), global.end()), d.blockShape)) {
        ok = error(op.getLoc(), "the reference mask '" + name + "' does not divide into the "
                                    "blocks of layout '" + layoutText(d.layout) + "'");
        return;
      }
      // What is drawn besides the stream position: the drop probability. A plan draw
      // stands for the reference's only when it is the same (exactly, as rationals).
      auto refOp = it->second.getDefiningOp<ref::DropoutMaskOp>();
      Rational pPlan, pRef;
      std::string why;
      if (!exactConstant(op.getP().convertToDouble(), pPlan, why) ||
          !exactConstant(refOp.getP().convertToDouble(), pRef, why) || pPlan != pRef)
        d.mismatch = "it drops with p = " + pPlan.str() + ", but the reference mask `" + name +
                     "` it stands for (dist.draws) drops with p = " + pRef.str();
      d.blockOffset.assign(local.size(), 0);
      if (auto off = op->getAttrOfType<DenseI64ArrayAttr>(dist::kBlockOffsetAttr))
        d.blockOffset.assign(off.asArrayRef().begin(), off.asArrayRef().end());
      for (size_t k = 0; k < local.size(); ++k)
        if (d.blockOffset[k] + local[k] > d.blockShape[k]) {
          ok = error(op.getLoc(), "this mask's piece (shape " + shapeStr(Shape(local.begin(), local.end())) +
                                      " at the block offset) does not fit in the rank's block " +
                                      shapeStr(d.blockShape) + " of '" + name + "'");
          return;
        }
      spec.draws.push_back(std::move(d));
    });
    return ok;
  }

  /// The resuming plan: its own mesh, its arguments bound to reference inputs (the
  /// next step's batch; its state comes from dist.load), its results to reference outputs.
  bool bindResume(func::FuncOp f, const std::map<std::string, Shape> &refIn,
                  const std::map<std::string, Shape> &refOut) {
    if (f.getBody().getBlocks().size() != 1)
      return error(f.getLoc(), "the resuming plan function must have exactly one block");
    spec.resume = f;
    dist::MeshOp mesh = dist::lookupMeshOfFunc(f);
    Mesh m;
    m.name = mesh.getSymName().str();
    for (Attribute a : mesh.getAxes())
      m.axes.push_back(cast<StringAttr>(a).getValue().str());
    m.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
    spec.resumeMesh = m;
    // Bindings are checked against the resuming plan's mesh.
    std::swap(spec.mesh, spec.resumeMesh);
    bool ok = true;
    for (unsigned i = 0; i < f.getNumArguments() && ok; ++i) {
      Binding b{0, "", {}, {}, f.getArgument(i).getLoc()};
      ok = bind(f.getArgAttrDict(i), i, f.getArgument(i).getType(), b.loc, true, refIn, b);
      spec.resumeInputs.push_back(b);
    }
    for (unsigned i = 0; i < f.getNumResults() && ok; ++i) {
      Binding b{0, "", {}, {}, f.getLoc()};
      ok = bind(f.getResultAttrDict(i), i, f.getResultTypes()[i], b.loc, false, refOut, b);
      spec.resumeOutputs.push_back(b);
    }
    std::swap(spec.mesh, spec.resumeMesh);
    return ok;
  }

  /// The reference, plan and resuming plan functions of the modules, and the plan's mesh.
  bool findFunctions(std::vector<func::FuncOp> &resumes) {
    std::vector<func::FuncOp> refs, plans;
    int privatePlans = 0;
    for (auto &m : spec.modules)
      m->walk([&](func::FuncOp f) {
        if (f.isPrivate()) {
          // Stated once and called (lib/Spec/Calls.cpp), never an entry.
          privatePlans += f->hasAttr(dist::kMeshAttr);
          return;
        }
        if (f->hasAttr(ref::kReferenceAttr))
          refs.push_back(f);
        if (f->hasAttr(dist::kMeshAttr) && !f->hasAttr(dist::kResumeAttr))
          plans.push_back(f);
        if (f->hasAttr(dist::kMeshAttr) && f->hasAttr(dist::kResumeAttr))
          resumes.push_back(f);
      });
    Location fileLoc = spec.modules.empty() ? Location(UnknownLoc())
                                            : spec.modules.back()->getLoc();
    if (refs.size() != 1)
      return error(fileLoc, "expected exactly one reference function (a func.func with the '" +
                                std::string(ref::kReferenceAttr) + "' attribute), found " +
                                std::to_string(refs.size()));
    if (plans.size() != 1)
      return error(fileLoc, "expected exactly one plan function (a func.func with a '" +
                                std::string(dist::kMeshAttr) + "' attribute), found " +
                                std::to_string(plans.size()) +
                                (plans.size() > 1 ? " (a plan that resumes from the other's "
                                                    "checkpoint is marked 'dist.resume')"
                                 : privatePlans    ? " (private functions are only called: the "
                                                     "plan function is public)"
                                                   : ""));
    spec.reference = refs[0];
    spec.plan = plans[0];
    if (spec.reference.getBody().getBlocks().size() != 1 || spec.plan.getBody().getBlocks().size() != 1)
      return error(fileLoc, "reference and plan functions must have exactly one block");
    dist::MeshOp mesh = dist::lookupMeshOfFunc(spec.plan);
    spec.mesh.name = mesh.getSymName().str();
    for (Attribute a : mesh.getAxes())
      spec.mesh.axes.push_back(cast<StringAttr>(a).getValue().str());
    spec.mesh.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
    return true;
  }

  /// The reference's inputs and outputs: names, shapes, integer domains, roles.
  bool readReference(std::map<std::string, Shape> &refIn, std::map<std::string, Shape> &refOut) {
    std::set<std::string> all;
    auto refName = [&](DictionaryAttr attrs, Location loc, const std::string &what,
                       std::string &out) {
      auto n = attrs ? attrs.getAs<StringAttr>(ref::kNameAttr) : StringAttr();
      if (!n || n.getValue().empty())
        return error(loc, "reference " + what + " needs a '" + std::string(ref::kNameAttr) +
                              "' string attribute");
      out = n.getValue().str();
      if (!all.insert(out).second)
        return error(loc, "reference " + what + ": the name '" + out + "' is used twice");
      return true;
    };
    auto shapeOf = [](Type t) {
      auto r = cast<RankedTensorType>(t);
      return Shape(r.getShape().begin(), r.getShape().end());
    };
    for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
      std::string n;
      Type argType = spec.reference.getArgument(i).getType();
      if (!isa<RankedTensorType>(argType) && !argType.isIndex())
        return error(spec.reference.getArgument(i).getLoc(),
                     "reference argument #" + std::to_string(i) +
                         " must be a ranked tensor or an index");
      if (!refName(spec.reference.getArgAttrDict(i), spec.reference.getArgument(i).getLoc(),
                   "argument #" + std::to_string(i), n))
        return false;
      spec.refInputs.push_back(n);
      if (argType.isIndex()) {
        refIndex.insert(n);
        refIn[n] = {};
        spec.refInputBounds.push_back(kIndexBound);
        spec.refInputNonnegative.push_back(false);
        continue;
      }
      refIn[n] = shapeOf(spec.reference.getArgument(i).getType());
      auto elem = cast<RankedTensorType>(spec.reference.getArgument(i).getType()).getElementType();
      int64_t bound = 0;
      if (elem.isInteger()) {
        DictionaryAttr attrs = spec.reference.getArgAttrDict(i);
        auto b = attrs ? attrs.getAs<IntegerAttr>("ref.bound") : IntegerAttr();
        if (!b || b.getInt() < 1 || b.getInt() > (int64_t(1) << 40))
          return error(spec.reference.getArgument(i).getLoc(),
                       "reference argument #" + std::to_string(i) + " ('" + n +
                           "') holds integers and needs 'ref.bound = N' (values in [0, N))");
        bound = b.getInt();
      } else if (elem.isF32() && spec.reference.getArgAttrDict(i) &&
                 spec.reference.getArgAttrDict(i).get("ref.bound")) {
        // A real input known to be an integer in [0, N): 0/1 ignore and padding masks.
        auto b = spec.reference.getArgAttrDict(i).getAs<IntegerAttr>("ref.bound");
        if (!b || b.getInt() < 1 || b.getInt() > (int64_t(1) << 40))
          return error(spec.reference.getArgument(i).getLoc(),
                       "reference argument #" + std::to_string(i) + " ('" + n +
                           "'): 'ref.bound = N' must be an integer in [1, 2^40]");
        bound = b.getInt();
      } else if (!elem.isF32()) {
        return error(spec.reference.getArgument(i).getLoc(),
                     "reference argument #" + std::to_string(i) + " must hold f32 or integers");
      }
      spec.refInputBounds.push_back(bound);
      DictionaryAttr argAttrs = spec.reference.getArgAttrDict(i);
      bool nonneg = argAttrs && argAttrs.get("ref.nonnegative");
      if (nonneg && (!isa<UnitAttr>(argAttrs.get("ref.nonnegative")) || bound != 0))
        return error(spec.reference.getArgument(i).getLoc(),
                     "reference argument #" + std::to_string(i) + " ('" + n +
                         "'): 'ref.nonnegative' is a unit attribute of real (f32) inputs");
      spec.refInputNonnegative.push_back(nonneg);
    }
    for (unsigned i = 0; i < spec.reference.getNumResults(); ++i) {
      std::string n;
      Type resType = spec.reference.getResultTypes()[i];
      if (!isa<RankedTensorType>(resType) && !resType.isIndex())
        return error(spec.reference.getLoc(),
                     "reference result #" + std::to_string(i) + " must be a ranked tensor or an index");
      if (!refName(spec.reference.getResultAttrDict(i), spec.reference.getLoc(),
                   "result #" + std::to_string(i), n))
        return false;
      spec.refOutputs.push_back(n);
      if (resType.isIndex())
        refIndex.insert(n);
      refOut[n] = resType.isIndex() ? Shape{} : shapeOf(resType);
      if (DictionaryAttr attrs = spec.reference.getResultAttrDict(i))
        if (Attribute u = attrs.get("ref.updates")) {
          auto s = dyn_cast<StringAttr>(u);
          if (!s || !refIn.count(s.getValue().str()))
            return error(spec.reference.getLoc(),
                         "reference result #" + std::to_string(i) + " ('" + n +
                             "'): 'ref.updates' must name a reference input");
          if (refIn[s.getValue().str()] != refOut[n] ||
              refIndex.count(s.getValue().str()) != refIndex.count(n))
            return error(spec.reference.getLoc(),
                         "reference result #" + std::to_string(i) + " ('" + n +
                             "') updates '" + s.getValue().str() + "' but has another type or shape");
          spec.stateUpdates[n] = s.getValue().str();
        }
    }
    return true;
  }

  bool run() {
    std::vector<func::FuncOp> resumes;
    std::map<std::string, Shape> refIn, refOut;
    if (!findFunctions(resumes) || !readReference(refIn, refOut))
      return false;
    for (unsigned i = 0; i < spec.plan.getNumArguments(); ++i) {
      Binding b{0, "", {}, {}, spec.plan.getArgument(i).getLoc()};
      if (!isa<RankedTensorType>(spec.plan.getArgument(i).getType()) &&
          !spec.plan.getArgument(i).getType().isIndex())
        return error(b.loc, "plan argument #" + std::to_string(i) +
                                " must be a ranked tensor or an index");
      if (!bind(spec.plan.getArgAttrDict(i), i, spec.plan.getArgument(i).getType(), b.loc, true,
                refIn, b))
        return false;
      spec.planInputs.push_back(b);
    }
    for (unsigned i = 0; i < spec.plan.getNumResults(); ++i) {
      Binding b{0, "", {}, {}, spec.plan.getLoc()};
      if (!isa<RankedTensorType>(spec.plan.getResultTypes()[i]) &&
          !spec.plan.getResultTypes()[i].isIndex())
        return error(b.loc, "plan result #" + std::to_string(i) +
                                " must be a ranked tensor or an index");
      if (!bind(spec.plan.getResultAttrDict(i), i, spec.plan.getResultTypes()[i], b.loc, false,
                refOut, b))
        return false;
      spec.planOutputs.push_back(b);
    }

    if (!bindDraws())
      return false;
    if (!analyzePipeline(spec, diags))
      return false;
    if (resumes.size() > 1)
      return error(resumes[1].getLoc(), "at most one plan function may resume from a checkpoint");
    if (!resumes.empty() && !bindResume(resumes[0], refIn, refOut))
      return false;
    if (resumes.empty()) {
      bool loads = false;
      spec.plan.walk([&](dist::LoadOp) { loads = true; });
      if (loads)
        return error(spec.plan.getLoc(), "the plan loads a checkpoint (dist.load) but no plan "
                                         "function saves one: put dist.load in a second plan "
                                         "function marked 'dist.resume'");
    }

    // The (innermost) module of `m` that carries attribute `name`, or null.
    auto carrying = [](ModuleOp m, StringRef name) {
      Operation *found = nullptr;
      m->walk([&](ModuleOp inner) {
        if (inner->hasAttr(name))
          found = inner;
      });
      return found;
    };
    spec.assumptions.clear();
    for (auto &m : spec.modules) {
      Operation *stated = carrying(*m, "planproof.assumptions");
      if (!stated)
        continue;
      auto list = dyn_cast<ArrayAttr>(stated->getAttr("planproof.assumptions"));
      if (!list)
        return error(stated->getLoc(), "'planproof.assumptions' must be an array of strings");
      for (Attribute a : list) {
        auto text = dyn_cast<StringAttr>(a);
        if (!text || text.getValue().empty())
          return error(stated->getLoc(), "'planproof.assumptions' must be an array of "
                                         "non-empty strings");
        spec.assumptions.push_back(text.getValue().str());
      }
    }
    for (auto &m : spec.modules) {
      Operation *found = carrying(*m, "planproof.expect");
      if (!found)
        continue;
      auto dict = dyn_cast<DictionaryAttr>(found->getAttr("planproof.expect"));
      if (!dict)
        return error(found->getLoc(), "'planproof.expect' must be a dictionary");
      spec.expect.present = true;
      for (auto [field, out] : {std::pair<const char *, std::string *>{"verdict", &spec.expect.verdict},
                                {"kind", &spec.expect.kind}, {"at", &spec.expect.at},
                                {"engine", &spec.expect.engine}}) {
        if (Attribute a = dict.get(field)) {
          auto s = dyn_cast<StringAttr>(a);
          if (!s)
            return error(found->getLoc(), std::string("'planproof.expect.") + field +
                                               "' must be a string");
          *out = s.getValue().str();
        }
      }
      if (spec.expect.verdict != "verified" && spec.expect.verdict != "violated" &&
          spec.expect.verdict != "inconclusive")
        return error(found->getLoc(), "'planproof.expect.verdict' must be verified, violated "
                                      "or inconclusive");
      // (a production-sized spec: the engine whose verdict it states)
      const std::string &e = spec.expect.engine;
      if (!e.empty() && e != "element" && e != "layout" && e != "auto")
        return error(found->getLoc(), "'planproof.expect.engine' must be element, layout or auto");
    }
    return true;
  }
};
} // namespace

bool planproof::analyzeSpec(Spec &spec, Diagnostics &diags) {
  if (!validateSizesAndConstants(spec, diags))
    return false;
  spec.written.clear();
  spec.ruled.clear();
  spec.adjoints.clear();
  spec.writtenMap = std::make_shared<IRMapping>();
  for (auto &m : spec.modules)
    spec.written.push_back(
        OwningOpRef<ModuleOp>(cast<ModuleOp>(m.get().getOperation()->clone(*spec.writtenMap))));
  // Derive the reference backward pass where the reference asks for it (ref.grad).
  for (auto &m : spec.modules) {
    if (!spec.undecidable.empty())
      break; // the calls were not expanded (lib/Spec/Calls.cpp)
    // The results of ref.grad are replaced and their ops erased: forget their names, or
    // an op allocated later at the same address would inherit one.
    // A derived gradient keeps the name written for the ref.grad result it replaces, so
    // that a violation there names what the author wrote (`%d_w`), not an internal value.
    llvm::DenseMap<Value, std::string> writtenNames;
    size_t grads = 0;
    m->walk([&](ref::GradOp g) {
      ++grads;
      for (Value r : g.getResults()) {
        auto it = spec.names.find(r);
        if (it != spec.names.end())
          writtenNames[r] = it->second;
        spec.names.erase(r);
      }
    });
    std::string why;
    Location where = m->getLoc();
    auto replaced = [&](Value old, Value now, Value wrt) {
      if (now.getDefiningOp())
        spec.gradientOf.try_emplace(now, spec.nameOf(wrt));
      auto it = writtenNames.find(old);
      if (it == writtenNames.end() || !now.getDefiningOp() || spec.names.count(now))
        return;
      spec.names[now] = it->second;
    };
    auto ruled = [&](Operation *op, Operation *adjoint) {
      spec.ruled.insert(op);
      if (adjoint)
        spec.adjoints[op].push_back(adjoint);
    };
    if (failed(expandGradOps(*m, why, where, [&](Value v) { return spec.nameOf(v); }, replaced,
                             ruled, spec.keepCalls))) {
      spec.undecidable = why;
      spec.undecidableAt = toSourceLoc(where);
      break;
    }
    // A module without ref.grad (a reference already derived, copied for a planner's
    // candidate) is as it was verified: nothing was derived in it.
    if (grads && failed(verify(*m))) {
      spec.undecidable = "internal error: the derived backward pass does not verify";
      spec.undecidableAt = toSourceLoc(where);
      break;
    }
  }
  if (!Checker{spec, diags}.run())
    return false;
  if (spec.keepCalls)
    spec.keptCallsRefused = keptCallsRefusal(spec);
  // The losses the plan's derived backward passes start from: a seed constant named
  // `d(%x).seed` (lib/Transforms/Autodiff) differentiates the plan value `%x`.
  std::map<std::string, Value> byName;
  spec.plan.walk([&](Operation *op) {
    for (Value r : op->getResults())
      byName[spec.nameOf(r)] = r;
  });
  for (auto &[name, v] : byName)
    if (name.rfind("%d(", 0) == 0 && name.size() > 9 && name.substr(name.size() - 6) == ").seed") {
      auto it = byName.find(name.substr(3, name.size() - 3 - 6));
      if (it != byName.end())
        spec.planGradSeeds.push_back(it->second);
    }
  static std::atomic<uint64_t> serials{0};
  spec.serial = ++serials;
  return true;
}

Spec Spec::resumeStep() const {
  Spec view;
  view.path = path;
  view.reference = reference;
  view.plan = resume;
  view.mesh = resumeMesh;
  view.refInputs = refInputs;
  view.refOutputs = refOutputs;
  view.refInputBounds = refInputBounds;
  view.refInputNonnegative = refInputNonnegative;
  view.planInputs = resumeInputs;
  view.planOutputs = resumeOutputs;
  view.names = names;
  view.gradientOf = gradientOf;
  view.sources = sources;
  view.stateUpdates = stateUpdates;
  return view;
}

std::vector<uintptr_t> Spec::referenceKey() const {
  std::vector<uintptr_t> key{reinterpret_cast<uintptr_t>(reference.getContext()),
                             reinterpret_cast<uintptr_t>(
                                 reference->getAttrDictionary().getAsOpaquePointer())};
  llvm::DenseMap<mlir::Value, uintptr_t> number;
  mlir::Block &body = reference.getBody().front();
  for (mlir::BlockArgument a : body.getArguments()) {
    number[a] = number.size();
    key.push_back(reinterpret_cast<uintptr_t>(a.getType().getAsOpaquePointer()));
  }
  for (mlir::Operation &op : body) {
    if (op.getNumRegions())
      return {};
    key.push_back(reinterpret_cast<uintptr_t>(op.getName().getAsOpaquePointer()));
    key.push_back(reinterpret_cast<uintptr_t>(op.getAttrDictionary().getAsOpaquePointer()));
    key.push_back(op.getNumOperands());
    for (mlir::Value v : op.getOperands()) {
      auto it = number.find(v);
      key.push_back(it == number.end() ? ~uintptr_t(0) : it->second);
    }
    key.push_back(op.getNumResults());
    for (mlir::Value r : op.getResults()) {
      key.push_back(reinterpret_cast<uintptr_t>(r.getType().getAsOpaquePointer()));
      number[r] = number.size();
    }
  }
  return key;
}
