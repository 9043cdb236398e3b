//===- Windows.cpp - rows chosen per rank: zigzag chunks, query chunks, zeros ---===//
//
// Context parallelism holds a sequence in zigzag order (rank p of n: chunks p and
// 2n-1-p of 2n), slices each rank's block into its two query chunks, gives
// `causal_softmax` each chunk's global start, concatenates the chunks back, and in
// the backward pass pads each chunk's gradient with zeros and adds the two. A
// dimension laid out that way is described by windows (State, DimSplit): each rank's
// block is a list of runs of the *reference's* rows, each starting at a linear
// function of the rank's coordinates, or of zeros. The term stays the reference's
// whole value; only which rows a rank holds changes. docs/layout-engine.md, "Windows",
// states each rule and why it holds.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/Bindings.h"

#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

/// Positions enumerated where a rule needs every rank's rows (coverage of a
/// contraction): the product of the degrees of one dimension's axes.
constexpr int64_t kMaxPositions = int64_t(1) << 16;

bool hasZero(const DimSplit &d) {
  for (const Window &w : d.windows)
    if (w.zero)
      return true;
  return false;
}

bool hasZero(const State &s) {
  for (const DimSplit &d : s.split)
    if (hasZero(d))
      return true;
  return false;
}

/// The windows of d: its own, the plain blocks of its axes, or the whole dimension.
std::vector<Window> windowsOf(const Mesh &mesh, const DimSplit &d, int64_t global) {
  if (!d.windows.empty())
    return d.windows;
  if (!d.empty())
    return plainWindows(mesh, d, global);
  Window w;
  w.length = global;
  return {w};
}

/// Every rank's rows of d's data windows, [start, end), sorted; false where d's axes
/// have more than kMaxPositions positions.
static bool rowsHeld(const Mesh &mesh, const DimSplit &d, int64_t global,
              std::vector<std::pair<int64_t, int64_t>> &rows) {
  std::vector<int> axes(d.begin(), d.end());
  int64_t count = 1;
  for (int a : axes)
    if ((count *= mesh.shape[a]) > kMaxPositions)
      return false;
  std::vector<Window> ws = windowsOf(mesh, d, global);
  std::vector<int64_t> pos(axes.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t r = i;
    for (size_t k = axes.size(); k-- > 0;) {
      pos[k] = r % mesh.shape[axes[k]];
      r /= mesh.shape[axes[k]];
    }
    for (const Window &w : ws) {
      if (w.zero)
        continue;
      int64_t start = w.base;
      for (auto [a, cf] : w.coeff)
        start += cf * pos[std::find(axes.begin(), axes.end(), a) - axes.begin()];
      rows.push_back({start, start + w.length});
    }
  }
  std::sort(rows.begin(), rows.end());
  return true;
}

/// Whether the ranks of d's axes hold each row of [0, global) exactly once (so a sum
/// over their blocks is a sum over the dimension).
bool tiles(const Mesh &mesh, const DimSplit &d, int64_t global) {
  if (d.windows.empty())
    return true;
  std::vector<std::pair<int64_t, int64_t>> rows;
  if (!rowsHeld(mesh, d, global, rows))
    return false;
  int64_t at = 0;
  for (auto [s, e] : rows) {
    if (s != at)
      return false;
    at = e;
  }
  return at == global;
}

/// The rows the ranks of d's axes hold, as disjoint ranges (merged where adjacent);
/// false where two ranks hold one row.
static bool disjointRows(const Mesh &mesh, const DimSplit &d, int64_t global,
                  std::vector<std::pair<int64_t, int64_t>> &ranges) {
  std::vector<std::pair<int64_t, int64_t>> rows;
  if (!rowsHeld(mesh, d, global, rows))
    return false;
  for (auto [s, e] : rows) {
    if (!ranges.empty() && s < ranges.back().second)
      return false;
    if (!ranges.empty() && s == ranges.back().second)
      ranges.back().second = e;
    else
      ranges.push_back({s, e});
  }
  return true;
}

