//===- Terms.cpp - the layout engine's terms and states ------------------===//
//
// Hash-consed terms, the states' helpers, and the checks every rule ends with
// (LayoutState.h).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <tuple>

using namespace mlir;

namespace planproof::layouts {

//===----------------------------------------------------------------------===//
// Terms and states
//===----------------------------------------------------------------------===//

namespace {
/// "4x4xf32", "4x4x": the leading dimensions; stops at the first that is no number.
Shape readDims(llvm::StringRef dims) {
  Shape out;
  while (!dims.empty() && isdigit((unsigned char)dims.front())) {
    auto [num, rest] = dims.split('x');
    int64_t v = 0;
    if (num.getAsInteger(10, v))
      break;
    out.push_back(v);
    dims = rest;
  }
  return out;
}

/// "a,b,c," (optionally with a letter after each number): the numbers, and each one's
/// letter (0 where none); false on anything else.
bool readList(llvm::StringRef list, std::vector<int64_t> &out, std::vector<char> &tags) {
  while (!list.empty()) {
    int64_t v;
    if (list.consumeInteger(10, v))
      return false;
    char tag = 0;
    if (!list.empty() && isalpha((unsigned char)list.front())) {
      tag = list.front();
      list = list.drop_front();
    }
    if (!list.consume_front(","))
      return false;
    out.push_back(v);
    tags.push_back(tag);
  }
  return true;
}
} // namespace

TermPool::HeadData TermPool::readHead(llvm::StringRef text) {
  // The texts heads are made of (head(), leaf(), broadcast(), scaled(), Collectives.cpp's
  // nameStack), each read once here.
  HeadData h;
  if (text.consume_front("input ")) { // "input NAME : 4x4xf32", "input 3 : index constant"
    h.kind = HeadData::Input;
    size_t colon = text.rfind(" : ");
    llvm::StringRef type = colon == llvm::StringRef::npos ? "" : text.substr(colon + 3);
    h.shape = readDims(type);
    int64_t v;
    if (type == "index constant" && !text.substr(0, colon).getAsInteger(10, v)) {
      h.constant = true;
      h.params = {v};
    }
    return h;
  }
  if (text.starts_with("scale{")) {
    h.kind = HeadData::Scale;
    return h;
  }
  size_t colon = text.rfind("}:");
  if (colon != llvm::StringRef::npos)
    h.shape = readDims(text.substr(colon + 2));
  llvm::StringRef inside = text.substr(0, colon == llvm::StringRef::npos ? text.size() : colon);
  std::vector<char> tags;
  if (inside.consume_front("bcast{")) {
    if (readList(inside, h.params, tags))
      h.kind = HeadData::Broadcast;
    return h;
  }
  bool gather = inside.consume_front("gstack{");
  if (gather || inside.consume_front("stack{")) {
    int64_t e, d;
    if (inside.consumeInteger(10, e) || !inside.consume_front(";") ||
        inside.consumeInteger(10, d) || !inside.consume_front(";"))
      return h;
    std::vector<int64_t> axes;
    if (!readList(inside, axes, tags))
      return h;
    h.params = {e, d};
    for (size_t i = 0; i < axes.size(); ++i)
      h.params.push_back(gather ? 2 * axes[i] + (tags[i] == 's') : axes[i]);
    h.kind = gather ? HeadData::GatherStack : HeadData::Stack;
    return h;
  }
  if (size_t brace = inside.find('{'); brace != llvm::StringRef::npos) {
    h.kind = HeadData::Op;
    h.op = inside.substr(0, brace).str();
  }
  int64_t dim;
  if (inside.consume_front("ref.concat{dim=") && !inside.consumeInteger(10, dim) && dim >= 0) {
    h.concat = true;
    h.params = {dim};
  }
  return h;
}

TermId TermPool::intern(const std::string &head, const std::string &shortHead,
                        std::vector<TermId> operands) {
  // A head's text once; a term's key is its head's number and its operands, which
  // are copied once into the pool's allocator (no allocation per term of its own).
  auto h = headIds.find(head);
  if (h == headIds.end()) {
    h = headIds.emplace(head, (uint32_t)headTexts.size()).first;
    headTexts.push_back(head);
    shortTexts.push_back(shortHead);
    headInfo.push_back(readHead(head));
  }
  uint32_t id = h->second;
  auto found = ids.find(Key{id, operands});
  if (found != ids.end())
    return found->second;
  TermId *copy = storage.Allocate<TermId>(operands.size());
  std::copy(operands.begin(), operands.end(), copy);
  llvm::ArrayRef<TermId> kept(copy, operands.size());
  TermId t = (TermId)headOf.size();
  headOf.push_back(id);
  args.push_back(kept);
  ids.try_emplace(Key{id, kept}, t);
  return t;
}

TermId TermPool::leaf(const std::string &input, const std::string &type) {
  TermId t = intern("input " + input + " : " + type, "%" + input, {});
  if (llvm::StringRef(type).starts_with("index")) // ("index", "index constant")
    indexTerms.insert(t);
  return t;
}

TermId TermPool::node(const std::string &head, const std::vector<TermId> &operands) {
  std::string shortHead = head.substr(0, head.find_first_of("{:"));
  if (shortHead.rfind("ref.", 0) == 0)
    shortHead = shortHead.substr(4);
  // A product, a maximum and a minimum commute (elementwise, of operands of one
  // shape): their operands in term order, so that x * y and y * x are one term.
  if ((shortHead == "mul" || shortHead == "maximum" || shortHead == "minimum") &&
      operands.size() == 2 && operands[1] < operands[0])
    return intern(head, shortHead, {operands[1], operands[0]});
  return intern(head, shortHead, operands);
}

bool TermPool::commutative(TermId t) const {
  return args[t].size() == 2 && llvm::StringRef(headTexts[headOf[t]]).starts_with("ref.mul{");
}

std::vector<TermId> TermPool::flatten(const std::string &prefix,
                                      const std::vector<TermId> &operands) const {
  std::vector<TermId> flat;
  for (TermId t : operands) {
    if (key(t).compare(0, prefix.size(), prefix) == 0)
      flat.insert(flat.end(), args[t].begin(), args[t].end());
    else
      flat.push_back(t);
  }
  return flat;
}

void TermPool::summands(const std::string &head, TermId t, const Rational &f,
                        std::vector<std::pair<TermId, Rational>> &out) const {
  if (auto s = scales.find(t); s != scales.end()) // scale{c}(u)
    return summands(head, args[t][0], f * s->second, out);
  if (key(t) == head) {
    for (TermId u : args[t])
      summands(head, u, f, out);
    return;
  }
  out.push_back({t, f});
}

namespace {
/// Weighted summands sorted by term, equal terms' weights added, zeros dropped (a
/// vector, not a map: sums are built often).
std::vector<std::pair<TermId, Rational>> merged(std::vector<std::pair<TermId, Rational>> all) {
  std::stable_sort(all.begin(), all.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<std::pair<TermId, Rational>> kept;
  for (size_t i = 0; i < all.size();) {
    Rational f = all[i].second;
    size_t j = i + 1;
    for (; j < all.size() && all[j].first == all[i].first; ++j)
      f = f + all[j].second;
    if (!f.isZero())
      kept.push_back({all[i].first, f});
    i = j;
  }
  return kept;
}
} // namespace

std::pair<TermId, Rational>
TermPool::sum(const std::string &head, const std::vector<std::pair<TermId, Rational>> &operands) {
  std::vector<std::pair<TermId, Rational>> all;
  for (auto &[t, f] : operands)
    summands(head, t, f, all);
  TermId firstSeen = all.empty() ? 0 : std::min_element(all.begin(), all.end())->first;
  std::vector<std::pair<TermId, Rational>> kept = merged(std::move(all));
  if (!pieces.empty())
    joinPieces(kept);
  joinSlicedSums(kept);
  factorShared(kept);
  if (kept.empty()) // every summand cancels: zero times any of them
    return {firstSeen, Rational(0)};
  if (kept.size() == 1)
    return kept[0];
  Rational factor = kept[0].second;
  std::vector<TermId> ts;
  for (auto &[t, f] : kept)
    ts.push_back(scaled(t, f / factor));
  return {node(head, ts), factor};
}

void TermPool::contractionPiece(TermId piece, TermId whole, int64_t start, int64_t length,
                                int64_t extent) {
  pieces.try_emplace(piece, Piece{whole, start, length, extent});
}

void TermPool::joinPieces(std::vector<std::pair<TermId, Rational>> &kept) const {
  // Pieces by (whole, weight): where their rows cover the whole's extent once, the
  // whole replaces them.
  std::vector<std::pair<TermId, Rational>> out;
  std::vector<bool> used(kept.size(), false);
  bool joined = false;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (used[i])
      continue;
    auto p = pieces.find(kept[i].first);
    if (p == pieces.end()) {
      out.push_back(kept[i]);
      continue;
    }
    std::vector<size_t> group;
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (size_t j = i; j < kept.size(); ++j) {
      auto q = pieces.find(kept[j].first);
      if (used[j] || q == pieces.end() || q->second.whole != p->second.whole ||
          !(kept[j].second == kept[i].second))
        continue;
      group.push_back(j);
      rows.push_back({q->second.start, q->second.start + q->second.length});
    }
    std::sort(rows.begin(), rows.end());
    int64_t at = 0;
    bool covers = true;
    for (auto [s, e] : rows) {
      covers &= s == at;
      at = e;
    }
    covers &= at == p->second.extent;
    if (!covers) {
      out.push_back(kept[i]);
      continue;
    }
    for (size_t j : group)
      used[j] = true;
    out.push_back({p->second.whole, kept[i].second});
    joined = true;
  }
  if (!joined)
    return;
  kept = merged(std::move(out)); // a whole may already have been a summand
}

void TermPool::joinSlicedSums(std::vector<std::pair<TermId, Rational>> &kept) {
  // sum_k reduce_sum(slice_k(T), D) = reduce_sum(T, D), where the slices cut T along
  // one dimension d of D only (whole along the others) into pieces that tile it: a sum
  // over D sums every element once, piece by piece. Equal weights only. (A loss
  // summed per microbatch of rows a windowed layout cut out of the batch, Windows.cpp,
  // meets the reference's one sum.)
  struct Cut {
    uint32_t head;
    TermId input;
    int64_t dim;
    Rational weight;
    int64_t from, to;
    size_t index;
  };
  std::vector<Cut> cuts;
  for (size_t i = 0; i < kept.size(); ++i) {
    TermId t = kept[i].first;
    DictionaryAttr attrs;
    if (args[t].size() != 1 || opNameOf(t, attrs) != ref::ReduceSumOp::getOperationName())
      continue;
    auto dims = attrs ? attrs.getAs<DenseI64ArrayAttr>("dims") : DenseI64ArrayAttr();
    TermId input;
    std::vector<int64_t> offsets, sizes;
    if (!dims || !sliceParts(*this, args[t][0], input, offsets, sizes))
      continue;
    Shape whole = shapeOf(input);
    if (whole.size() != offsets.size() || whole.size() != sizes.size())
      continue;
    int64_t cutDim = -1;
    bool one = true;
    for (size_t d = 0; d < whole.size(); ++d)
      if (offsets[d] != 0 || sizes[d] != whole[d]) {
        one &= cutDim < 0;
        cutDim = (int64_t)d;
      }
    if (!one || cutDim < 0 || !llvm::is_contained(dims.asArrayRef(), cutDim))
      continue;
    cuts.push_back({headOf[t], input, cutDim, kept[i].second, offsets[cutDim],
                    offsets[cutDim] + sizes[cutDim], i});
  }
  if (cuts.size() < 2)
    return;
  std::sort(cuts.begin(), cuts.end(), [](const Cut &a, const Cut &b) {
    return std::tie(a.head, a.input, a.dim, a.from, a.index) <
           std::tie(b.head, b.input, b.dim, b.from, b.index);
  });
  std::vector<bool> drop(kept.size(), false);
  std::vector<std::pair<TermId, Rational>> joined;
  for (size_t k = 0; k < cuts.size();) {
    size_t end = k + 1;
    while (end < cuts.size() && cuts[end].head == cuts[k].head &&
           cuts[end].input == cuts[k].input && cuts[end].dim == cuts[k].dim)
      ++end;
    // The pieces tile [0, extent) in order, once each, with one weight.
    int64_t at = 0, extent = shapeOf(cuts[k].input)[cuts[k].dim];
    bool tiles = end - k >= 2;
    for (size_t j = k; j < end && tiles; ++j) {
      tiles = cuts[j].from == at && cuts[j].weight == cuts[k].weight;
      at = cuts[j].to;
    }
    if (tiles && at == extent) {
      TermId first = kept[cuts[k].index].first;
      TermId whole = node(headTexts[cuts[k].head], {cuts[k].input});
      OperationName opName = OperationName::getFromOpaquePointer(ops[first].first);
      DictionaryAttr attrs;
      if (opOf(first, opName, attrs))
        setOp(whole, opName, attrs);
      joined.push_back({whole, cuts[k].weight});
      applied("sums: pieces that tile a value, each summed, sum to its sum");
      for (size_t j = k; j < end; ++j)
        drop[cuts[j].index] = true;
    }
    k = end;
  }
  if (joined.empty())
    return;
  std::vector<std::pair<TermId, Rational>> out = std::move(joined);
  for (size_t i = 0; i < kept.size(); ++i)
    if (!drop[i])
      out.push_back(kept[i]);
  kept = merged(std::move(out)); // (the whole may already have been a summand)
}

void TermPool::factorShared(std::vector<std::pair<TermId, Rational>> &kept) {
  // Summands of one multilinear op (matmul, batch_matmul, mul: linear in each operand
  // separately) sharing an operand: sum_i w_i op(a, x_i) = op(a, sum_i w_i x_i). A
  // weight gradient computed as two separately derived gradients added meets the
  // reference's one product of the summed cotangent. A product (ref.mul) commutes, and
  // its operands are in term order (node): it may share either operand.
  auto multilinear = [&](TermId t) {
    if (args[t].size() != 2 || t >= ops.size() || !ops[t].first)
      return false;
    auto [it, fresh] = multilinearOps.try_emplace(ops[t].first, false);
    if (fresh)
      it->second = OperationName::getFromOpaquePointer(ops[t].first)
                       .hasTrait<ref::OpTrait::Multilinear>();
    return it->second;
  };
  for (unsigned shared = 0; shared < 2 && kept.size() >= 2; ++shared) {
    // (head, shared operand) of each candidate, sorted: groups are runs of one key; a
    // product is a candidate by both operands in the first pass.
    struct Candidate {
      uint64_t key;
      uint32_t index, at; // at: the shared operand's position
      bool operator<(const Candidate &o) const {
        return std::tie(key, index, at) < std::tie(o.key, o.index, o.at);
      }
    };
    std::vector<Candidate> keys;
    for (size_t i = 0; i < kept.size(); ++i) {
      TermId t = kept[i].first;
      if (!multilinear(t))
        continue;
      bool commutes = commutative(t);
      if (commutes && shared == 1)
        continue;
      for (unsigned at : commutes ? std::vector<unsigned>{0, 1} : std::vector<unsigned>{shared})
        keys.push_back({(uint64_t)headOf[t] << 32 | args[t][at], (uint32_t)i, at});
    }
    std::sort(keys.begin(), keys.end());
    std::vector<bool> drop(kept.size(), false);
    std::vector<std::pair<TermId, Rational>> out;
    bool factored = false;
    for (size_t k = 0; k < keys.size();) {
      size_t e = k + 1;
      while (e < keys.size() && keys[e].key == keys[k].key)
        ++e;
      // The run's summands not already factored with another shared operand.
      std::vector<const Candidate *> group;
      for (size_t m = k; m < e; ++m)
        if (!drop[keys[m].index] &&
            (group.empty() || group.back()->index != keys[m].index))
          group.push_back(&keys[m]);
      k = e;
      if (group.size() < 2)
        continue;
      factored = true;
      TermId first = kept[group[0]->index].first;
      OperationName name = OperationName::getFromOpaquePointer(ops[first].first);
      auto attrs = cast<DictionaryAttr>(Attribute::getFromOpaquePointer(ops[first].second));
      MLIRContext *ctx = name.getIdentifier().getContext();
      unsigned at0 = group[0]->at;
      const std::string &add = head(OperationName("ref.add", ctx), DictionaryAttr::get(ctx),
                                    shapeOf(args[first][1 - at0]));
      std::vector<std::pair<TermId, Rational>> inner;
      for (const Candidate *c : group) {
        inner.push_back({args[kept[c->index].first][1 - c->at], kept[c->index].second});
        drop[c->index] = true;
      }
      auto [x, f] = sum(add, inner);
      if (f.isZero())
        continue;
      TermId a = args[first][at0];
      TermId t = node(headTexts[headOf[first]], at0 == 0 ? std::vector<TermId>{a, x}
                                                        : std::vector<TermId>{x, a});
      setOp(t, name, attrs);
      out.push_back({t, f});
    }
    if (!factored)
      continue;
    for (size_t i = 0; i < kept.size(); ++i)
      if (!drop[i])
        out.push_back(kept[i]);
    kept = merged(std::move(out));
  }
}

TermId TermPool::concat(const std::string &head, const std::vector<TermId> &operands) {
  // The family: the head up to its type ("ref.concat{dim=0 : i64;}:").
  return node(head, flatten(head.substr(0, head.rfind("}:") + 2), operands));
}

TermId TermPool::broadcast(const Shape &shape, const std::vector<int64_t> &dims, TermId source) {
  // A source dimension of one element is read at its one index wherever it maps, so the
  // broadcast of the source without it (reshaped, reshapes composed) is the same value:
  // dropped, so that a [1, N] row copied to [1, M, N] meets the [N] vector copied so.
  // (Kept where every source dimension has one element: a scalar's reshape.)
  Shape from = shapeOf(source);
  if (context && from.size() == dims.size()) {
    std::vector<int64_t> kept;
    Shape keptShape;
    for (size_t k = 0; k < from.size(); ++k)
      if (from[k] != 1) {
        kept.push_back(dims[k]);
        keptShape.push_back(from[k]);
      }
    if (!kept.empty() && kept.size() < dims.size())
      return broadcast(shape, kept, reshaped(source, keptShape));
  }
  std::string head = "bcast{";
  for (int64_t d : dims)
    head += std::to_string(d) + ",";
  head += "}:";
  for (int64_t d : shape)
    head += std::to_string(d) + "x";
  return node(head, {source});
}

TermId TermPool::reshaped(TermId t, const Shape &shape, mlir::MLIRContext *ctx) {
  ctx = ctx ? ctx : context;
  if (shapeOf(t) == shape)
    return t;
  if (isOp<ref::ReshapeOp>(t)) {
    t = args[t][0];
    if (shapeOf(t) == shape)
      return t;
  }
  if (uniformBroadcast(t) && args[t].size() == 1)  // one value, in any shape
    return broadcast(shape, {}, args[t][0]);
  OperationName name("ref.reshape", ctx);
  auto none = DictionaryAttr::get(ctx);
  TermId r = node(head(name, none, shape), {t});
  setOp(r, name, none);
  return r;
}

TermId TermPool::scaled(TermId t, const Rational &c) {
  if (c.isOne())
    return t;
  TermId s = node("scale{" + c.str() + "}", {t});
  scales.try_emplace(s, c);
  return s;
}

std::string TermPool::str(TermId t, size_t budget) const {
  std::string out = shortTexts[headOf[t]];
  if (args[t].empty() || out.size() >= budget)
    return out;
  out += "(";
  for (size_t i = 0; i < args[t].size(); ++i) {
    if (out.size() >= budget)
      return out + "...)";
    out += (i ? ", " : "") + str(args[t][i], budget - std::min(budget, out.size()));
  }
  return out + ")";
}

std::string TermPool::difference(TermId a, TermId b) const {
  auto head = [&](TermId t) { return key(t); };
  while (a != b) {
    if (head(a) != head(b) || args[a].size() != args[b].size())
      return head(a) + " where the reference has " + head(b);
    // Operands kept in term order (a product's two, a sum's summands) pair up by
    // value: where one operand of each side has no equal on the other, those differ.
    if (commutative(a) || llvm::StringRef(head(a)).starts_with("ref.add{")) {
      std::vector<TermId> onlyA, onlyB;
      for (TermId x : args[a])
        if (std::find(args[b].begin(), args[b].end(), x) == args[b].end())
          onlyA.push_back(x);
      for (TermId x : args[b])
        if (std::find(args[a].begin(), args[a].end(), x) == args[a].end())
          onlyB.push_back(x);
      if (onlyA.size() == 1 && onlyB.size() == 1) {
        a = onlyA[0];
        b = onlyB[0];
        continue;
      }
    }
    size_t i = 0;
    while (args[a][i] == args[b][i])
      ++i; // some operand differs, since a != b and heads are equal
    a = args[a][i];
    b = args[b][i];
  }
  return "";
}

std::string headFrom(llvm::StringRef name, DictionaryAttr attrs, const Shape &global) {
  std::string h = name.str() + "{";
  for (NamedAttribute a : attrs) {
    if (a.getName().strref().contains('.'))
      continue;
    std::string v;
    llvm::raw_string_ostream os(v);
    a.getValue().print(os);
    h += a.getName().str() + "=" + os.str() + ";";
  }
  h += "}:";
  for (int64_t d : global)
    h += std::to_string(d) + "x";
  return h;
}

Shape TermPool::shapeOf(TermId t) const {
  Rational c;
  TermId u;
  if (scaleOf(t, c, u))
    return shapeOf(u);
  return headData(t).shape;
}

bool TermPool::scaleOf(TermId t, Rational &c, TermId &u) const {
  auto it = scales.find(t);
  if (it == scales.end())
    return false;
  c = it->second;
  u = args[t][0];
  return true;
}

void TermPool::setOp(TermId t, mlir::OperationName name, DictionaryAttr attrs) {
  if (t >= ops.size())
    ops.resize(headOf.size() > t ? headOf.size() : t + 1, {nullptr, nullptr});
  if (!ops[t].first) // the first op recorded for a term is kept
    ops[t] = {name.getAsOpaquePointer(), attrs.getAsOpaquePointer()};
}

bool TermPool::opOf(TermId t, mlir::OperationName &name, DictionaryAttr &attrs) const {
  if (t >= ops.size() || !ops[t].first)
    return false;
  name = mlir::OperationName::getFromOpaquePointer(ops[t].first);
  attrs = cast<DictionaryAttr>(Attribute::getFromOpaquePointer(ops[t].second));
  return true;
}

llvm::StringRef TermPool::opNameOf(TermId t, DictionaryAttr &attrs) const {
  if (t >= ops.size() || !ops[t].first)
    return "";
  attrs = cast<DictionaryAttr>(Attribute::getFromOpaquePointer(ops[t].second));
  return mlir::OperationName::getFromOpaquePointer(ops[t].first).getStringRef();
}

const TermPool::OpFactors *TermPool::factorsOf(TermId t) {
  if (t < factorsByTerm.size() && factorsByTerm[t] != ~0u)
    return factorsByTerm[t] ? &factorTable[factorsByTerm[t] - 1] : nullptr;
  if (t >= factorsByTerm.size())
    factorsByTerm.resize(t + 1, ~0u);
  factorsByTerm[t] = 0;
  if (!context)
    return nullptr;
  mlir::OperationName name("ref.add", context);
  DictionaryAttr attrs;
  if (!opOf(t, name, attrs) || !name.hasInterface<ref::LayoutFactorsOp>())
    return nullptr;
  // The signature: name, attributes, each operand's rank (-1: an index value) and the
  // result's, as opaque words (ranks are small integers, never valid pointers).
  std::vector<int64_t> ranks;
  for (TermId u : operands(t))
    ranks.push_back(isIndex(u) ? -1 : (int64_t)shapeOf(u).size());
  int64_t resultRank = (int64_t)shapeOf(t).size();
  std::vector<const void *> key{name.getAsOpaquePointer(), attrs.getAsOpaquePointer()};
  auto word = [](int64_t r) { return reinterpret_cast<const void *>((uintptr_t)(r + 2)); };
  for (int64_t r : ranks)
    key.push_back(word(r));
  key.push_back(word(resultRank));
  auto it = factorIds.find(key);
  if (it == factorIds.end()) {
    // The op's declaration answers for a stand-in of that signature: operands of those
    // ranks (index values where the term's are), every dimension 2 (factors read
    // ranks only).
    uint32_t id = 0;
    Block scratch;
    Location loc = UnknownLoc::get(context);
    auto tensor = [&](int64_t r) {
      return RankedTensorType::get(llvm::SmallVector<int64_t>(r, 2), Float32Type::get(context));
    };
    for (int64_t r : ranks)
      scratch.addArgument(r < 0 ? Type(IndexType::get(context)) : Type(tensor(r)), loc);
    OperationState st(loc, name);
    st.addOperands(scratch.getArguments());
    st.addAttributes(attrs.getValue());
    st.addTypes(tensor(resultRank));
    Operation *op = Operation::create(st);
    if (std::optional<ref::LayoutFactors> rule = cast<ref::LayoutFactorsOp>(op).getLayoutFactors()) {
      OpFactors of{*rule, {}};
      int next = 0;
      for (int64_t r : ranks)
        of.tensorOperand.push_back(r >= 0 ? next++ : -1);
      factorTable.push_back(std::move(of));
      id = (uint32_t)factorTable.size();
    }
    op->destroy();
    it = factorIds.emplace(std::move(key), id).first;
  }
  factorsByTerm[t] = it->second;
  return it->second ? &factorTable[it->second - 1] : nullptr;
}

size_t TermPool::HeadHash::operator()(const HeadKey &k) const {
  size_t h = std::hash<const void *>()(k.name) * 31 + std::hash<const void *>()(k.attrs);
  for (int64_t d : k.global)
    h = h * 1000003 + std::hash<int64_t>()(d);
  return h;
}

const std::string &TermPool::head(mlir::OperationName name, DictionaryAttr attrs,
                                  const Shape &global) {
  HeadKey key{name.getAsOpaquePointer(), attrs.getAsOpaquePointer(), global};
  auto it = heads.find(key);
  if (it == heads.end())
    it = heads.emplace(std::move(key), headFrom(name.getStringRef(), attrs, global)).first;
  return it->second;
}

std::vector<int> State::splitAxes() const {
  std::vector<int> out;
  for (const auto &d : split)
    out.insert(out.end(), d.begin(), d.end());
  return out;
}

bool RuleContext::axesOf(ArrayAttr names, std::vector<int> &out) const {
  out.clear();
  for (Attribute a : names) {
    auto s = dyn_cast<StringAttr>(a);
    int i = s ? mesh.axisIndex(s.str()) : -1;
    if (i < 0)
      return false;
    if (mesh.shape[i] > 1)
      out.push_back(i);
  }
  return true;
}

int64_t RuleContext::size(const std::vector<int> &axes) const {
  int64_t n = 1;
  for (int a : axes)
    n *= mesh.shape[a];
  return n;
}

std::string axesText(const Mesh &mesh, const std::vector<int> &axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    s += (i ? ", " : "") + mesh.axes[axes[i]];
  return s + "]";
}

std::string RuleContext::show(const State &s) const {
  std::string out = "[";
  for (size_t d = 0; d < s.split.size(); ++d) {
    out += d ? ", " : "";
    if (!s.split[d].windows.empty())
      out += windowsText(mesh, s.split[d], s.global[d]);
    else if (s.split[d].empty())
      out += "_";
    else if (s.split[d].size() == 1)
      out += mesh.axes[s.split[d][0]];
    else
      out += axesText(mesh, s.split[d]);
  }
  out += "]";
  if (!s.partial.empty())
    out += " partial-sum over " + axesText(mesh, s.partial);
  if (!s.partialMax.empty())
    out += " partial-max over " + axesText(mesh, s.partialMax);
  return out;
}

bool intersects(const std::vector<int> &a, const std::vector<int> &b) {
  for (int x : a)
    if (std::find(b.begin(), b.end(), x) != b.end())
      return true;
  return false;
}

std::vector<int> sortedUnion(std::vector<int> a, const std::vector<int> &b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

std::string opName(Operation &op) { return op.getName().getStringRef().str(); }

bool resultShape(Operation &op, Shape &local) {
  if (op.getNumResults() != 1)
    return false;
  auto t = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (!t)
    return false;
  local.assign(t.getShape().begin(), t.getShape().end());
  return true;
}

/// Whether `local` is the block of `global` under `split` (each dimension's global
/// size is its local size times the number of its blocks), and no axis is used twice.
bool consistent(RuleContext &c, const State &s, const Shape &local, std::string &why) {
  if (s.split.size() != local.size() || s.global.size() != local.size()) {
    why = "the result's rank does not match its layout";
    return false;
  }
  std::vector<int> all = s.splitAxes();
  all.insert(all.end(), s.partial.begin(), s.partial.end());
  all.insert(all.end(), s.partialMax.begin(), s.partialMax.end());
  std::vector<int> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    why = "one mesh axis would split two dimensions, or split and sum one value";
    return false;
  }
  for (size_t d = 0; d < local.size(); ++d) {
    if (!s.split[d].windows.empty()) {
      if (!windowsFit(c.mesh, s.split[d], s.global[d], local[d], why))
        return false;
      continue;
    }
    int64_t whole;
    if (!checkedMul(local[d], c.size(s.split[d]), whole) || whole != s.global[d]) {
      why = "the local size " + std::to_string(local[d]) + " of dimension " +
            std::to_string(d) + " is not a block of the global size " +
            std::to_string(s.global[d]) + " split over " + axesText(c.mesh, s.split[d]);
      return false;
    }
  }
  return true;
}

} // namespace planproof::layouts
