//===- PiecesInternal.h - the piece comparison's normalizer -------*- C++ -*-===//
//
// The class behind PieceComparison (LayoutState.h): Pieces.cpp has the rewriting of
// terms, PieceRules.cpp the identities by which ops distribute over pieces. Internal
// to lib/LayoutEngine.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_PIECESINTERNAL_H
#define PLANPROOF_LAYOUTENGINE_PIECESINTERNAL_H

#include "LayoutEngine/LayoutState.h"

#include <set>
#include <tuple>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OperationSupport.h"

#include <map>
#include <set>
#include <unordered_map>

namespace planproof::layouts {

using Weighted = std::pair<TermId, Rational>;

class PieceComparison::Normalizer {
public:
  Normalizer(TermPool &terms, mlir::MLIRContext *ctx, const Deadline &deadline)
      : terms(terms), ctx(ctx), deadline(deadline) {}

  /// Records the cuts of every slice of an input reachable from t (requestCut).
  void collect(TermId t);
  /// Cuts value t along d at [from, to): an input or a random draw there, a value
  /// computed row by row through the operands its rows read (Pieces.cpp).
  void requestCut(TermId t, int d, int64_t from, int64_t to);
  /// Keeps the inputs cut along exactly one dimension; false when none is.
  bool settle();
  Weighted norm(TermId t);
  Weighted normUncached(TermId t);
  /// The rules (one bit each, Rule) that the normalizations since `used` was cleared
  /// applied, and their names.
  enum Rule : uint32_t {
    PassThrough = 1, Counted = 2, Sum = 4, Mean = 8, Max = 16, Reshape = 32, Slice = 64,
    CausalOffset = 128,
  };
  uint32_t used = 0;
  std::vector<std::string> usedRules() const;
  Weighted normSum(TermId t);
  Weighted normBroadcast(TermId t);
  Weighted normOp(TermId t);
  bool exhausted() const { return made > kMaxNodes || tooDeep; }
  bool tooDeep = false;
  /// The first `count` elements along `dim` of normalized x: its leading pieces when x
  /// is a concatenation along dim whose pieces end exactly there; false otherwise.
  bool prefix(const Weighted &x, int dim, int64_t count, Weighted &out);
  bool sliceOfConcat(TermId input, const std::vector<int64_t> &offsets,
                     const std::vector<int64_t> &sizes, Weighted &out);
  /// The given operands' pieces (concatenations along `dim`) cut at the union of their
  /// boundaries, so that they line up: a piece spanning several boundaries must be a
  /// splat (the same value anywhere, cut as needed); false when one is not, or the
  /// extents differ.
  bool align(std::vector<std::vector<Weighted>*> parts, int dim);
  /// The same, each operand's pieces along its own dimension.
  bool align(const std::vector<std::pair<std::vector<Weighted> *, int>> &parts);
  /// The dimension along which every one of `xs` is a concatenation, with pieces of
  /// the same extents there (a broadcast copying along it cut to them, boundaries
  /// aligned): their pieces (factors as piecesOf gives them) into `parts`; -1 where
  /// there is none.
  int pieceAlike(const std::vector<Weighted> &xs, std::vector<std::vector<Weighted>> &parts);
  /// A concatenation along `dim` of operands pieced alike along another dimension, as
  /// the concatenation of the pieces' concatenations; false where they are not.
  bool swapConcat(int dim, const Shape &shape, const std::vector<Weighted> &operands, Weighted &out);
  /// A broadcast's source dimensions and source; false if t is none.
  /// A broadcast that copies along `dim` (no source dimension there), cut there as
  /// `like`'s pieces are: the same broadcast at each piece's extent. False otherwise.
  bool cutCopies(TermId t, int dim, const std::vector<Weighted> &like, std::vector<Weighted> &out);
  /// t's first `len` elements along `dim`, where t is the same at every index along it
  /// (copies there, scaled, and elementwise ops of such values): true, with them.
  bool cutUniform(TermId t, int dim, int64_t len, TermId &out);

private:
  static constexpr size_t kMaxNodes = 1 << 20;
  /// Deepest recursion through a term (the rewriting is recursive): past it the
  /// comparison gives up, so that the stack stays bounded.
  static constexpr int kMaxDepth = 4000;
  int depth = 0;
  struct Deeper {
    int &d;
    explicit Deeper(int &d) : d(++d) {}
    ~Deeper() { --d; }
  };
  std::set<std::tuple<TermId, int, int64_t, int64_t>> requested; // requestCut's
  struct Cut {
    int dim = -1;
    bool bad = false; // cut along two dimensions
    std::set<int64_t> at;
  };