/// The constant an index value holds on every rank apart from its rank part.
bool indexConstant(const TermPool &terms, const State &s, int64_t &v) {
  if (s.isConst) {
    v = s.constValue;
    return true;
  }
  return constantLeaf(terms, s.term, v);
}

State freshResult(const State &from) {
  State s = from;
  s.broadcast = false;
  s.sourceDims.clear();
  return s;
}

namespace {

/// A slice of a value laid out in windows: on a windowed dimension the local range
/// takes parts of the windows (the same rows of the same term); an unsplit dimension
/// cut slices the term; a split dimension must be taken whole.
State windowSlice(RuleContext &c, Operation &op, const State &x) {
  auto slice = cast<ref::SliceOp>(op);
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`ref.slice` does not have one tensor result");
  if (!x.partialMax.empty())
    return State::unknown(&op, "the operand is each rank's maximum of its block over " +
                                   axesText(c.mesh, x.partialMax));
  auto inLocal = cast<RankedTensorType>(slice.getInput().getType()).getShape();
  ArrayRef<int64_t> off = slice.getOffsets(), size = slice.getSizes();
  size_t rank = x.global.size();
  if (x.split.size() != rank || off.size() != rank || size.size() != rank)
    return State::unknown(&op, "the slice's rank does not match its operand's layout");
  // Where no windowed dimension is cut, the windows pass through as they are: the
  // slice rule of split values (Slices.cpp; its pieces take windowed dimensions whole).
  bool windowCut = false;
  for (size_t d = 0; d < rank; ++d)
    windowCut |= !(off[d] == 0 && size[d] == inLocal[d]) && !x.split[d].windows.empty();
  if (!windowCut)
    return sliceRule(c, op, x);
  State out = freshResult(x);
  std::vector<int64_t> termOff(rank, 0), termSize(x.global.begin(), x.global.end());
  bool termCut = false;
  for (size_t d = 0; d < rank; ++d) {
    if (off[d] == 0 && size[d] == inLocal[d])
      continue;
    DimSplit &dd = out.split[d];
    if (dd.windows.empty() && !dd.empty())
      return State::unknown(&op, "no layout rule for a slice of split dimension " +
                                     std::to_string(d) + " of a value laid out in windows (" +
                                     c.show(x) + ")");
    if (dd.windows.empty()) { // unsplit: the term's rows
      termOff[d] = off[d];
      termSize[d] = size[d];
      out.global[d] = size[d];
      termCut = true;
      continue;
    }
    dd.windows = cutWindows(dd.windows, off[d], off[d] + size[d]);
    normalizeWindows(c.mesh, dd, out.global[d]);
  }
  if (termCut)
    out.term = sliceTerm(c.terms, op.getContext(), x.term, x.global, termOff, termSize);
  else
    for (size_t d = 0; d < rank; ++d) // a piece of stacked pieces (Stacks.cpp)
      if (!(off[d] == 0 && size[d] == inLocal[d]))
        narrowToPiece(c, out, (int64_t)d);
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// Whether s is zero whatever its term (a factor of zero).
bool isZero(const State &s) { return s.known && s.factor.isZero(); }

/// A concatenation along d of runs of one value (its windows, in order) and of zeros
/// (the adjoint of a slice pads a chunk's gradient): each rank's block is those runs,
/// one after the other. A concatenation of different values without zeros is the
/// generic rule's (`generic`: Splits.cpp's concatSplit takes windowed operands).
State windowConcat(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                   const std::function<State(const std::vector<const State *> &)> &generic) {
  int64_t dim = cast<ref::ConcatOp>(op).getDim();
  Shape local;
  if (!resultShape(op, local) || dim < 0 || dim >= (int64_t)local.size())
    return State::unknown(&op, "`ref.concat` does not have one tensor result");
  const State *lead = nullptr;
  unsigned leadIndex = 0;
  for (unsigned i = 0; i < in.size() && !lead; ++i)
    if (!isZero(*in[i]))
      lead = in[leadIndex = i];
  if (!lead)
    return State::unknown(&op, "a concatenation of zeros laid out in windows");
  std::vector<Window> ws;
  for (unsigned i = 0; i < in.size(); ++i) {
    const State &s = *in[i];
    if (isZero(s) && !hasZero(s) && s.broadcast && s.sourceDims.empty()) {
      Window z;
      z.zero = true;
      z.length = cast<RankedTensorType>(op.getOperand(i).getType()).getDimSize(dim);
      ws.push_back(z);
      continue;
    }
    bool alike = s.term == lead->term && s.factor == lead->factor &&
                 s.partial == lead->partial && s.partialMax.empty() && s.global == lead->global &&
                 static_cast<const std::vector<int> &>(s.split[dim]) ==
                     static_cast<const std::vector<int> &>(lead->split[dim]);
    for (size_t d = 0; alike && d < s.split.size(); ++d)
      alike = (int64_t)d == dim || s.split[d] == lead->split[d];
    // (Different values with no zeros among them: the concatenation of those values,
    // each rank's blocks of each -- windows or plain -- one after the other: Splits.cpp.)
    bool zeros = false;
    for (const State *t : in)
      zeros |= isZero(*t) || hasZero(*t);
    if (!alike && !zeros)
      return generic(in);
    if (!alike)
      return State::unknown(&op, "a concatenation of other values than runs of one value and "
                                 "zeros, laid out in windows (operand #" + std::to_string(i) +
                                 " is " + c.show(s) + ", operand #" +
                                 std::to_string(leadIndex) + " " + c.show(*lead) + ")");
    auto own = windowsOf(c.mesh, s.split[dim], s.global[dim]);
    ws.insert(ws.end(), own.begin(), own.end());
  }
  State out = freshResult(*lead);
  out.split[dim].windows = ws;
  normalizeWindows(c.mesh, out.split[dim], out.global[dim]);
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// Runs of one value and zeros added to complementary ones (the two chunks' padded
/// gradients): where one operand holds zeros the sum holds the other's rows.
State zeroMerge(RuleContext &c, Operation &op, const State &x, const State &y) {
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`ref.add` does not have one tensor result");
  auto fail = [&](const std::string &why) {
    return State::unknown(&op, "a sum of values laid out in windows " + why + " (" + c.show(x) +
                                   " and " + c.show(y) + ")");
  };
  if (x.term != y.term || x.factor != y.factor || x.partial != y.partial ||
      !x.partialMax.empty() || !y.partialMax.empty() || x.global != y.global ||
      x.split.size() != y.split.size())
    return fail("that are not runs of one value");
  int dim = -1;
  for (size_t d = 0; d < x.split.size(); ++d)
    if (x.split[d] != y.split[d]) {
      if (dim >= 0)
        return fail("in two dimensions");
      dim = (int)d;
    }
  if (dim < 0)
    return fail("alike");
  auto a = windowsOf(c.mesh, x.split[dim], x.global[dim]);
  auto b = windowsOf(c.mesh, y.split[dim], y.global[dim]);
  std::vector<Window> ws;
  size_t i = 0, j = 0;
  int64_t ai = 0, bj = 0, at = 0; // where a[i] and b[j] start; where the sum is
  while (i < a.size() && j < b.size()) {
    int64_t end = std::min(ai + a[i].length, bj + b[j].length);
    const Window &pa = a[i], &pb = b[j];
    if (!pa.zero && !pb.zero)
      return fail("that both hold rows of the value at one place");
    Window w = pa.zero ? pb : pa;
    int64_t start = pa.zero ? bj : ai;
    w.length = end - at;
    if (!w.zero)
      w.base += at - start;
    ws.push_back(w);
    at = end;
    if (ai + a[i].length == end)
      ai += a[i++].length;
    if (bj + b[j].length == end)
      bj += b[j++].length;
  }
  if (i != a.size() || j != b.size())
    return fail("of different lengths");
  State out = freshResult(x);
  DimSplit &dd = out.split[dim];
  if (dd.empty())
    static_cast<std::vector<int> &>(dd) = y.split[dim];
  else if (!y.split[dim].empty() &&
           static_cast<const std::vector<int> &>(y.split[dim]) !=
               static_cast<const std::vector<int> &>(dd))
    return fail("over different axes");
  dd.windows = ws;
  normalizeWindows(c.mesh, dd, out.global[dim]);
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// matmul or batch_matmul over a contracted dimension whose windows do not tile it
/// (each rank's query chunk): summed over the ranks of its axes, the products cover
/// the rows the ranks hold, each once -- the sum over those ranges of the products of
/// the operands' slices. Recorded as pieces of the whole product (TermPool::sum puts
/// pieces that tile the dimension back together: the two chunks' key gradients).
State restrictedContraction(RuleContext &c, Operation &op, const State &a, const State &b,
                            int64_t ld, int64_t rd) {
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`" + opName(op) + "` does not have one tensor result");
  if (!a.partial.empty() || !b.partial.empty() || !a.partialMax.empty() || !b.partialMax.empty() ||
      hasZero(a) || hasZero(b))
    return State::unknown(&op, "a contraction over chunks of rows of partial values or zeros");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (a.global[ld] != b.global[rd] || !disjointRows(c.mesh, a.split[ld], a.global[ld], ranges))
    return State::unknown(&op, "it contracts rows that two ranks both hold (" + c.show(a) + ")");
  State pa = a, pb = b;
  pa.split[ld].windows.clear();
  pb.split[rd].windows.clear();
  SplitResult sr = splitRule(c, op, {&pa, &pb}, local);
  if (!sr.why.empty())
    return State::unknown(&op, sr.why);
  const std::string &head = c.terms.head(op.getName(), op.getAttrDictionary(), sr.global);
  TermId whole = c.terms.node(head, {a.term, b.term});
  c.terms.setOp(whole, op.getName(), op.getAttrDictionary());
  std::vector<std::pair<TermId, Rational>> pieces;
  for (auto [s, e] : ranges) {
    std::vector<int64_t> ao(a.global.size(), 0), as(a.global.begin(), a.global.end());
    std::vector<int64_t> bo(b.global.size(), 0), bs(b.global.begin(), b.global.end());
    ao[ld] = bo[rd] = s;
    as[ld] = bs[rd] = e - s;
    TermId piece = c.terms.node(head, {sliceTerm(c.terms, op.getContext(), a.term, a.global, ao, as),
                                       sliceTerm(c.terms, op.getContext(), b.term, b.global, bo, bs)});
    c.terms.setOp(piece, op.getName(), op.getAttrDictionary());
    c.terms.contractionPiece(piece, whole, s, e - s, a.global[ld]);
    pieces.push_back({piece, Rational(1)});
  }
  State out;
  out.known = true;
  out.split = sr.split;
  out.global = sr.global;
  out.partial = sortedUnion({}, sr.contracted);
  auto [t, f] = pieces.size() == 1
                    ? pieces[0]
                    : c.terms.sum(c.terms.head(OperationName(ref::AddOp::getOperationName(),
                                                             op.getContext()),
                                               DictionaryAttr::get(op.getContext()), sr.global),
                                  pieces);
  out.term = t;
  out.factor = f * a.factor * b.factor;
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// A reshape of zigzag dimensions. The plain rule (Splits.cpp) places the axes of each
/// group; with the group's last axis z zigzag, a rank holds, of the block over the
/// group's other axes (one consecutive range of the flattened group, as the plain rule
/// requires), chunks p and 2n-1-p. The output dimension e that takes z holds that block
/// as e's block over its other axes times the whole dimensions after e, so the chunks
/// are e's zigzag chunks when e's block divides into 2n of them.
State windowReshape(RuleContext &c, Operation &op, const State &x,
                    const std::function<State(const std::vector<const State *> &)> &generic) {
  State plain = x;
  std::vector<size_t> zig;
  for (size_t d = 0; d < x.split.size(); ++d) {
    if (x.split[d].windows.empty())
      continue;
    // Windows of a merge (a batch and a split head) stay: the reshape's split rule
    // splits them again into the merged dimensions (Splits.cpp, unmergedSplits).
    if (x.split[d].windows != zigzagWindows(c.mesh, x.split[d], x.global[d]))
      continue;
    plain.split[d].windows.clear();
    zig.push_back(d);
  }
  State r = generic({&plain});
  if (!r.known)
    return r;
  std::vector<DimGroup> groups;
  if (!dimGroups(x.global, r.global, groups))
    return State::unknown(&op, "the reshape's dimensions do not fall into groups");
  for (size_t d : zig) {
    int z = x.split[d].back();
    const DimGroup *g = nullptr;
    for (const DimGroup &h : groups)
      if (d >= h.i0 && d < h.i1)
        g = &h;
    bool ok = g != nullptr;
    for (size_t k = d + 1; ok && k < g->i1; ++k)
      ok = x.split[k].empty();
    size_t e = g ? g->j1 : 0;
    for (size_t k = g ? g->j0 : 0; ok && k < g->j1; ++k)
      if (std::find(r.split[k].begin(), r.split[k].end(), z) != r.split[k].end())
        e = k;
    ok = ok && e < g->j1 && r.split[e].back() == z;
    for (size_t k = e + 1; ok && k < g->j1; ++k)
      ok = r.split[k].empty();
    std::vector<Window> ws;
    if (ok)
      ws = zigzagWindows(c.mesh, r.split[e], r.global[e]);
    if (ws.empty())
      return State::unknown(&op, "a reshape that moves the zigzag axis " + c.mesh.axes[z] +
                                     " of dimension " + std::to_string(d) +
                                     " where its chunks are not an output dimension's "
                                     "zigzag chunks (" + c.show(x) + ")");
    r.split[e].windows = ws;
  }
  return r;
}

} // namespace

std::vector<Window> plainWindows(const Mesh &mesh, const std::vector<int> &axes, int64_t global) {
  int64_t n = 1;
  for (int a : axes)
    n *= mesh.shape[a];
  if (n <= 0 || global % n != 0)
    return {};
  Window w;
  w.length = global / n;
  int64_t stride = w.length;
  for (size_t k = axes.size(); k-- > 0;) {
    w.coeff.push_back({axes[k], stride});
    stride *= mesh.shape[axes[k]];
  }
  std::sort(w.coeff.begin(), w.coeff.end());
  return {w};
}

std::vector<Window> zigzagWindows(const Mesh &mesh, const std::vector<int> &axes, int64_t global) {
  if (axes.empty())
    return {};
  int z = axes.back();
  int64_t n = mesh.shape[z], outer = 1;
  for (size_t k = 0; k + 1 < axes.size(); ++k)
    outer *= mesh.shape[axes[k]];
  if (n <= 1 || global % outer != 0 || (global / outer) % (2 * n) != 0)
    return {};
  int64_t block = global / outer, chunk = block / (2 * n);
  Window w0, w1;
  w0.length = w1.length = chunk;
  int64_t stride = block;
  for (size_t k = axes.size() - 1; k-- > 0;) {
    w0.coeff.push_back({axes[k], stride});
    stride *= mesh.shape[axes[k]];
  }
  w1.coeff = w0.coeff;
  w0.coeff.push_back({z, chunk});
  w1.coeff.push_back({z, -chunk});
  w1.base = (2 * n - 1) * chunk;
  std::sort(w0.coeff.begin(), w0.coeff.end());
  std::sort(w1.coeff.begin(), w1.coeff.end());
  return {w0, w1};
}

bool layoutDim(const Mesh &mesh, const Layout &l, size_t d, int64_t global, DimSplit &out,
               std::string &why) {
  out = DimSplit();
  for (int a : l.dims[d])
    if (mesh.shape[a] > 1)
      out.push_back(a);
  if (l.segmentsOf(d) != 1 && !l.zigzagAt(d)) {
    why = "interleaved layouts are not modelled by the layout engine yet";
    return false;
  }
  if (!l.zigzagAt(d) || l.dims[d].empty() || mesh.shape[l.dims[d].back()] <= 1)
    return true; // a zigzag over one rank is the plain block
  out.windows = zigzagWindows(mesh, out, global);
  if (out.windows.empty()) {
    why = "a zigzag split whose blocks do not divide into chunks";
    return false;
  }
  return true;
}

void normalizeWindows(const Mesh &mesh, DimSplit &d, int64_t global) {
  if (d.windows.empty())
    return;
  std::vector<Window> merged;
  for (const Window &w : d.windows) {
    if (w.length == 0)
      continue;
    if (!merged.empty()) {
      Window &p = merged.back();
      if (p.zero && w.zero) {
        p.length += w.length;
        continue;
      }
      if (!p.zero && !w.zero && p.coeff == w.coeff && p.base + p.length == w.base) {
        p.length += w.length;
        continue;
      }
    }
    merged.push_back(w);
  }
  d.windows = merged;
  // The axes: those the windows name, in d's order.
  std::vector<int> named;
  for (const Window &w : d.windows)
    for (auto [a, cf] : w.coeff)
      if (std::find(named.begin(), named.end(), a) == named.end())
        named.push_back(a);
  std::vector<int> axes;
  for (int a : d)
    if (std::find(named.begin(), named.end(), a) != named.end())
      axes.push_back(a);
  for (int a : named)
    if (std::find(axes.begin(), axes.end(), a) == axes.end())
      axes.push_back(a);
  static_cast<std::vector<int> &>(d) = axes;
  if (d.windows == plainWindows(mesh, axes, global) ||
      (axes.empty() && d.windows.size() == 1 && !d.windows[0].zero && d.windows[0].base == 0 &&
       d.windows[0].length == global))
    d.windows.clear();
}

bool windowReach(const Mesh &mesh, const Window &w, int64_t &lo, int64_t &hi) {
  lo = w.base;
  if (!checkedAdd(w.base, w.length, hi))
    return false;
  for (auto [a, cf] : w.coeff) {
    int64_t span = 0;
    int64_t &end = cf < 0 ? lo : hi;
    if (!checkedMul(cf, mesh.shape[a] - 1, span) || !checkedAdd(end, span, end))
      return false;
  }
  return true;
}

bool windowsFit(const Mesh &mesh, const DimSplit &d, int64_t global, int64_t local,
                std::string &why) {
  int64_t total = 0;
  for (const Window &w : d.windows) {
    if (w.length <= 0 || !checkedAdd(total, w.length, total)) {
      why = "a window of no rows";
      return false;
    }
    if (w.zero)
      continue;
    for (auto [a, cf] : w.coeff)
      if (std::find(d.begin(), d.end(), a) == d.end()) {
        why = "a window that moves with an axis its dimension is not laid out over";
        return false;
      }
    int64_t lo = 0, hi = 0;
    if (!windowReach(mesh, w, lo, hi)) {
      why = "a window position that overflows";
      return false;
    }
    if (lo < 0 || hi > global) {
      why = "a window of rows outside the value's " + std::to_string(global) + " rows";
      return false;
    }
  }
  if (total != local) {
    why = "the windows hold " + std::to_string(total) + " rows, the local dimension " +
          std::to_string(local);
    return false;
  }
  return true;
}

std::string windowsText(const Mesh &mesh, const DimSplit &d, int64_t global) {
  std::string axes = d.size() == 1 ? mesh.axes[d[0]] : axesText(mesh, d);
  if (d.windows == zigzagWindows(mesh, d, global))
    return axes + " zigzag";
  std::string out = axes.empty() || d.empty() ? "rows{" : axes + " rows{";
  for (size_t i = 0; i < d.windows.size(); ++i) {
    const Window &w = d.windows[i];
    out += i ? "; " : "";
    out += std::to_string(w.length) + (w.zero ? " zeros" : " from " + std::to_string(w.base));
    if (!w.zero)
      for (auto [a, cf] : w.coeff)
        out += (cf < 0 ? " - " : " + ") + std::to_string(cf < 0 ? -cf : cf) + "*" + mesh.axes[a];
  }
  return out + "}";
}

/// Dimensions of `s` held in one window that is the plain blocks of a run [b, b + W) of
/// the rows (a microbatch of a batch whose blocks an all_to_all exchanged): described
/// instead as the blocks of the term's slice there -- the same rows of the same value.
/// Whether any dimension was so described.
bool runsAsSlices(RuleContext &c, Operation &op, State &s) {
  if (!s.known || s.broadcast || !s.partialMax.empty())
    return false;
  size_t rank = s.global.size();
  std::vector<int64_t> off(rank, 0), size(s.global.begin(), s.global.end());
  bool cut = false;
  for (size_t d = 0; d < rank; ++d) {
    DimSplit &dd = s.split[d];
    if (dd.windows.size() != 1 || dd.windows[0].zero)
      continue;
    Window w = dd.windows[0];
    int64_t b = w.base, W = w.length * c.mesh.groupSize(dd);
    w.base = 0;
    if (plainWindows(c.mesh, dd, W) != std::vector<Window>{w} || b + W > s.global[d])
      continue;
    dd.windows.clear();
    off[d] = b;
    size[d] = W;
    cut = true;
  }
  if (!cut)
    return false;
  s.term = sliceTerm(c.terms, op.getContext(), s.term, s.global, off, size);
  s.global = size;
  return true;
}

static State windowRuleOnce(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                            const std::function<State(const std::vector<const State *> &)> &generic);

State windowRule(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                 const std::function<State(const std::vector<const State *> &)> &generic) {
  State out = windowRuleOnce(c, op, in, generic);
  if (out.known || isa<ref::SliceOp, ref::ConcatOp>(op))
    return out;
  // No rule takes these windows: operands whose windows are runs' blocks, described as
  // slices of their terms, may meet the rules of plain blocks.
  std::vector<State> conv;
  bool any = false, windows = false;
  for (const State *s : in) {
    conv.push_back(*s);
    any |= runsAsSlices(c, op, conv.back());
    windows |= conv.back().windowed();
  }
  auto retry = [&](bool windowed) {
    std::vector<const State *> ptrs;
    for (const State &s : conv)
      ptrs.push_back(&s);
    return windowed ? windowRuleOnce(c, op, ptrs, generic) : generic(ptrs);
  };
  if (any)
    if (State again = retry(windows); again.known)
      return again;
  // Or windows of the rows a partner holds in plain blocks, read as those blocks.
  if (!windowsAsPartners(c, op, in, conv))
    return out;
  State again = retry(false);
  return again.known ? again : out;
}

static State windowRuleOnce(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                            const std::function<State(const std::vector<const State *> &)> &generic) {
  if (auto cs = dyn_cast<ref::CausalSoftmaxOp>(op); cs && cs.getOffset())
    return causalOffsetRule(c, op, in);
  if (isa<ref::PositionMaskOp>(op))
    return positionMaskRule(c, op, in);
  if (isa<ref::EmbeddingOp, ref::EmbeddingGradOp>(op)) {
    for (const State *s : in)
      if (!s->known)
        return *s;
    if (in.size() != 3)
      return State::unknown(&op, "no layout rule for `" + opName(op) + "` on a split table");
    return isa<ref::EmbeddingOp>(op) ? embeddingRule(c, op, in) : embeddingGradRule(c, op, in);
  }
  if (isa<ref::OneHotOp>(op) && in.size() == 2) {
    for (const State *s : in)
      if (!s->known)
        return *s;
    return oneHotRule(c, op, in);
  }
  for (const State *s : in)
    if (!s->known)
      return *s;
  if (isa<ref::SliceOp>(op))
    return windowSlice(c, op, *in[0]);
  if (isa<ref::ConcatOp>(op))
    return windowConcat(c, op, in, generic);
  bool zeros = false;
  for (const State *s : in)
    zeros |= hasZero(*s);
  if (zeros) {
    // Rows of zeros go only where the zeros stay zeros: through a scale, a detach or a
    // transpose, into a sum alike (0 + 0), or into the sum with the complementary
    // runs.
    if (isa<ref::AddOp>(op) && in.size() == 2 && in[0]->split != in[1]->split)
      return zeroMerge(c, op, *in[0], *in[1]);
    bool alike = true; // (no operand then takes another's split: Rules.cpp, refOpRule)
    for (const State *s : in)
      alike &= s->split == in[0]->split;
    if (!isa<ref::ScaleOp, ref::DetachOp, ref::TransposeOp>(op) &&
        !(isa<ref::AddOp, ref::SubOp>(op) && alike))
      return State::unknown(&op, "no layout rule for `" + opName(op) +
                                     "` on rows of zeros laid out in windows");
    return generic(in);
  }
  // Contractions and reductions over windowed dimensions: the ranks' windows must
  // hold each row once (a matmul over chunks: the products of the rows held).
  auto tiled = [&](const State &s, int64_t d) {
    return s.split[d].windows.empty() || tiles(c.mesh, s.split[d], s.global[d]);
  };
  auto contraction = [&](int64_t ld, int64_t rd) -> std::optional<State> {
    const State &a = *in[0], &b = *in[1];
    if (a.split[ld].windows.empty() && b.split[rd].windows.empty())
      return std::nullopt;
    if (a.split[ld] != b.split[rd])
      return State::unknown(&op, "it contracts dimensions laid out differently (" + c.show(a) +
                                     " and " + c.show(b) + ")");
    if (tiled(a, ld))
      return std::nullopt;
    return restrictedContraction(c, op, a, b, ld, rd);
  };
  if (auto m = dyn_cast<ref::MatmulOp>(op)) {
    if (auto s = contraction(m.getLhsDim(), m.getRhsDim()))
      return *s;
    return generic(in);
  }
  if (auto m = dyn_cast<ref::BatchMatmulOp>(op)) {
    if (auto s = contraction(m.getLhsDim(), m.getRhsDim()))
      return *s;
    return generic(in);
  }
  auto reduced = [&](ArrayRef<int64_t> dims) {
    for (int64_t d : dims)
      if (d >= 0 && d < (int64_t)in[0]->split.size() && !tiled(*in[0], d))
        return State::unknown(&op, "it reduces dimension " + std::to_string(d) +
                                       ", whose rows the ranks do not hold once each (" +
                                       c.show(*in[0]) + ")");
    return generic(in);
  };
  if (auto r = dyn_cast<ref::ReduceSumOp>(op))
    return reduced(r.getDims());
  if (auto r = dyn_cast<ref::ReduceMeanOp>(op))
    return reduced(r.getDims());
  if (auto r = dyn_cast<ref::ReduceMaxOp>(op))
    return reduced(r.getDims());
  if (isa<ref::CrossEntropySumOp>(op) || isa<ref::EmbeddingGradOp>(op))
    return reduced({0}); // the tokens are summed
  if (isa<ref::ReshapeOp>(op))
    return windowReshape(c, op, *in[0], generic);
  if (isa<ref::BroadcastOp>(op)) // (copies of each window)
    return generic(in);
  // An op whose windowed dimensions all index pass-through factors of its rule
  // (Ref/LayoutFactors.h; certified on any positions, not only blocks): the op on the
  // positions of each window computes those positions of the result. Elementwise ops,
  // transposes, lookups per token, row-wise ops along another dimension.
  if (auto f = dyn_cast<ref::LayoutFactorsOp>(op))
    if (std::optional<ref::LayoutFactors> rule = f.getLayoutFactors()) {
      bool through = rule->operands.size() <= in.size();
      for (size_t i = 0; through && i < rule->operands.size(); ++i)
        for (size_t d = 0; through && d < in[i]->split.size(); ++d)
          if (!in[i]->split[d].windows.empty())
            through = d < rule->operands[i].size() && rule->operands[i][d] >= 0 &&
                      rule->kinds[rule->operands[i][d]] == ref::FactorKind::PassThrough;
      if (through)
        return generic(in);
    }
  return State::unknown(&op, "no layout rule for `" + opName(op) + "` on rows chosen per rank "
                             "(zigzag or chunk windows)");
}

bool dimGroups(const Shape &in, const Shape &out, std::vector<DimGroup> &groups) {
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    DimGroup g{i, i, j, j};
    int64_t a = 1, b = 1;
    if (i < in.size())
      a *= in[i++];
    if (j < out.size())
      b *= out[j++];
    while (a != b) {
      if (a < b && i < in.size())
        a *= in[i++];
      else if (b < a && j < out.size())
        b *= out[j++];
      else
        return false;
    }
    g.i1 = i;
    g.j1 = j;
    groups.push_back(g);
  }
  return true;
}

} // namespace planproof::layouts
