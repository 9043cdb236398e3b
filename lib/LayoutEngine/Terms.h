//===- Terms.h - hash-consed terms over the reference's inputs -*- C++ -*-===//
//
// The terms the layout engine's states denote (docs/layout-engine.md, "Terms and factors"): a
// pool of hash-consed nodes with normal forms for sums, products, concatenations and
// reshapes (Terms.cpp), and what the rules read of a term (its head, shape, op and
// layout factors). Internal to lib/LayoutEngine.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_TERMS_H
#define PLANPROOF_LAYOUTENGINE_TERMS_H

#include "Ref/LayoutFactors.h"
#include "Semantics/Layout.h"
#include "Support/Rational.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/Support/Allocator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace planproof::layouts {

using TermId = uint32_t;

/// Hash-consed terms over the reference's inputs. A term is a leaf (a reference input,
/// by name and type) or a head applied to terms; a head is an op's name, its inherent
/// attributes and its result's global type, so two terms are equal exactly when they
/// apply the same function to the same arguments: equal terms denote equal values.
class TermPool {
public:
  TermId leaf(const std::string &input, const std::string &type);
  TermId node(const std::string &head, const std::vector<TermId> &operands);
  /// Whether `t` is a product (ref.mul), whose operands node() keeps in term order.
  bool commutative(TermId t) const;
  /// The sum (`head`: ref.add's, with its type) of factor x term `operands`, as a
  /// term and a factor, in a normal form: scales and nested sums of the same head are
  /// distributed into summands, equal summands merged (a + 2a = 3a), zeros dropped,
  /// the rest ordered by term, and the first one's factor taken out. Addition is
  /// associative and commutative and multiplication distributes over it, so sums of
  /// the same weighted summands in any grouping, order or scaling are one term.
  std::pair<TermId, Rational> sum(const std::string &head,
                                  const std::vector<std::pair<TermId, Rational>> &operands);
  /// A concatenation (`head`: ref.concat's, with its dimension and type) of
  /// `operands`, flattened through nested concatenations along the same dimension
  /// (whatever their types), in order: concat(concat(a, b), c) = concat(a, b, c).
  TermId concat(const std::string &head, const std::vector<TermId> &operands);
  /// Records that `piece` is the part of the contraction `whole` over rows
  /// [start, start + length) of its contracted dimension of `extent` rows (a product of
  /// the operands' slices, Windows.cpp): in a sum, pieces of one whole with equal
  /// weights that cover [0, extent) once are that whole (the sum over a dimension is
  /// the sum of the sums over its parts).
  void contractionPiece(TermId piece, TermId whole, int64_t start, int64_t length,
                        int64_t extent);
  /// `t` times `c` (c != 1 gives a scale node; the engine keeps factors outside terms
  /// where linearity allows, see Rules.cpp, combine).
  TermId scaled(TermId t, const Rational &c);
  /// The broadcast of `source` to `shape`: result dimension dims[k] is source dimension
  /// k, the others are copies (no dims: every element is the scalar `source`).
  TermId broadcast(const Shape &shape, const std::vector<int64_t> &dims, TermId source);
  /// The MLIR context whose ops the terms apply (the spec's): broadcast() reshapes its
  /// source through it; without one it keeps the source as given.
  void setContext(mlir::MLIRContext *c) { context = c; }
  /// reshape(t) to `shape`, reshapes composed (one to t's own shape is t), in context
  /// `ctx` (default: the pool's).
  TermId reshaped(TermId t, const Shape &shape, mlir::MLIRContext *ctx = nullptr);
  /// The scalar 1 (ref.constant's elements are factor x one).
  TermId one() { return leaf("1", ""); }
  /// The named identities of the normal form (Picks.cpp) applied since the rule
  /// visiting an op last took them (takeApplied): that rule names them in the proof
  /// trace.
  void applied(const char *identity) {
    if (std::find(appliedIdentities.begin(), appliedIdentities.end(), identity) ==
        appliedIdentities.end())
      appliedIdentities.push_back(identity);
  }
  std::vector<std::string> takeApplied() { return std::exchange(appliedIdentities, {}); }
  /// Integer inputs' bounds (every value in [0, bound)); 0 where none is known.
  void setBound(TermId leaf, int64_t bound) { bounds[leaf] = bound; }
  int64_t boundOf(TermId t) const {
    auto it = bounds.find(t);
    return it == bounds.end() ? 0 : it->second;
  }
  /// A readable rendering (heads without attributes), for messages; at most `budget`
  /// characters.
  std::string str(TermId t, size_t budget = 120) const;
  size_t size() const { return headOf.size(); }
  /// Where two terms first differ: the outermost pair of subterms, reached through
  /// equal heads, whose heads (with their attributes and types) or arities differ;
  /// "" when the terms are equal.
  std::string difference(TermId a, TermId b) const;

