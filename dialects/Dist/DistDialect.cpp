//===- DistDialect.cpp - the distribution dialect ---------------*- C++ -*-===//
//
// The `dist` dialect: registration, the layout attribute's syntax and checks, the
// verifiers of the mesh and the collectives, and the checks of plan-function
// argument/result attributes against the plan's mesh.
//
//===----------------------------------------------------------------------===//
#include "Dist/DistDialect.h"
#include "Support/Printable.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace planproof::dist;

#include "Dist/DistDialect.cpp.inc"
#include "Dist/DistOpInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Dist/DistAttrs.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Dist/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Dist/DistAttrs.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "Dist/DistOps.cpp.inc"

//===----------------------------------------------------------------------===//
// LayoutAttr
//===----------------------------------------------------------------------===//

static const char *const kPartialKinds[] = {"sum", "avg", "max"};

namespace {
/// Parses `axis` or `"axis"`.
ParseResult parseAxis(AsmParser &p, SmallVectorImpl<Attribute> &out) {
  std::string name;
  if (p.parseKeywordOrString(&name))
    return failure();
  out.push_back(StringAttr::get(p.getContext(), name));
  return success();
}

/// Parses `[a, b, ...]` (possibly empty) of axis names.
ParseResult parseAxisList(AsmParser &p, SmallVectorImpl<Attribute> &out) {
  return p.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                   [&] { return parseAxis(p, out); });
}

void printAxes(AsmPrinter &p, ArrayAttr axes) {
  llvm::interleaveComma(axes, p.getStream(),
                        [&](Attribute a) { p.getStream() << cast<StringAttr>(a).getValue(); });
}
} // namespace

Attribute LayoutAttr::parse(AsmParser &p, Type) {
  MLIRContext *ctx = p.getContext();
  SMLoc loc = p.getCurrentLocation();
  SmallVector<Attribute> dims;
  SmallVector<int64_t> segments;
  bool anySegments = false;
  if (p.parseLess())
    return {};
  auto parseDim = [&]() -> ParseResult {
    int64_t segs = 1;
    SmallVector<Attribute> axes;
    if (succeeded(p.parseOptionalLParen())) {
      if (p.parseCommaSeparatedList([&] { return parseAxis(p, axes); }) || p.parseRParen())
        return failure();
    } else {
      std::string name;
      if (p.parseKeywordOrString(&name))
        return failure();
      if (name != "_")
        axes.push_back(StringAttr::get(ctx, name));
    }
    if (succeeded(p.parseOptionalKeyword("in"))) {
      if (p.parseInteger(segs))
        return failure();
      anySegments = true;
    } else if (succeeded(p.parseOptionalKeyword("zigzag"))) {
      segs = kZigzagSegments; // chunks p and 2n-1-p (load-balanced context parallelism)
      anySegments = true;
    }
    dims.push_back(ArrayAttr::get(ctx, axes));
    segments.push_back(segs);
    return success();
  };
  if (p.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim))
    return {};
  SmallVector<Attribute> partial[3];
  while (succeeded(p.parseOptionalComma())) {
    std::string kind;
    SMLoc kindLoc = p.getCurrentLocation();
    if (p.parseKeywordOrString(&kind) || p.parseEqual())
      return {};
    int k = -1;
    for (int i = 0; i < 3; ++i)
      if (kind == kPartialKinds[i])
        k = i;
    if (k < 0) {
      p.emitError(kindLoc, "unknown partial kind '") << kind << "' (expected sum, avg or max)";
      return {};
    }
    if (parseAxisList(p, partial[k]))
      return {};
  }
  if (p.parseGreater())
    return {};
  return LayoutAttr::getChecked([&] { return p.emitError(loc); }, ctx,
                                ArrayAttr::get(ctx, dims), ArrayAttr::get(ctx, partial[0]),
                                ArrayAttr::get(ctx, partial[1]), ArrayAttr::get(ctx, partial[2]),
                                DenseI64ArrayAttr::get(ctx, anySegments ? segments
                                                                        : SmallVector<int64_t>{}));
}

