//===- PlanBody.cpp - building a generated function with MLIR's builders --===//
//
// Body (PlanGenInternal.h): the ops of one function of `planproof plan`, built with
// their ODS builders, so every op is well-typed by construction and the module is
// verified before it is printed; finishFunction places them; printModule prints the
// module with MLIR's printer, values named after their locations, and puts the
// generator's comments back before the ops they describe.
//
//===----------------------------------------------------------------------===//
#include "Plan/PlanGenInternal.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/OperationSupport.h"

#include "llvm/Support/raw_ostream.h"

namespace planproof::plangen {

using namespace mlir;

Body::Body(MLIRContext &context, const std::vector<Arg> &arguments)
    : ctx(&context), entry(std::make_unique<Block>()), args(arguments) {
  for (const Arg &a : args) {
    shape[a.name] = a.shape;
    val[a.name] = entry->addArgument(type(a.shape), loc(a.name));
    taken.insert(a.name);
  }
}

std::string Body::name(const std::string &base) {
  int &n = uses[base];
  std::string r = base;
  while (taken.count(r))
    r = base + "_" + std::to_string(++n);
  taken.insert(r);
  return r;
}

Value Body::v(const std::string &n) const { return val.at(n); }

RankedTensorType Body::type(const Shape &s) const {
  return RankedTensorType::get(s, Float32Type::get(ctx));
}

Location Body::loc(const std::string &n) const { return NameLoc::get(StringAttr::get(ctx, n)); }

IntegerAttr Body::i64(int64_t n) const {
  return IntegerAttr::get(IntegerType::get(ctx, 64), n);
}

ArrayAttr Body::axes(const std::vector<std::string> &a) const {
  SmallVector<Attribute> names;
  for (const std::string &n : a)
    names.push_back(StringAttr::get(ctx, n));
  return ArrayAttr::get(ctx, names);
}

std::string Body::place(Operation *op, const std::string &r) {
  Value result = op->getResult(0);
  val[r] = result;
  if (auto t = dyn_cast<RankedTensorType>(result.getType()))
    shape[r] = Shape(t.getShape().begin(), t.getShape().end());
  if (stage >= 0)
    op->setAttr(dist::kStageAttr, i64(stage));
  lines.push_back({"", op});
  return r;
}

std::string Body::matmul(const std::string &r, const std::string &a, const std::string &b, int ld,
                         int rd) {
  const Shape &sa = shape.at(a), &sb = shape.at(b);
  return make<ref::MatmulOp>(r, {sa[1 - ld], sb[1 - rd]}, v(a), v(b), i64(ld), i64(rd));
}

std::string Body::bmm(const std::string &r, const std::string &a, const std::string &b, int ld,
                      int rd) {
  const Shape &sa = shape.at(a), &sb = shape.at(b);
  return make<ref::BatchMatmulOp>(r, {sa[0], sa[3 - ld], sb[3 - rd]}, v(a), v(b), i64(ld),
                                  i64(rd));
}

std::string Body::reshape(const std::string &r, const std::string &x, Shape s) {
  return make<ref::ReshapeOp>(r, s, v(x));
}

std::string Body::transpose(const std::string &r, const std::string &x,
                            std::vector<int64_t> perm) {
  Shape s;
  for (int64_t p : perm)
    s.push_back(shape.at(x)[p]);
  return make<ref::TransposeOp>(r, s, v(x), DenseI64ArrayAttr::get(ctx, perm));
}

std::string Body::broadcast(const std::string &r, const std::string &x, std::vector<int64_t> dims,
                            Shape s) {
  return make<ref::BroadcastOp>(r, s, v(x), DenseI64ArrayAttr::get(ctx, dims));
}

std::string Body::topk(const std::string &r, const std::string &x, int64_t k) {
  return make<ref::TopkMaskOp>(r, shape.at(x), v(x), i64(k));
}

std::string Body::scale(const std::string &r, const std::string &x, double f) {
  return make<ref::ScaleOp>(r, shape.at(x), v(x), FloatAttr::get(Float64Type::get(ctx), f));
}

std::string Body::norm(const std::string &r, const std::string &x, const std::string &w) {
  return make<ref::RmsNormOp>(r, shape.at(x), v(x), v(w),
                              FloatAttr::get(Float64Type::get(ctx), 1.0e-5));
}

std::string Body::reduceSum(const std::string &r, const std::string &x, std::vector<int64_t> dims,
                            const std::string &role) {
  Shape s;
  for (size_t d = 0; d < shape.at(x).size(); ++d)
    if (std::find(dims.begin(), dims.end(), (int64_t)d) == dims.end())
      s.push_back(shape.at(x)[d]);
  std::string out = make<ref::ReduceSumOp>(r, s, v(x), DenseI64ArrayAttr::get(ctx, dims));
  if (!role.empty())
    lines.back().op->setAttr("ref.role", StringAttr::get(ctx, role));
  return out;
}

std::string Body::slice(const std::string &r, const std::string &x, std::vector<int64_t> off,
                        Shape sizes) {
  return make<ref::SliceOp>(r, sizes, v(x), DenseI64ArrayAttr::get(ctx, off),
                            DenseI64ArrayAttr::get(ctx, sizes));
}

std::string Body::concat(const std::string &r, const std::string &a, const std::string &b,
                         int dim) {
  Shape s = shape.at(a);
  s[dim] += shape.at(b)[dim];
  return make<ref::ConcatOp>(r, s, ValueRange{v(a), v(b)}, i64(dim));
}

std::string Body::causalSoftmax(const std::string &r, const std::string &x,
                                const std::string &offset) {
  return make<ref::CausalSoftmaxOp>(r, shape.at(x), v(x), offset.empty() ? Value() : v(offset));
}

std::string Body::capacityDispatch(const std::string &r, const std::string &chosen,
                                   int64_t capacity, int64_t groups, Shape s) {
  return make<ref::CapacityDispatchOp>(r, s, v(chosen), i64(capacity), i64(groups));
}

std::string Body::crossEntropySum(const std::string &r, const std::string &logits,
                                  const std::string &labels, const std::string &mask) {
  return make<ref::CrossEntropySumOp>(r, {}, v(logits), v(labels), v(mask));
}

std::string Body::constant(const std::string &r, double value, Shape s) {
  return make<ref::ConstantOp>(r, s, FloatAttr::get(Float64Type::get(ctx), value));
}

std::string Body::axisIndex(const std::string &r, const std::string &axis) {
  return build<dist::AxisIndexOp>(r, IndexType::get(ctx), StringAttr::get(ctx, axis));
}

std::string Body::indexConstant(const std::string &r, int64_t value) {
  return build<arith::ConstantIndexOp>(r, value);
}

std::string Body::muli(const std::string &r, const std::string &a, const std::string &c) {
  return build<arith::MulIOp>(r, v(a), v(c));
}

std::string Body::subi(const std::string &r, const std::string &a, const std::string &c) {
  return build<arith::SubIOp>(r, v(a), v(c));
}

void Body::grad(const std::vector<std::string> &outs, const std::string &loss,
                const std::vector<std::string> &wrt) {
  SmallVector<Value> values;
  SmallVector<Attribute> names;
  for (const std::string &w : wrt)
    values.push_back(v(w));
  for (const std::string &o : outs)
    names.push_back(StringAttr::get(ctx, o));
  // The results' names ride on the location (ref.grad's getAsmResultNames).
  // (No NameLoc inside: the printer would name the results as one group after it.)
  Location at = FusedLoc::get(ctx, {}, ArrayAttr::get(ctx, names));
  OpBuilder b(ctx);
  auto op = ref::GradOp::create(b, at, v(loss), values);
  for (size_t i = 0; i < outs.size(); ++i) {
    val[outs[i]] = op->getResult(i);
    shape[outs[i]] = shape.at(wrt[i]);
  }
  if (stage >= 0)
    op->setAttr(dist::kStageAttr, i64(stage));
  lines.push_back({"", op});
}

std::string Body::allReduce(const std::string &r, const std::string &x,
                            const std::vector<std::string> &a, const std::string &kind) {
  return make<dist::AllReduceOp>(r, shape.at(x), v(x), axes(a), StringAttr::get(ctx, kind));
}

std::string Body::allGather(const std::string &r, const std::string &x,
                            const std::vector<std::string> &a, int dim, int64_t n, bool zigzag) {
  Shape s = shape.at(x);
  s[dim] *= n;
  return make<dist::AllGatherOp>(r, s, v(x), axes(a), i64(dim),
                                 zigzag ? UnitAttr::get(ctx) : UnitAttr());
}

std::string Body::reduceScatter(const std::string &r, const std::string &x,
                                const std::vector<std::string> &a, int dim, int64_t n) {
  Shape s = shape.at(x);
  s[dim] /= n;
  return make<dist::ReduceScatterOp>(r, s, v(x), axes(a), i64(dim), UnitAttr(),
                                     StringAttr::get(ctx, "sum"));
}

std::string Body::shardSlice(const std::string &r, const std::string &x,
                             const std::vector<std::string> &a, int dim, int64_t n) {
  Shape s = shape.at(x);
  s[dim] /= n;
  return make<dist::ShardSliceOp>(r, s, v(x), axes(a), i64(dim), UnitAttr());
}

std::string Body::allToAll(const std::string &r, const std::string &x,
                           const std::vector<std::string> &a, int split, int cat, int64_t n) {
  Shape s = shape.at(x);
  s[split] /= n;
  s[cat] *= n;
  return make<dist::AllToAllOp>(r, s, v(x), axes(a), i64(split), i64(cat));
}

std::string Body::stageSelect(const std::string &r, const std::vector<std::string> &values) {
  SmallVector<Value> vs;
  for (const std::string &n : values)
    vs.push_back(v(n));
  return make<dist::StageSelectOp>(r, shape.at(values[0]), ValueRange(vs));
}

Operation *Body::recv(const std::string &r, int64_t from, int64_t to, const std::string &tag,
                      Shape s) {
  OpBuilder b(ctx);
  auto op = dist::RecvOp::create(b, loc(r), type(s), i64(from), i64(to),
                                 StringAttr::get(ctx, tag), IntegerAttr());
  val[r] = op.getResult();
  shape[r] = s;
  return op;
}

Operation *Body::send(const std::string &x, int64_t from, int64_t to, const std::string &tag) {
  OpBuilder b(ctx);
  return dist::SendOp::create(b, UnknownLoc::get(ctx), v(x), i64(from), i64(to),
                              StringAttr::get(ctx, tag), IntegerAttr());
}

func::FuncOp finishFunction(ModuleOp module, const std::string &name, Body &body,
                            const std::vector<Line> &lines,
                            const std::vector<std::pair<std::string, NamedAttrList>> &results,
                            Comments &comments) {
  MLIRContext *ctx = module.getContext();
  SmallVector<Value> values;
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  for (const auto &[v, attrs] : results) {
    values.push_back(body.v(v));
    resultTypes.push_back(values.back().getType());
    resultAttrs.push_back(attrs.getDictionary(ctx));
  }
  for (const Arg &a : body.args)
    argAttrs.push_back(a.attrs.getDictionary(ctx));
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, UnknownLoc::get(ctx), name,
                                   b.getFunctionType(body.entry->getArgumentTypes(), resultTypes));
  func.getBody().push_back(body.entry.release());
  Block &block = func.getBody().front();
  std::vector<std::string> pending;
  for (const Line &l : lines) {
    if (!l.op) {
      pending.push_back(l.comment);
      continue;
    }
    block.push_back(l.op);
    if (!pending.empty() && l.op->getNumResults() > 0) {
      // The op's name: its first result's (ref.grad names each result).
      std::string first;
      if (auto fused = dyn_cast<FusedLoc>(l.op->getLoc()))
        first = cast<StringAttr>(cast<ArrayAttr>(fused.getMetadata())[0]).str();
      else if (auto named = dyn_cast<NameLoc>(l.op->getLoc()))
        first = named.getName().str();
      auto &at = comments[{name, first}];
      at.insert(at.end(), pending.begin(), pending.end());
      pending.clear();
    }
  }
  b.setInsertionPointToEnd(&block);
  func::ReturnOp::create(b, UnknownLoc::get(ctx), values);
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
  return func;
}