  /// The one dimension `offsets`/`sizes` cut of `whole`, or -1 (none or several).
  static int cutDim(const Shape &whole, llvm::ArrayRef<int64_t> offsets, llvm::ArrayRef<int64_t> sizes) {
    int dim = -1;
    for (size_t d = 0; d < whole.size() && d < sizes.size(); ++d)
      if (offsets[d] != 0 || sizes[d] != whole[d]) {
        if (dim >= 0)
          return -2;
        dim = (int)d;
      }
    return dim;
  }
  /// A value cut into pieces where slices of it are taken: an input, or a random draw
  /// (its operands are its stream's key and counter; any value is the concatenation
  /// of its slices, and a draw has no tensor operand to distribute over).
  bool cuttable(TermId t) const {
    return terms.isLeaf(t) || terms.isOp<ref::DropoutMaskOp>(t);
  }
  bool sliceOf(TermId t, TermId &input, std::vector<int64_t> &offsets,
               std::vector<int64_t> &sizes) const;
  TermId slice(TermId input, const Shape &whole, int dim, int64_t from, int64_t to);
  TermId concat(int dim, const Shape &shape, const std::vector<Weighted> &pieces, Rational &f);
  /// The pieces of a concatenation (its dim, each piece's term and factor); false if t
  /// is none.
  bool piecesOf(TermId t, int &dim, std::vector<Weighted> &pieces) const;
  Weighted rebuild(mlir::OperationName name, mlir::DictionaryAttr attrs, const Shape &shape,
                   const std::vector<Weighted> &in);
  bool distribute(const TermPool::OpFactors *factors, mlir::OperationName name,
                  mlir::DictionaryAttr attrs, const Shape &shape,
                  const std::vector<Weighted> &in, Weighted &out);
  /// An op's normalized operands as pieces (a concatenation each, or whole: dims -1).
  struct Operands {
    TermPool &terms;
    mlir::OperationName name;
    mlir::DictionaryAttr attrs;
    llvm::StringRef op;
    const Shape &shape;
    const std::vector<Weighted> &in;
    std::vector<int> dims;
    std::vector<std::vector<Weighted>> parts;
    /// Fills dims and parts (splats cut like the pieced operands); false if none is.
    bool piece(Normalizer &n);
    /// Operands i and j pieced alike: the same dimension, the same pieces' extents.
    bool alike(size_t i, size_t j) const;
    /// The shape of piece k of the result, which follows operand `from`'s pieces along
    /// its result dimension `resultDim`.
    Shape pieceShape(size_t k, size_t from, int resultDim) const;
  };
  /// The op's layout factors distributed over the pieces of one factor (the
  /// identities of the factor kinds).
  bool distributeFactors(const TermPool::OpFactors &of, Operands &o, Weighted &out);
  bool distributeReshape(Operands &o, Weighted &out);
  bool distributeSlice(Operands &o, Weighted &out);
  bool distributeCausalSoftmax(Operands &o, Weighted &out);
  static int64_t elements(const Shape &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  }
  Weighted sumOf(const Shape &shape, const std::vector<Weighted> &summands);

  TermPool &terms;
  mlir::MLIRContext *ctx;
  const Deadline &deadline;
  std::map<TermId, Cut> cuts;
  std::unordered_map<TermId, Weighted> memo;
  std::unordered_map<TermId, uint32_t> usedBy; // the rules under each memoized term
  std::set<TermId> seen;
  size_t made = 0;
};

} // namespace planproof::layouts

#endif