void LayoutAttr::print(AsmPrinter &p) const {
  raw_ostream &os = p.getStream();
  os << "<[";
  ArrayRef<int64_t> segments = getSegments() ? getSegments().asArrayRef() : ArrayRef<int64_t>{};
  for (auto [i, d] : llvm::enumerate(getDims())) {
    if (i)
      os << ", ";
    auto axes = cast<ArrayAttr>(d);
    if (axes.empty())
      os << "_";
    else if (axes.size() == 1)
      printAxes(p, axes);
    else {
      os << "(";
      printAxes(p, axes);
      os << ")";
    }
    if (i < segments.size() && segments[i] == kZigzagSegments)
      os << " zigzag";
    else if (i < segments.size() && segments[i] != 1)
      os << " in " << segments[i];
  }
  os << "]";
  ArrayAttr partial[3] = {getSum(), getAvg(), getMax()};
  for (int k = 0; k < 3; ++k) {
    if (!partial[k] || partial[k].empty())
      continue;
    os << ", " << kPartialKinds[k] << " = [";
    printAxes(p, partial[k]);
    os << "]";
  }
  os << ">";
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayAttr dims, ArrayAttr sum, ArrayAttr avg,
                                 ArrayAttr max, DenseI64ArrayAttr segments) {
  if (segments && !segments.empty()) {
    if (!dims || segments.size() != (int64_t)dims.size())
      return emitError() << "layout: one segment count per dimension";
    for (auto [i, k] : llvm::enumerate(segments.asArrayRef())) {
      if ((k < 1 || k > (1 << 20)) && k != kZigzagSegments)
        return emitError() << "layout: segment counts must be between 1 and 2^20";
      if (k != 1 && cast<ArrayAttr>(dims[i]).empty())
        return emitError() << "layout: '"
                           << (k == kZigzagSegments ? std::string("zigzag")
                                                    : "in " + std::to_string(k))
                           << "' on dimension " << i << ", which no mesh axis splits";
    }
  }
  llvm::StringSet<> seen;
  auto check = [&](ArrayAttr axes) -> LogicalResult {
    if (!axes)
      return emitError() << "layout: missing axis list";
    for (Attribute a : axes) {
      auto s = dyn_cast<StringAttr>(a);
      if (!s || s.getValue().empty())
        return emitError() << "layout: axis names must be non-empty strings";
      if (!seen.insert(s.getValue()).second)
        return emitError() << "layout: mesh axis '" << s.getValue()
                           << "' is used more than once";
    }
    return success();
  };
  if (!dims)
    return emitError() << "layout: missing dimension list";
  for (Attribute d : dims) {
    auto axes = dyn_cast<ArrayAttr>(d);
    if (!axes)
      return emitError() << "layout: each dimension entry must be a list of axes";
    if (failed(check(axes)))
      return failure();
  }
  return failure(failed(check(sum)) || failed(check(avg)) || failed(check(max)));
}