  // What Pieces.cpp reads of a term.
  /// A term's operands: stable for the pool's life (they live in its allocator), so
  /// callers may keep them while the pool grows.
  llvm::ArrayRef<TermId> operands(TermId t) const { return args[t]; }
  /// The term's head: "ref.concat{dim = 1 : i64}:4x4xf32", "input x : 4x4xf32".
  const std::string &key(TermId t) const { return headTexts[headOf[t]]; }
  /// What a head says, as data: read once, when the head is first made, so that rules
  /// read a term's shape, a broadcast's dimensions or a stack's axes, never its text.
  struct HeadData {
    enum Kind : uint8_t {
      Input,       // a reference input (or an index value named as one)
      Op,          // an op's name, attributes and global shape (head())
      Scale,       // scale{c}: its operand times c (scaled())
      Broadcast,   // bcast{dims}: params are the result dims the source's read
      Stack,       // stack{e;d;A}: params are e, d, then the axes A
      GatherStack, // gstack{e;d;A}: params are e, d, then 2 a + (1 if a splits) per axis
      Other,
    } kind = Other;
    Shape shape; // the global shape (a scale's: none; shapeOf reads its operand's)
    std::vector<int64_t> params;
    std::string op;               // Op: the op's name ("ref.add")
    bool concat = false;          // Op: ref.concat, along params[0]
    bool constant = false;        // Input: an index constant, of value params[0]
  };
  const HeadData &headData(TermId t) const { return headInfo[headOf[t]]; }
  bool isLeaf(TermId t) const { return headData(t).kind == HeadData::Input; }
  bool kindIs(TermId t, HeadData::Kind k) const { return headData(t).kind == k; }
  /// A broadcast of one value to every element (bcast{}).
  bool uniformBroadcast(TermId t) const {
    return kindIs(t, HeadData::Broadcast) && headData(t).params.empty();
  }
  bool isConcat(TermId t) const { return headData(t).concat; }
  /// Whether t applies op OpTy (ref::AddOp, ...).
  template <typename OpTy> bool isOp(TermId t) const {
    return headData(t).op == OpTy::getOperationName();
  }
  /// t = bcast{dims}(source): true, with them.
  bool broadcastOf(TermId t, std::vector<int64_t> &dims, TermId &source) const {
    const HeadData &h = headData(t);
    if (h.kind != HeadData::Broadcast || args[t].size() != 1)
      return false;
    dims = h.params;
    source = args[t][0];
    return true;
  }
  /// Whether the term's head starts with `prefix` ("ref.concat{", "ref.add{", ...).
  bool headIs(TermId t, llvm::StringRef prefix) const {
    return llvm::StringRef(key(t)).starts_with(prefix);
  }
  /// The global shape of t, read from its head (a scale node's is its operand's).
  Shape shapeOf(TermId t) const;
  /// t = scale{c}(u): true, with c and u.
  bool scaleOf(TermId t, Rational &c, TermId &u) const;
  /// The op a node applies (its name and attribute dictionary, uniqued by MLIR), as
  /// the rules record it (setOp); false where none was recorded.
  void setOp(TermId t, mlir::OperationName name, mlir::DictionaryAttr attrs);
  bool opOf(TermId t, mlir::OperationName &name, mlir::DictionaryAttr &attrs) const;
  /// The recorded op's name ("" where none was recorded) and attributes.
  llvm::StringRef opNameOf(TermId t, mlir::DictionaryAttr &attrs) const;
  /// The layout factors (LayoutFactorsOpInterface) of a node's op (setOp's) applied
  /// to its operands, with each operand's place among the op's tensor operands (-1:
  /// an index value, such as an offset). Factors depend on the op, its attributes
  /// and its operands' ranks only: computed once per such signature, on a stand-in
  /// op of it.
  struct OpFactors {
    ref::LayoutFactors factors;
    std::vector<int> tensorOperand;
  };
  /// node() of an op on index values, marked an index value.
  TermId indexNode(const std::string &head, const std::vector<TermId> &operands) {
    TermId t = node(head, operands);
    indexTerms.insert(t);
    return t;
  }
  /// Whether `t` is an index value (not a tensor): a leaf of an "index" type, or
  /// made by indexNode.
  bool isIndex(TermId t) const { return indexTerms.count(t); }
  /// The factors of node `t`; null where it has no recorded op or the op declares
  /// none.
  const OpFactors *factorsOf(TermId t);