namespace {
/// The SSA name a printed line of a function body defines first ("" for none).
std::string definedName(const std::string &line) {
  size_t at = line.find_first_not_of(' ');
  if (at == std::string::npos || line[at] != '%')
    return "";
  size_t end = line.find_first_of(" ,:=", at);
  return line.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
}
/// A function's signature, one argument and one result per line (the printer writes
/// it on one line). Argument and result attributes hold no '%' and no "}, tensor<".
std::string wrapSignature(const std::string &line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line.compare(i, 3, ", %") == 0) {
      out += ",\n      %";
      i += 2;
    } else if (line.compare(i, 10, "}, tensor<") == 0) {
      out += "},\n          tensor<";
      i += 9;
    } else if (line.compare(i, 6, ") -> (") == 0) {
      out += ")\n      -> (";
      i += 5;
    } else if (line.compare(i, 14, ") attributes {") == 0) {
      out += ")\n      attributes {";
      i += 13;
    } else {
      out += line[i];
    }
  }
  return out;
}
} // namespace

std::string printModule(ModuleOp module, const Comments &comments) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, OpPrintingFlags().printNameLocAsPrefix());
  os.flush();
  std::string out, func;
  out.reserve(text.size() + text.size() / 16);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string line = text.substr(start, end - start);
    start = end;
    size_t f = line.find("func.func @");
    if (f == std::string::npos && (f = line.find("func.func private @")) != std::string::npos)
      f += 8; // a layer function (compact)
    if (f != std::string::npos) {
      size_t n = f + 11, e = line.find('(', n);
      func = line.substr(n, e - n);
      out += wrapSignature(line);
      continue;
    }
    auto it = comments.find({func, definedName(line)});
    if (it != comments.end()) {
      std::string indent = line.substr(0, line.find_first_not_of(' '));
      for (const std::string &c : it->second)
        out += indent + "// " + c + "\n";
    }
    out += line;
  }
  return out;
}

} // namespace planproof::plangen