LogicalResult planproof::dist::verifyLayout(LayoutAttr layout, MeshOp mesh, int64_t rank,
                                            Location loc, StringRef what) {
  if ((int64_t)layout.getDims().size() != rank)
    return emitError(loc) << what << ": layout has " << layout.getDims().size()
                          << " dimension entries but the tensor has rank " << rank;
  auto checkAxes = [&](ArrayAttr axes) -> LogicalResult {
    for (Attribute a : axes) {
      StringRef name = cast<StringAttr>(a).getValue();
      if (mesh.axisIndex(name) < 0)
        return emitError(loc) << what << ": layout names mesh axis '" << name
                              << "', which mesh @" << mesh.getSymName() << " does not have";
    }
    return success();
  };
  for (Attribute d : layout.getDims())
    if (failed(checkAxes(cast<ArrayAttr>(d))))
      return failure();
  for (ArrayAttr p : {layout.getSum(), layout.getAvg(), layout.getMax()})
    if (failed(checkAxes(p)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

int64_t MeshOp::axisIndex(StringRef axis) {
  for (auto [i, a] : llvm::enumerate(getAxes()))
    if (cast<StringAttr>(a).getValue() == axis)
      return i;
  return -1;
}

int64_t MeshOp::numRanks() {
  // At most 2^40 once verified; saturate on unverified meshes instead of wrapping.
  int64_t n = planproof::checkedProduct(getShape(), planproof::kMaxRanks);
  return n < 0 ? planproof::kMaxRanks + 1 : n;
}

LogicalResult MeshOp::verify() {
  if (getAxes().size() != getShape().size())
    return emitOpError() << "has " << getAxes().size() << " axis names but "
                         << getShape().size() << " axis sizes";
  if (getAxes().empty())
    return emitOpError() << "needs at least one axis";
  llvm::StringSet<> seen;
  int64_t ranks = 1;
  for (auto [a, s] : llvm::zip(getAxes(), getShape())) {
    StringRef name = cast<StringAttr>(a).getValue();
    // Layouts and reports write axis names bare (#dist.layout<[dp, _]>).
    if (std::string why = planproof::axisNameProblem(name.str()); !why.empty())
      return emitOpError() << why;
    if (!seen.insert(name).second)
      return emitOpError() << "axis '" << name << "' is declared twice";
    if (s < 1 || s > planproof::kMaxAxisSize)
      return emitOpError() << "axis '" << name << "' has size " << s
                           << "; sizes must be between 1 and 2^20";
    if (ranks > (int64_t(1) << 40) / s)
      return emitOpError() << "has more than 2^40 ranks";
    ranks *= s;
  }
  return success();
}

MeshOp planproof::dist::lookupMeshOfFunc(Operation *func) {
  if (!func)
    return {};
  auto ref = func->getAttrOfType<FlatSymbolRefAttr>(kMeshAttr);
  if (!ref)
    return {};
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(func, ref);
}

MeshOp planproof::dist::lookupMesh(Operation *op) {
  for (Operation *p = op; p; p = p->getParentOp())
    if (p->hasAttr(kMeshAttr))
      return lookupMeshOfFunc(p);
  return {};
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {
/// Number of ranks in one group of `axes`, or failure with a diagnostic.
FailureOr<int64_t> groupSize(Operation *op, MeshOp mesh, ArrayAttr axes) {
  if (axes.empty())
    return op->emitOpError() << "needs at least one mesh axis";
  llvm::StringSet<> seen;
  int64_t n = 1;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    int64_t i = mesh.axisIndex(name);
    if (i < 0)
      return op->emitOpError() << "names mesh axis '" << name << "', which mesh @"
                               << mesh.getSymName() << " does not have";
    if (!seen.insert(name).second)
      return op->emitOpError() << "names mesh axis '" << name << "' twice";
    n *= mesh.getShape()[i];
  }
  return n;
}

LogicalResult checkKind(Operation *op, StringRef kind) {
  if (kind != "sum" && kind != "avg" && kind != "max")
    return op->emitOpError() << "has reduction kind '" << kind
                             << "'; expected \"sum\", \"avg\" or \"max\"";
  return success();
}
} // namespace

FailureOr<RankedTensorType> planproof::dist::expectedResultType(Operation *op) {
  MeshOp mesh = lookupMesh(op);
  if (!mesh)
    return op->emitOpError() << "must be inside a plan function with a '" << kMeshAttr
                             << "' attribute naming a dist.mesh";
  auto in = op->getNumOperands() == 1 ? dyn_cast<RankedTensorType>(op->getOperand(0).getType())
                                      : RankedTensorType();
  if (!in)
    return op->emitOpError() << "takes exactly one operand, a ranked tensor";
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  if (!axes)
    return op->emitOpError() << "requires a string array attribute 'axes'";
  FailureOr<int64_t> n = groupSize(op, mesh, axes);
  if (failed(n))
    return failure();
  if (auto kind = op->getAttrOfType<StringAttr>("kind"))
    if (failed(checkKind(op, kind.getValue())))
      return failure();
  if (isa<AllReduceOp>(op))
    return in;
  if (auto a2a = dyn_cast<AllToAllOp>(op)) {
    int64_t sd = a2a.getSplitDim(), cd = a2a.getConcatDim();
    if (sd < 0 || sd >= in.getRank() || cd < 0 || cd >= in.getRank())
      return op->emitOpError() << "split_dim and concat_dim must be dimensions of the operand";
    SmallVector<int64_t> shape(in.getShape());
    if (shape[sd] % *n != 0)
      return op->emitOpError() << "split_dim " << sd << " of size " << shape[sd]
                               << " does not divide by the " << *n << " ranks of axes " << axes;
    shape[sd] /= *n;
    if (!planproof::checkedMul(shape[cd], *n, shape[cd]) || shape[cd] > planproof::kMaxDimSize)
      return op->emitOpError() << "concat_dim " << cd << " would be larger than 2^31";
    return RankedTensorType::get(shape, in.getElementType());
  }
  auto dimAttr = op->getAttrOfType<IntegerAttr>("dim");
  if (!dimAttr)
    return op->emitOpError() << "requires an integer attribute 'dim'";
  int64_t dim = dimAttr.getInt();
  if (dim < 0 || dim >= in.getRank())
    return op->emitOpError() << "dim " << dim << " is out of range for an operand of rank "
                             << in.getRank();
  SmallVector<int64_t> shape(in.getShape());
  bool grows = isa<AllGatherOp, ShardPadOp>(op);
  if (op->hasAttr("zigzag") && !grows && shape[dim] % (2 * *n) != 0)
    return op->emitOpError() << "zigzag: dimension " << dim << " of size " << shape[dim]
                             << " does not divide into 2 x " << *n << " chunks";
  if (op->hasAttr("zigzag") && grows && shape[dim] % 2 != 0)
    return op->emitOpError() << "zigzag: dimension " << dim << " of size " << shape[dim]
                             << " is not two chunks";
  if (grows) {
    if (!planproof::checkedMul(shape[dim], *n, shape[dim]) || shape[dim] > planproof::kMaxDimSize)
      return op->emitOpError() << "the gathered dimension " << dim << " would be larger than 2^31";
  } else {
    if (shape[dim] % *n != 0)
      return op->emitOpError() << "dimension " << dim << " of size " << shape[dim]
                               << " does not divide by the " << *n << " ranks of axes "
                               << axes;
    shape[dim] /= *n;
  }
  return RankedTensorType::get(shape, in.getElementType());
}

static LogicalResult verifyCollective(Operation *op) {
  FailureOr<RankedTensorType> want = expectedResultType(op);
  if (failed(want))
    return failure();
  if (op->getResult(0).getType() != *want)
    return op->emitOpError() << "result type " << op->getResult(0).getType()
                             << " does not match the expected " << *want;
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyCollective(*this); }
LogicalResult AllGatherOp::verify() { return verifyCollective(*this); }
LogicalResult ReduceScatterOp::verify() { return verifyCollective(*this); }
LogicalResult ShardSliceOp::verify() { return verifyCollective(*this); }
LogicalResult ShardPadOp::verify() { return verifyCollective(*this); }

LogicalResult SelectOnOp::verify() {
  MeshOp mesh = lookupMesh(*this);
  if (!mesh)
    return emitOpError() << "must be inside a plan function naming its mesh";
  if (getOn().empty())
    return emitOpError() << "'on' needs at least one mesh axis";
  for (NamedAttribute a : getOn()) {
    auto v = dyn_cast<IntegerAttr>(a.getValue());
    int64_t axis = mesh.axisIndex(a.getName().getValue());
    if (!v || axis < 0)
      return emitOpError() << "'on' maps mesh axes to coordinates, got '" << a.getName().getValue()
                           << "'";
    if (v.getInt() < 0 || v.getInt() >= mesh.getShape()[axis])
      return emitOpError() << "'on' coordinate " << v.getInt() << " is outside axis '"
                           << a.getName().getValue() << "' of size " << mesh.getShape()[axis];
  }
  return success();
}
LogicalResult AllToAllOp::verify() { return verifyCollective(*this); }

LogicalResult AxisIndexOp::verify() {
  MeshOp mesh = lookupMesh(*this);
  if (!mesh)
    return emitOpError() << "must be inside a plan function with a '" << kMeshAttr
                         << "' attribute naming a dist.mesh";
  if (mesh.axisIndex(getAxis()) < 0)
    return emitOpError() << "names mesh axis '" << getAxis() << "', which mesh @"
                         << mesh.getSymName() << " does not have";
  return success();
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

/// The checkpoint access rule shared by save and load: an index value is one element
/// of a (possibly 0-D) entry; a tensor piece has the entry's rank and fits in it.
static LogicalResult verifyPiece(Operation *op, Type type, ArrayRef<int64_t> shape,
                                 size_t offsets) {
  if (llvm::any_of(shape, [](int64_t d) { return d < 1 || d > planproof::kMaxDimSize; }) ||
      planproof::checkedProduct(shape) < 0)
    return op->emitOpError() << "entry shape sizes must be between 1 and 2^31, with at most "
                                "2^40 elements";
  if (offsets != shape.size())
    return op->emitOpError() << "needs one offset per dimension of the entry (" << shape.size()
                             << "), got " << offsets;
  if (type.isIndex())
    return success();
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.getElementType().isF32())
    return op->emitOpError() << "reads or writes an f32 tensor or an index";
  if (t.getRank() != (int64_t)shape.size())
    return op->emitOpError() << "piece of rank " << t.getRank() << " in an entry of rank "
                             << shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (t.getDimSize(d) > shape[d])
      return op->emitOpError() << "piece dimension " << d << " (" << t.getDimSize(d)
                               << ") is larger than the entry's (" << shape[d] << ")";
  return success();
}

LogicalResult SaveOp::verify() {
  if (failed(verifyPiece(*this, getValue().getType(), getShape(), getOffsets().size())))
    return failure();
  if (auto on = getOnAttr()) {
    MeshOp mesh = lookupMesh(*this);
    for (NamedAttribute a : on) {
      auto v = dyn_cast<IntegerAttr>(a.getValue());
      auto axes = mesh ? mesh.getAxes() : ArrayAttr();
      auto it = axes ? llvm::find(axes, StringAttr(a.getName())) : nullptr;
      if (!v || !mesh || it == axes.end())
        return emitOpError() << "'on' maps mesh axes of the plan to coordinates, got '"
                             << a.getName().getValue() << "'";
      int64_t size = mesh.getShape()[it - axes.begin()];
      if (v.getInt() < 0 || v.getInt() >= size)
        return emitOpError() << "'on' coordinate " << v.getInt() << " is outside axis '"
                             << a.getName().getValue() << "' of size " << size;
    }
  }
  return success();
}

LogicalResult LoadOp::verify() {
  return verifyPiece(*this, getType(), getShape(), getOffsets().size());
}

//===----------------------------------------------------------------------===//
// Plan function attributes
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Pipeline ops
//===----------------------------------------------------------------------===//

/// The stage count of the pipeline of the plan containing `op`, or -1 with a diagnostic.
static int64_t pipelineStages(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  auto axis = func ? func->getAttrOfType<StringAttr>(kPipelineAttr) : StringAttr();
  MeshOp mesh = func ? lookupMeshOfFunc(func) : MeshOp();
  if (!axis || !mesh) {
    op->emitOpError() << "needs a plan function with '" << kPipelineAttr
                      << "' naming the mesh axis of the stages";
    return -1;
  }
  int64_t a = mesh.axisIndex(axis.getValue());
  if (a < 0) {
    op->emitOpError() << "'" << kPipelineAttr << "' names '" << axis.getValue()
                      << "', which is not an axis of the mesh";
    return -1;
  }
  return mesh.getShape()[a];
}

static LogicalResult verifyStages(Operation *op, int64_t from, int64_t to) {
  int64_t n = pipelineStages(op);
  if (n < 0)
    return failure();
  if (from < 0 || to < 0 || from >= n || to >= n)
    return op->emitOpError() << "stages must be in [0, " << n << "): from " << from << " to " << to;
  if (from == to)
    return op->emitOpError() << "sends from stage " << from << " to itself";
  return success();
}

LogicalResult SendOp::verify() { return verifyStages(*this, getFrom(), getTo()); }
LogicalResult RecvOp::verify() { return verifyStages(*this, getFrom(), getTo()); }

LogicalResult StageSelectOp::verify() {
  int64_t n = pipelineStages(*this);
  if (n < 0)
    return failure();
  if ((int64_t)getValues().size() != n)
    return emitOpError() << "takes one value per stage: " << n << ", not " << getValues().size();
  for (Value v : getValues())
    if (v.getType() != getType())
      return emitOpError() << "operands must all have the result type " << getType();
  return success();
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kPipelineAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !s)
      return op->emitError() << "'" << kPipelineAttr
                             << "' belongs on a plan func.func and names a mesh axis";
    MeshOp mesh = lookupMeshOfFunc(op);
    if (mesh && mesh.axisIndex(s.getValue()) < 0)
      return op->emitError() << "'" << kPipelineAttr << "' names '" << s.getValue()
                             << "', which is not an axis of the mesh";
    return success();
  }
  if (name == kStageAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || isa<func::FuncOp>(op))
      return op->emitError() << "'" << kStageAttr << "' is an integer attribute of plan ops";
    int64_t n = pipelineStages(op);
    if (n < 0)
      return failure();
    if (i.getInt() < 0 || i.getInt() >= n)
      return op->emitError() << "'" << kStageAttr << "' = " << i.getInt() << " is not a stage in [0, "
                             << n << ")";
    return success();
  }
  if (name == kResumeAttr) {
    if (!isa<func::FuncOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kResumeAttr << "' is a unit attribute of a plan func.func";
    return success();
  }
  if (name == kRngAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !s || (s.getValue() != "exact" && s.getValue() != "independent"))
      return op->emitError() << "'" << kRngAttr
                             << "' belongs on a plan func.func and is \"exact\" or \"independent\"";
    return success();
  }
  if (name == kDrawsAttr || name == kBlockOffsetAttr || name == kLayoutAttr) {
    if (op->getName().getStringRef() != "ref.dropout_mask")
      return op->emitError() << "'" << name << "' belongs on a plan's ref.dropout_mask";
    if (name == kDrawsAttr) {
      auto s = dyn_cast<StringAttr>(attr.getValue());
      if (!s || s.getValue().empty())
        return op->emitError() << "'" << kDrawsAttr
                               << "' must name the reference dropout mask this op draws";
      return success();
    }
    if (name == kBlockOffsetAttr) {
      auto a = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
      auto t = cast<RankedTensorType>(op->getResult(0).getType());
      if (!a || (int64_t)a.size() != t.getRank() || llvm::any_of(a.asArrayRef(), [](int64_t v) { return v < 0; }))
        return op->emitError() << "'" << kBlockOffsetAttr
                               << "' must be array<i64: ...> with one non-negative offset per dimension";
      return success();
    }
    auto layout = dyn_cast<LayoutAttr>(attr.getValue());
    MeshOp mesh = lookupMesh(op);
    if (!layout || !mesh)
      return op->emitError() << "'" << kLayoutAttr
                             << "' on an op must be a #dist.layout inside a plan function";
    return verifyLayout(layout, mesh, cast<RankedTensorType>(op->getResult(0).getType()).getRank(),
                        op->getLoc(), "dist.layout");
  }
  if (attr.getName() != kMeshAttr)
    return op->emitError() << "unknown dist attribute '" << attr.getName() << "'";
  if (!isa<func::FuncOp>(op))
    return op->emitError() << "'" << kMeshAttr << "' belongs on a func.func";
  if (!isa<FlatSymbolRefAttr>(attr.getValue()))
    return op->emitError() << "'" << kMeshAttr << "' must be a symbol reference to a dist.mesh";
  if (!lookupMeshOfFunc(op))
    return op->emitError() << "'" << kMeshAttr << "' names " << attr.getValue()
                           << ", which is not a dist.mesh in scope";
  return success();
}