  /// headFrom(name, attrs, global), memoized by the identity of the op's name and
  /// attribute dictionary (MLIR uniques both, so within one context equal identities
  /// are equal values) and the shape: printing attributes was a fifth of a run.
  const std::string &head(mlir::OperationName name, mlir::DictionaryAttr attrs,
                          const Shape &global);

private:
  std::vector<std::string> appliedIdentities;
  struct HeadKey {
    const void *name, *attrs;
    Shape global;
    bool operator==(const HeadKey &o) const {
      return name == o.name && attrs == o.attrs && global == o.global;
    }
  };
  struct HeadHash {
    size_t operator()(const HeadKey &k) const;
  };
  std::unordered_map<HeadKey, std::string, HeadHash> heads;
  std::unordered_map<TermId, int64_t> bounds;
  mlir::MLIRContext *context = nullptr;
  TermId intern(const std::string &head, const std::string &shortHead,
                std::vector<TermId> operands);
  static HeadData readHead(llvm::StringRef text);
  /// `operands` with each one whose key starts with `prefix` replaced by its operands.
  std::vector<TermId> flatten(const std::string &prefix,
                              const std::vector<TermId> &operands) const;
  /// The weighted summands of factor `f` x term `t` into `out` (sum's normal form),
  /// through nested sums of the same `head`.
  void summands(const std::string &head, TermId t, const Rational &f,
                std::vector<std::pair<TermId, Rational>> &out) const;
  /// Heads by number (their text and the short name messages show), and terms by
  /// key (a head's number and the operands', as bytes).
  std::unordered_map<std::string, uint32_t> headIds;
  std::vector<std::string> headTexts, shortTexts;
  std::vector<HeadData> headInfo; // (by head number, as headTexts)
  /// A term by its key: its head's number and its operands (which the key points
  /// at: the candidate's while looking up, the pool's own once interned).
  struct Key {
    uint32_t head;
    llvm::ArrayRef<TermId> operands;
  };
  struct KeyInfo {
    static Key getEmptyKey() { return {~0u, {}}; }
    static Key getTombstoneKey() { return {~0u - 1, {}}; }
    static unsigned getHashValue(const Key &k) {
      return (unsigned)llvm::hash_combine(
          k.head, llvm::hash_combine_range(k.operands.begin(), k.operands.end()));
    }
    static bool isEqual(const Key &a, const Key &b) {
      return a.head == b.head && a.operands == b.operands;
    }
  };
  llvm::DenseMap<Key, TermId, KeyInfo> ids;
  llvm::DenseMap<TermId, Rational> scales; // scale{c}(u) nodes: their c
  struct Piece {
    TermId whole;
    int64_t start, length, extent;
  };
  llvm::DenseMap<TermId, Piece> pieces; // contractionPiece's
  /// `kept` (sorted by term, merged) with the pieces that cover their whole replaced by it.
  void joinPieces(std::vector<std::pair<TermId, Rational>> &kept) const;
  /// `kept` with the summands of one multilinear op that share an operand factored.
  void factorShared(std::vector<std::pair<TermId, Rational>> &kept);
  /// `kept` with the sums over pieces that tile a value joined into its sum.
  void joinSlicedSums(std::vector<std::pair<TermId, Rational>> &kept);
  llvm::DenseMap<const void *, bool> multilinearOps; // by op name, for factorShared
  /// factorsOf's: per signature (op name, attributes, operand and result ranks) an
  /// index into `factorTable` plus one (0: none), and per term the same (~0u: not
  /// computed yet).
  std::map<std::vector<const void *>, uint32_t> factorIds;
  std::deque<OpFactors> factorTable; // (stable: factorsOf's pointers stay valid)
  std::vector<uint32_t> factorsByTerm;
  llvm::DenseSet<TermId> indexTerms;
  /// setOp's, by term (null: none recorded): most terms have one.
  std::vector<std::pair<const void *, const void *>> ops;
  std::vector<uint32_t> headOf;
  std::vector<llvm::ArrayRef<TermId>> args; // into `storage`
  llvm::BumpPtrAllocator storage;
};

} // namespace planproof::layouts

#endif