static LogicalResult verifyValueAttr(Operation *op, Type type, NamedAttribute attr,
                                     const Twine &what) {
  if (attr.getName() == kValueAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || s.getValue().empty())
      return op->emitError() << what << ": '" << kValueAttr
                             << "' must be a non-empty string naming a reference value";
    return success();
  }
  if (attr.getName() == kPaddedAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << what << ": '" << kPaddedAttr << "' is a unit attribute";
    return success();
  }
  if (attr.getName() == kStageAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    auto axis = op->getAttrOfType<StringAttr>(kPipelineAttr);
    MeshOp mesh = lookupMeshOfFunc(op);
    if (!i || !axis || !mesh || mesh.axisIndex(axis.getValue()) < 0)
      return op->emitError() << what << ": '" << kStageAttr
                             << "' is an integer stage of a function with '" << kPipelineAttr << "'";
    int64_t n = mesh.getShape()[mesh.axisIndex(axis.getValue())];
    if (i.getInt() < 0 || i.getInt() >= n)
      return op->emitError() << what << ": '" << kStageAttr << "' = " << i.getInt()
                             << " is not a stage in [0, " << n << ")";
    return success();
  }
  if (attr.getName() != kLayoutAttr)
    return op->emitError() << what << ": unknown dist attribute '" << attr.getName() << "'";
  auto layout = dyn_cast<LayoutAttr>(attr.getValue());
  if (!layout)
    return op->emitError() << what << ": '" << kLayoutAttr << "' must be a #dist.layout";
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return op->emitError() << what << ": a layout needs a ranked tensor type";
  MeshOp mesh = lookupMeshOfFunc(op);
  if (!mesh)
    return op->emitError() << what << ": a layout needs the function to name its mesh with '"
                           << kMeshAttr << "'";
  return verifyLayout(layout, mesh, tensor.getRank(), op->getLoc(), what.str());
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op, unsigned region,
                                                    unsigned arg, NamedAttribute attr) {
  Type type = op->getRegion(region).getArgument(arg).getType();
  return verifyValueAttr(op, type, attr, "argument #" + Twine(arg));
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op, unsigned region,
                                                       unsigned result, NamedAttribute attr) {
  auto func = dyn_cast<func::FuncOp>(op);
  if (!func)
    return op->emitError() << "dist result attributes belong on a func.func";
  Type type = func.getResultTypes()[result];
  return verifyValueAttr(op, type, attr, "result #" + Twine(result));
}
