//===- XlaImport.cpp - XLA's SPMD partitioner, checked ------------------------===//
//
// Three steps:
//  1. Device assignments. Every sharding's tile assignment and every collective's
//     replica groups are expanded to explicit device arrays (all four replica-group
//     syntaxes, iota tile assignments with reshape and transpose). Along each array
//     dimension the device ids must be a mixed-radix digit pattern: "pieces" of
//     (count, stride). The strides of all pieces, cut together, must form one chain
//     1 | b1 | b2 | ... | N: those are the mesh axes (minor to major), and each piece is
//     a run of mesh axes. Every array is re-derived from its axes and compared, so an
//     assignment the mesh does not express is never mistranslated.
//  2. Values. Float tensors become JSON values; integer values (partition-id, index
//     constants and tables, their arithmetic) are evaluated per partition to concrete
//     numbers. A dynamic-slice whose offsets differ by partition must be this rank's
//     block of some mesh axes (offset = block size x mixed-radix coordinate), and
//     becomes dist.shard_slice; any other pattern is unsupported.
//  3. Ops. One translation for both modules (collectives only in the plan): HLO ops map
//     to `ref` ops, `dot` through transposes and reshapes onto matmul/batch_matmul,
//     `call` inlined, tuples tracked. Anything else is unsupported, by name.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaImport.h"

#include "Import/Hlo.h"
#include "Support/Limits.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <set>

using namespace planproof;
using json = nlohmann::ordered_json;

namespace {

/// Thrown for what the importer does not cover (message located by the caller).
struct Unsupported {
  std::string what;
};
/// Thrown for malformed input.
struct Malformed {
  std::string what;
};

[[noreturn]] void unsupported(const std::string &w) { throw Unsupported{w}; }
[[noreturn]] void malformed(const std::string &w) { throw Malformed{w}; }

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::vector<int64_t> ints(const std::string &text, const char *what) {
  std::vector<int64_t> v;
  if (!hlo::parseIntList(text, v))
    malformed(std::string("malformed ") + what + " '" + text.substr(0, 60) + "'");
  return v;
}

int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = checkedProduct(dims);
  if (n < 0)
    malformed("sizes overflow");
  return n;
}

//===--- Device arrays and the mesh ------------------------------------------===//

/// A row-major array of device ids.
struct DeviceArray {
  std::vector<int64_t> dims;
  std::vector<int64_t> ids;
};

/// `[t...]<=[R...]T(p...)` or `[t...]d0,d1,...` (the text after "devices=" or a
/// replica-group iota). `end` receives the index past the assignment.
DeviceArray parseTileAssignment(const std::string &s, size_t &pos, int64_t devices) {
  DeviceArray a;
  if (pos >= s.size() || s[pos] != '[')
    malformed("expected '[' in a device assignment");
  size_t close = s.find(']', pos);
  if (close == std::string::npos)
    malformed("unbalanced '[' in a device assignment");
  a.dims = ints(s.substr(pos + 1, close - pos - 1), "tile dimensions");
  int64_t n = product(a.dims);
  if (n <= 0 || n > devices)
    malformed("a device assignment of " + std::to_string(n) + " devices in a module of " +
              std::to_string(devices) + " partitions");
  pos = close + 1;
  if (s.compare(pos, 2, "<=") == 0) {
    pos += 2;
    if (pos >= s.size() || s[pos] != '[')
      malformed("expected '[' after '<='");
    size_t c2 = s.find(']', pos);
    if (c2 == std::string::npos)
      malformed("unbalanced '['");
    std::vector<int64_t> reshape = ints(s.substr(pos + 1, c2 - pos - 1), "iota dimensions");
    pos = c2 + 1;
    std::vector<int64_t> perm(reshape.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (pos < s.size() && s[pos] == 'T') {
      size_t c3 = s.find(')', pos);
      if (pos + 1 >= s.size() || s[pos + 1] != '(' || c3 == std::string::npos)
        malformed("malformed transpose in an iota device assignment");
      perm = ints(s.substr(pos + 2, c3 - pos - 2), "transpose permutation");
      pos = c3 + 1;
    }
    if (product(reshape) != n || perm.size() != reshape.size())
      malformed("iota device assignment sizes disagree");
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i)
      if (sorted[i] != (int64_t)i)
        malformed("the transpose is not a permutation");
    // out[o] = in[i] with i[perm[k]] = o[k]; in is iota over `reshape`.
    std::vector<int64_t> outDims(perm.size()), inStride(reshape.size(), 1);
    for (int k = (int)reshape.size() - 2; k >= 0; --k)
      inStride[k] = inStride[k + 1] * reshape[k + 1];
    for (size_t k = 0; k < perm.size(); ++k)
      outDims[k] = reshape[perm[k]];
    a.ids.resize(n);
    std::vector<int64_t> o(perm.size(), 0);
    for (int64_t f = 0; f < n; ++f) {
      int64_t id = 0;
      for (size_t k = 0; k < perm.size(); ++k)
        id += o[k] * inStride[perm[k]];
      a.ids[f] = id;
      for (int k = (int)o.size() - 1; k >= 0; --k) {
        if (++o[k] < outDims[k])
          break;
        o[k] = 0;
      }
    }
    return a;
  }
  // An explicit list: numbers separated by commas, up to a space or the end.
  size_t e = s.find_first_of(" }", pos);
  std::string list = s.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
  a.ids = ints(list, "device list");
  pos = e == std::string::npos ? s.size() : e;
  if ((int64_t)a.ids.size() != n)
    malformed("a device list of " + std::to_string(a.ids.size()) + " ids for " +
              std::to_string(n) + " tiles");
  return a;
}

/// The index just past the ')' closing the '(' at `open`, or npos.
size_t matchParen(const std::string &s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(')
      ++depth;
    else if (s[i] == ')' && --depth == 0)
      return i + 1;
  }
  return std::string::npos;
}

/// The replica groups of `inst` as written: the attribute, with the `device_ids=...`
/// that the mesh syntax puts after a top-level comma joined back on.
std::string replicaGroupsText(const hlo::Instruction &inst) {
  auto it = inst.attrs.find("replica_groups");
  if (it == inst.attrs.end())
    return "{}";
  std::string rg = it->second;
  auto ids = inst.attrs.find("device_ids");
  if (rg.rfind("mesh[", 0) == 0 && ids != inst.attrs.end())
    rg += ", device_ids=" + ids->second;
  return rg;
}

/// One digit of a mixed-radix pattern: `count` values `stride` apart.
struct Piece {
  int64_t count, stride;
};

/// The pieces (major first) along dim `d` of `a`, or false when the ids along that dim
/// are not a mixed-radix pattern with positive strides.
bool dimPieces(const DeviceArray &a, size_t d, std::vector<Piece> &pieces) {
  int64_t t = a.dims[d];
  int64_t step = 1;
  for (size_t k = d + 1; k < a.dims.size(); ++k)
    step *= a.dims[k];
  std::vector<int64_t> v(t);
  for (int64_t k = 0; k < t; ++k)
    v[k] = a.ids[k * step] - a.ids[0];
  std::vector<Piece> minorFirst;
  int64_t unit = 1;
  while (unit < t) {
    int64_t st = v[unit];
    if (st <= 0)
      return false;
    int64_t r = 1;
    while (unit * (r + 1) <= t && v[unit * r] == r * st)
      ++r;
    if (unit * r < t && v[unit * r] == r * st)
      ++r;
    // the run length must divide what is left
    while (r > 1 && (t / unit) % r != 0)
      --r;
    if (r < 2)
      return false;
    minorFirst.push_back({r, st});
    unit *= r;
  }
  // every index is the sum of its digits' offsets
  for (int64_t k = 0; k < t; ++k) {
    int64_t rest = k, off = 0;
    for (auto &p : minorFirst) {
      off += (rest % p.count) * p.stride;
      rest /= p.count;
    }
    if (v[k] != off)
      return false;
  }
  pieces.assign(minorFirst.rbegin(), minorFirst.rend());
  return true;
}

struct MeshAxis {
  std::string name;
  int64_t size, stride;
};

struct Mesh {
  int64_t devices = 1;
  std::vector<MeshAxis> axes;  // major first
  int64_t coord(int64_t device, size_t a) const {
    return (device / axes[a].stride) % axes[a].size;
  }
  /// The mesh axes making up a piece, major first.
  std::vector<size_t> axesOf(const Piece &p) const {
    std::vector<size_t> out;
    for (size_t a = 0; a < axes.size(); ++a)
      if (axes[a].stride >= p.stride && axes[a].stride < p.stride * p.count)
        out.push_back(a);
    return out;
  }
  /// The mixed-radix index of `device` over `list` (major first).
  int64_t indexOver(int64_t device, const std::vector<size_t> &list) const {
    int64_t i = 0;
    for (size_t a : list)
      i = i * axes[a].size + coord(device, a);
    return i;
  }
};

/// Collects the boundaries every device array needs.
struct MeshBuilder {
  int64_t devices;
  std::set<int64_t> bounds{1};
  explicit MeshBuilder(int64_t n) : devices(n) { bounds.insert(n); }
  void add(const Piece &p) {
    bounds.insert(p.stride);
    bounds.insert(p.stride * p.count);
  }
  bool addArray(const DeviceArray &a) {
    for (size_t d = 0; d < a.dims.size(); ++d) {
      std::vector<Piece> ps;
      if (!dimPieces(a, d, ps))
        return false;
      for (auto &p : ps)
        add(p);
    }
    return true;
  }
  Mesh build(const std::vector<std::pair<std::string, int64_t>> &names) {
    std::vector<std::pair<int64_t, int64_t>> user;  // (stride, size) per named axis
    if (!names.empty()) {
      int64_t stride = devices;
      for (auto &[n, size] : names) {
        if (size <= 0 || stride % size)
          malformed("--mesh does not multiply to the module's " + std::to_string(devices) +
                      " partitions");
        stride /= size;
        user.push_back({stride, size});
        bounds.insert(stride);
      }
      if (stride != 1)
        malformed("--mesh does not multiply to the module's " + std::to_string(devices) +
                    " partitions");
    }
    std::vector<int64_t> b(bounds.begin(), bounds.end());
    for (size_t i = 0; i + 1 < b.size(); ++i)
      if (b[i + 1] % b[i])
        unsupported("the device assignments of the shardings and replica groups do not "
                    "factor into one mesh (boundaries " + std::to_string(b[i]) + " and " +
                    std::to_string(b[i + 1]) + ")");
    if (b.back() != devices)
      unsupported("device assignments larger than the module's partitions");
    Mesh m;
    m.devices = devices;
    for (size_t i = b.size() - 1; i-- > 0;)
      m.axes.push_back({"", b[i + 1] / b[i], b[i]});
    std::map<size_t, int> partsSeen;
    for (size_t a = 0; a < m.axes.size(); ++a) {
      if (names.empty()) {
        m.axes[a].name = "axis_" + std::to_string(a);
        continue;
      }
      for (size_t u = 0; u < user.size(); ++u) {
        auto [st, size] = user[u];
        if (m.axes[a].stride >= st && m.axes[a].stride < st * size) {
          if (m.axes[a].stride == st && m.axes[a].size == size)
            m.axes[a].name = names[u].first;
          else
            m.axes[a].name = names[u].first + "_" + std::to_string(partsSeen[u]++);
        }
      }
    }
    return m;
  }
};

/// The mesh cut into axes of prime size (names `axis.k`), for finding sub-axes.
Mesh primeRefined(const Mesh &m) {
  Mesh f;
  f.devices = m.devices;
  for (auto &a : m.axes) {
    std::vector<int64_t> primes;
    int64_t s = a.size;
    for (int64_t q = 2; q * q <= s; ++q)
      while (s % q == 0)
        primes.push_back(q), s /= q;
    if (s > 1)
      primes.push_back(s);
    int64_t stride = a.stride * a.size;
    for (size_t k = 0; k < primes.size(); ++k) {
      stride /= primes[k];
      f.axes.push_back({a.name + "." + std::to_string(k), primes[k], stride});
    }
  }
  return f;
}

/// Whether offsets `off` (by rank) are `size` x the rank's index over some mesh axes
/// (major first, written to `axes`) and tile a dimension of `extent`; "" or why not.
std::string blockAxes(const Mesh &mesh, const std::vector<int64_t> &off, int64_t size,
                      int64_t extent, std::vector<size_t> &axes) {
  if (off[0] != 0)
    return "rank-dependent slice offsets that do not start at 0 on rank 0";
  std::vector<std::pair<int64_t, size_t>> weights;  // (offset step, axis)
  for (size_t a = 0; a < mesh.axes.size(); ++a) {
    int64_t step = off[mesh.axes[a].stride] - off[0];
    if (step)
      weights.push_back({step, a});
  }
  std::sort(weights.begin(), weights.end());
  axes.clear();
  int64_t expect = size;
  for (auto &[step, a] : weights) {
    if (step != expect)
      return "rank-dependent slice offsets that are not a block of mesh axes";
    expect *= mesh.axes[a].size;
    axes.insert(axes.begin(), a);
  }
  if (expect != extent)
    return "rank-dependent slice offsets that do not tile the dimension";
  for (int64_t r = 0; r < mesh.devices; ++r)
    if (off[r] != size * mesh.indexOver(r, axes))
      return "rank-dependent slice offsets that are not a block of mesh axes";
  return "";
}

/// Thrown when the plan needs mesh axes cut finer than the shardings say.
struct Remesh {};

//===--- Shardings ------------------------------------------------------------===//

struct Sharding {
  enum Kind { Replicated, Tiled, Other } kind = Other;
  std::string why;            // for Other
  DeviceArray tiles;          // Tiled: data dims, then the replicated dim if any
  size_t dataRank = 0;
  std::vector<Sharding> elements;  // a tuple sharding
  bool tuple = false;
};

Sharding parseSharding(const std::string &raw, int64_t devices, int depth = 0) {
  Sharding sh;
  std::string t = trim(raw);
  if (t.size() < 2 || t.front() != '{' || t.back() != '}')
    malformed("malformed sharding '" + t.substr(0, 60) + "'");
  std::string in = trim(t.substr(1, t.size() - 2));
  if (!in.empty() && in.front() == '{') {
    if (depth > 8)
      malformed("sharding nested too deeply");
    sh.tuple = true;
    for (auto &e : hlo::splitTopLevel(in))
      sh.elements.push_back(parseSharding(e, devices, depth + 1));
    return sh;
  }
  if (in.rfind("replicated", 0) == 0) {
    sh.kind = Sharding::Replicated;
    return sh;
  }
  if (in.rfind("devices=", 0) != 0) {
    sh.why = "sharding {" + in.substr(0, 40) + "}";
    return sh;
  }
  size_t pos = 8;
  sh.tiles = parseTileAssignment(in, pos, devices);
  std::string rest = in.substr(pos);
  sh.kind = Sharding::Tiled;
  sh.dataRank = sh.tiles.dims.size();
  if (rest.find("last_tile_dim_replicate") != std::string::npos) {
    sh.dataRank -= 1;
  } else if (rest.find("last_tile_dims=") != std::string::npos) {
    size_t p = rest.find("last_tile_dims=");
    size_t e = rest.find('}', p);
    std::string kinds = rest.substr(p + 15, e == std::string::npos ? 0 : e - p - 14);
    if (kinds.find("manual") != std::string::npos) {
      sh.kind = Sharding::Other;
      sh.why = "a manual sharding (shard_map)";
      return sh;
    }
    sh.dataRank -= hlo::splitTopLevel(kinds.substr(1, kinds.size() - 2)).size();
  }
  if (product(sh.tiles.dims) != devices) {
    sh.kind = Sharding::Other;
    sh.why = "a sharding over a subset of the devices";
  }
  return sh;
}

/// Replica groups in any of XLA's syntaxes, as explicit lists.
std::vector<std::vector<int64_t>> parseReplicaGroups(const std::string &raw, int64_t devices) {
  std::string t = trim(raw);
  std::vector<std::vector<int64_t>> groups;
  if (t == "{}" || t.empty()) {
    groups.emplace_back(devices);
    std::iota(groups[0].begin(), groups[0].end(), 0);
    return groups;
  }
  if (t.front() == '[') {  // [G,S]<=[...]T(...)
    size_t pos = 0;
    DeviceArray a = parseTileAssignment(t, pos, devices);
    if (a.dims.size() != 2)
      malformed("an iota replica group list must be 2-D");
    for (int64_t g = 0; g < a.dims[0]; ++g)
      groups.emplace_back(a.ids.begin() + g * a.dims[1], a.ids.begin() + (g + 1) * a.dims[1]);
    return groups;
  }
  if (t.rfind("mesh[", 0) == 0) {  // mesh['a'=2,'b'=4] {'a'}
    size_t close = t.find(']');
    if (close == std::string::npos)
      malformed("malformed mesh replica groups");
    std::vector<std::string> names;
    std::vector<int64_t> sizes;
    for (auto &item : hlo::splitTopLevel(t.substr(5, close - 5))) {
      size_t e = item.find('=');
      if (e == std::string::npos)
        malformed("malformed mesh axis '" + item + "'");
      std::string n = trim(item.substr(0, e));
      if (n.size() >= 2 && n.front() == '\'' && n.back() == '\'')
        n = n.substr(1, n.size() - 2);
      names.push_back(n);
      sizes.push_back(ints(item.substr(e + 1), "mesh axis size").at(0));
    }
    std::string rest = trim(t.substr(close + 1));
    // `, device_ids=([2,4]T(1,0))` or `, device_ids=(0,2,...)`: mesh position k (row
    // major) is device ids[k]; without it, device k.
    std::vector<int64_t> ids;
    if (rest.rfind(",", 0) == 0)
      rest = trim(rest.substr(1));
    if (rest.rfind("device_ids=", 0) == 0) {
      size_t open = rest.find('('), end = open == std::string::npos ? open : matchParen(rest, open);
      if (end == std::string::npos)
        malformed("malformed device_ids in mesh replica groups");
      std::string inner = trim(rest.substr(open + 1, end - open - 2));
      if (!inner.empty() && inner[0] == '[') {
        // an iota over reshape dims, transposed: the same form as a tile assignment
        std::string as = "[" + std::to_string(devices) + "]<=" + inner;
        size_t pos = 0;
        ids = parseTileAssignment(as, pos, devices).ids;
      } else {
        ids = ints(inner, "device_ids");
      }
      rest = trim(rest.substr(end));
      std::vector<int64_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      for (size_t k = 0; k < sorted.size(); ++k)
        if (sorted[k] != (int64_t)k || (int64_t)sorted.size() != devices)
          malformed("device_ids of mesh replica groups are not a permutation of the devices");
    }
    if (rest.find(':') != std::string::npos)
      unsupported("replica groups over sub-axes: " + rest.substr(0, 60));
    if (rest.size() < 2 || rest.front() != '{' || rest.back() != '}')
      malformed("malformed mesh replica groups");
    std::vector<size_t> sel;
    for (auto &item : hlo::splitTopLevel(rest.substr(1, rest.size() - 2))) {
      std::string n = item;
      if (n.size() >= 2 && n.front() == '\'' && n.back() == '\'')
        n = n.substr(1, n.size() - 2);
      auto it = std::find(names.begin(), names.end(), n);
      if (it == names.end())
        malformed("replica groups name an unknown mesh axis '" + n + "'");
      sel.push_back(it - names.begin());
    }
    if (product(sizes) != devices)
      malformed("mesh replica groups over " + std::to_string(product(sizes)) + " devices");
    std::vector<int64_t> stride(sizes.size(), 1);
    for (int k = (int)sizes.size() - 2; k >= 0; --k)
      stride[k] = stride[k + 1] * sizes[k + 1];
    std::map<int64_t, std::vector<int64_t>> byBase;
    for (int64_t d = 0; d < devices; ++d) {
      int64_t base = d;
      for (size_t a : sel)
        base -= ((d / stride[a]) % sizes[a]) * stride[a];
      byBase[base];
    }
    for (auto &[base, g] : byBase) {
      int64_t n = 1;
      for (size_t a : sel)
        n *= sizes[a];
      for (int64_t k = 0; k < n; ++k) {
        int64_t rest2 = k, d = base;
        for (size_t i = sel.size(); i-- > 0;) {
          d += (rest2 % sizes[sel[i]]) * stride[sel[i]];
          rest2 /= sizes[sel[i]];
        }
        g.push_back(ids.empty() ? d : ids[d]);
      }
      groups.push_back(g);
    }
    return groups;
  }
  if (t.front() != '{' || t.back() != '}')
    malformed("malformed replica groups '" + t.substr(0, 60) + "'");
  for (auto &g : hlo::splitTopLevel(t.substr(1, t.size() - 2)))
    groups.push_back(ints(g, "replica group"));
  return groups;
}

/// The replica groups as a device array [groups, members] for the mesh builder, and
/// the check that they partition the devices.
DeviceArray groupsArray(const std::vector<std::vector<int64_t>> &groups, int64_t devices) {
  DeviceArray a;
  if (groups.empty() || groups[0].empty())
    malformed("empty replica groups");
  size_t s = groups[0].size();
  std::vector<bool> seen(devices, false);
  for (auto &g : groups) {
    if (g.size() != s)
      unsupported("replica groups of different sizes");
    for (int64_t d : g) {
      if (d < 0 || d >= devices || seen[d])
        malformed("replica groups that are not a partition of the " + std::to_string(devices) +
                  " devices");
      seen[d] = true;
    }
  }
  if ((int64_t)(groups.size() * s) != devices)
    malformed("replica groups that do not cover the devices");
  // Ordered by the smallest member, so that the array's rows are a mixed-radix pattern
  // when the groups are the cosets of some mesh axes.
  std::vector<std::vector<int64_t>> sorted = groups;
  std::sort(sorted.begin(), sorted.end(),
            [](auto &x, auto &y) { return *std::min_element(x.begin(), x.end()) <
                                          *std::min_element(y.begin(), y.end()); });
  a.dims = {(int64_t)sorted.size(), (int64_t)s};
  for (auto &g : sorted)
    a.ids.insert(a.ids.end(), g.begin(), g.end());
  return a;
}

/// The mesh axes, in group order, that a collective's groups run over; checked by
/// re-deriving every group from them.
std::vector<size_t> groupAxes(const Mesh &mesh, const std::vector<std::vector<int64_t>> &groups) {
  DeviceArray a = groupsArray(groups, mesh.devices);
  std::vector<Piece> ps;
  if (!dimPieces(a, 1, ps))
    unsupported("replica groups that are not the ranks of some mesh axes");
  std::vector<size_t> axes;
  for (auto &p : ps)
    for (size_t ax : mesh.axesOf(p))
      axes.push_back(ax);
  for (auto &g : groups) {
    int64_t base = g[0];
    for (size_t ax : axes)
      if (mesh.coord(base, ax) != 0)
        unsupported("replica groups that are not the ranks of some mesh axes");
    for (size_t k = 0; k < g.size(); ++k) {
      if (mesh.indexOver(g[k], axes) != (int64_t)k)
        unsupported("replica groups that are not the ranks of some mesh axes in order");
      for (size_t ax = 0; ax < mesh.axes.size(); ++ax)
        if (std::find(axes.begin(), axes.end(), ax) == axes.end() &&
            mesh.coord(g[k], ax) != mesh.coord(base, ax))
          unsupported("replica groups that are not the ranks of some mesh axes");
    }
  }
  return axes;
}

/// A tiled sharding's mesh axes per data dim (major first); checked by re-deriving
/// which tile every device holds.
std::vector<std::vector<size_t>> shardingAxes(const Mesh &mesh, const Sharding &sh) {
  std::vector<std::vector<size_t>> dims(sh.tiles.dims.size());
  for (size_t d = 0; d < sh.tiles.dims.size(); ++d) {
    std::vector<Piece> ps;
    if (!dimPieces(sh.tiles, d, ps))
      unsupported("a tile assignment that is not a mesh layout");
    for (auto &p : ps)
      for (size_t ax : mesh.axesOf(p))
        dims[d].push_back(ax);
  }
  // device at tile index idx must have idx[d] == its index over dims[d]
  std::vector<int64_t> idx(sh.tiles.dims.size(), 0);
  for (int64_t f = 0; f < (int64_t)sh.tiles.ids.size(); ++f) {
    for (size_t d = 0; d < idx.size(); ++d)
      if (mesh.indexOver(sh.tiles.ids[f], dims[d]) != idx[d])
        unsupported("a tile assignment that is not a mesh layout");
    for (int k = (int)idx.size() - 1; k >= 0; --k) {
      if (++idx[k] < sh.tiles.dims[k])
        break;
      idx[k] = 0;
    }
  }
  dims.resize(sh.dataRank);
  return dims;
}

//===--- Values ---------------------------------------------------------------===//

bool isFloat(const std::string &t) {
  return t == "f32" || t == "bf16" || t == "f16" || t == "f64";
}
bool isInt(const std::string &t) {
  return t == "s8" || t == "s16" || t == "s32" || t == "s64" || t == "u8" || t == "u16" ||
         t == "u32" || t == "u64" || t == "pred";
}

struct Val {
  /// Ids: token ids or labels, an integer parameter (a symbolic i64 vector in the spec,
  /// every id in [0, rows) of the tables it indexes), viewed with `dims`, plus `offset`.
  enum Kind { Tensor, Index, Tuple, Ids } kind = Tensor;
  std::string name;                 // Tensor: the JSON value; Ids: the i64 input
  int64_t offset = 0;               // Ids: added to every id
  std::string type;
  std::vector<int64_t> dims;
  std::string scalarConst;          // Tensor: a float constant's literal, when scalar
  std::vector<std::vector<int64_t>> idx;  // Index: [rank][element]
  std::vector<Val> elements;        // Tuple
};

std::string sanitize(const std::string &n) {
  std::string s;
  for (char c : n)
    s += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit((unsigned char)s[0]))
    s = "v" + s;
  return s;
}

/// A float literal as JSON: exact decimal text kept as the number it denotes.
json floatLiteral(const std::string &text) {
  std::string t = trim(text);
  if (t == "inf" || t == "-inf" || t == "nan" || t == "-nan")
    unsupported("the non-finite constant " + t);
  if (t == "true")
    return 1;
  if (t == "false")
    return 0;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end)
    malformed("malformed constant '" + t.substr(0, 40) + "'");
  if (errno == ERANGE)
    unsupported("the constant " + t + " is outside the range of a double");
  return v;
}

/// Flattens a literal `{ {1, 2}, {3, 4} }` (or a scalar) into element texts.
std::vector<std::string> literalElements(const std::string &raw) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : raw) {
    if (c == '{' || c == '}' || c == ',' || c == ' ') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

int64_t intLiteral(const std::string &t) {
  if (t == "true")
    return 1;
  if (t == "false")
    return 0;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (end == t.c_str() || *end || errno)
    malformed("malformed integer constant '" + t.substr(0, 40) + "'");
  return v;
}

//===--- The translation ------------------------------------------------------===//

class Translator {
public:
  Translator(const hlo::Module &m, bool plan, const Mesh *mesh)
      : m(m), plan(plan), mesh(mesh), ranks(plan ? mesh->devices : 1) {}

  json ops = json::array();
  std::set<std::string> used;

  std::string fresh(const std::string &base) {
    std::string s = sanitize(base);
    if (!used.count(s)) {
      used.insert(s);
      return s;
    }
    for (int i = 1;; ++i) {
      std::string c = s + "_" + std::to_string(i);
      if (!used.count(c)) {
        used.insert(c);
        return c;
      }
    }
  }

  /// Where the instruction being translated is (for messages), and its user location;
  /// mirrored into *track so that errors are located.
  const hlo::Instruction *cur = nullptr;
  const hlo::Instruction **track = nullptr;
  /// Where the plan's translation records mesh cuts it needs (then throws Remesh).
  std::set<int64_t> *newBounds = nullptr;

  json loc() const {
    if (!cur || cur->loc.file.empty() || cur->loc.line <= 0)
      return nullptr;
    // A relative source path is relative to the dump's folder (planproof.xla writes
    // them so); the spec may be written elsewhere, so it gets the resolved path.
    std::string file = cur->loc.file;
    if (file[0] != '/' && file[0] != '<') {
      std::error_code ec;
      auto p = std::filesystem::absolute(std::filesystem::path(m.path).parent_path() / file, ec);
      if (!ec)
        file = p.lexically_normal().string();
    }
    json l = {{"file", file}, {"line", cur->loc.line}};
    if (cur->loc.col > 0)
      l["col"] = cur->loc.col;
    return l;
  }

  std::string emit(const std::string &op, const std::vector<std::string> &operands,
                   json attrs, const std::vector<int64_t> *shape, const std::string &base) {
    if (ops.size() >= 2000000)
      unsupported("the program translates to more than 2 million ops (unrolled loops)");
    json o;
    std::string r = fresh(base);
    o["result"] = r;
    o["op"] = op;
    o["operands"] = operands;
    if (!attrs.is_null() && !attrs.empty())
      o["attrs"] = attrs;
    if (shape)
      o["shape"] = *shape;
    json l = loc();
    if (!l.is_null())
      o["loc"] = l;
    ops.push_back(o);
    return r;
  }

  Val tensor(const std::string &name, const std::string &type, std::vector<int64_t> dims) {
    Val v;
    v.kind = Val::Tensor;
    v.name = name;
    v.type = type;
    v.dims = std::move(dims);
    return v;
  }

  /// Runs computation `c` on `args`; returns its root's value. Calls nest at most 64.
  Val run(const hlo::Computation &c, const std::vector<Val> &args, int depth) {
    if (depth > 64)
      unsupported("calls nested more than 64 deep");
    std::map<std::string, Val> env;
    for (auto &inst : c.insts) {
      cur = &inst;
      if (track)
        *track = &inst;
      std::vector<const Val *> in;
      for (auto &o : inst.operands) {
        auto it = env.find(o);
        if (it == env.end())
          malformed("operand '" + o + "' is not defined before its use");
        in.push_back(&it->second);
      }
      env[inst.name] = translate(inst, in, args, depth);
    }
    const hlo::Instruction *r = c.root();
    return env.at(r->name);
  }

private:
  const hlo::Module &m;
  bool plan;
  const Mesh *mesh;
  int64_t ranks;

  const Val &need(const std::vector<const Val *> &in, size_t n) {
    if (in.size() != n)
      malformed("'" + cur->opcode + "' takes " + std::to_string(n) + " operands, not " +
                std::to_string(in.size()));
    return *in[0];
  }
  const std::string &attr(const char *key) {
    auto it = cur->attrs.find(key);
    if (it == cur->attrs.end())
      malformed("'" + cur->opcode + "' needs the attribute " + key);
    return it->second;
  }
  std::vector<int64_t> dimsOf() {
    if (cur->shape.isTuple())
      malformed("'" + cur->opcode + "' cannot have a tuple shape");
    return cur->shape.dims;
  }
  void checkTensor(const Val &v) {
    if (v.kind != Val::Tensor)
      unsupported("'" + cur->opcode + "' on an integer or tuple value (" + cur->shape.str() + ")");
    if (v.name.empty())
      unsupported("'" + cur->opcode + "' on the non-finite constant " + v.scalarConst);
  }
  /// A non-finite constant is kept unemitted (no JSON number denotes it); it may only
  /// start a max reduction or be the neutral side of maximum/minimum.
  static bool isConst(const Val &v, const char *text) {
    return v.kind == Val::Tensor && trim(v.scalarConst) == text;
  }

  /// The kind of a reduction computation: "sum" or "max".
  std::string reductionKind() {
    const hlo::Computation *c = m.find(attr("to_apply").substr(attr("to_apply")[0] == '%'));
    if (!c)
      malformed("to_apply names an unknown computation");
    const hlo::Instruction *r = c->root();
    if (c->insts.size() != 3 || r->operands.size() != 2)
      unsupported("a reduction computation other than add or maximum of its two parameters");
    for (auto &o : r->operands) {
      auto *p = c->find(o);
      if (!p || p->opcode != "parameter")
        unsupported("a reduction computation other than add or maximum of its two parameters");
    }
    if (r->opcode == "add")
      return "sum";
    if (r->opcode == "maximum")
      return "max";
    unsupported("a reduction by '" + r->opcode + "'");
  }

  Val translate(const hlo::Instruction &inst, const std::vector<const Val *> &in,
                const std::vector<Val> &args, int depth);
  Val indexOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val dot(const std::vector<const Val *> &in);
  Val dynamicSlice(const std::vector<const Val *> &in);
  Val select(const std::vector<const Val *> &in);
  Val collectivePermute(const std::vector<const Val *> &in);
  Val idsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in);
  Val whileLoop(const std::vector<const Val *> &in, int depth);
  Val dynamicUpdateSlice(const std::vector<const Val *> &in);
  std::string replaceBlock(const std::string &base, const std::vector<int64_t> &baseDims,
                           const std::string &update, const std::vector<int64_t> &updDims,
                           const std::vector<int64_t> &offsets, size_t from);
  /// Loop iterations unrolled so far (every while of the module together).
  int64_t iterations = 0;
  Val gather(const std::vector<const Val *> &in);
  Val scatterAdd(const std::vector<const Val *> &in);
  const Val &idsOperand(const Val &v);
  std::string oneHot(const Val &ids, int64_t classes);
  std::map<int64_t, std::string> identities;  // the V x V identity literal, by V
  std::vector<int64_t> attrInts(const char *k) {
    auto it = cur->attrs.find(k);
    return it == cur->attrs.end() ? std::vector<int64_t>{} : ints(it->second, k);
  }

public:
  /// The rows an id input indexes (the least over its gathers): its bound.
  std::map<std::string, int64_t> bounds;
  /// The plan's: the reference's bounds (by the plan input's name), which every lookup
  /// must cover -- XLA clamps an out-of-range index where `embedding` gives zeros, so a
  /// lookup in fewer rows than the ids range has no translation.
  std::map<std::string, int64_t> refBounds;
  /// Comparisons decided by assuming bound(ids) <= limit; checked once bounds are known.
  struct BoundLimit {
    std::string ids;
    int64_t limit;
    const hlo::Instruction *at;
  };
  std::vector<BoundLimit> boundLimits;
  /// Throws unsupported, located at the comparison, when a recorded decision is wrong.
  void checkBoundLimits(const std::map<std::string, int64_t> &final, const hlo::Instruction *&at) {
    for (auto &l : boundLimits) {
      auto b = final.find(l.ids);
      if (b == final.end() || b->second > l.limit) {
        at = l.at;
        unsupported("a comparison of token ids that their range [0, rows) does not decide");
      }
    }
  }
  void useRows(const Val &ids, int64_t rows) {
    auto &b = bounds[ids.name];
    b = b ? std::min(b, rows) : rows;
    auto r = refBounds.find(ids.name);
    if (plan && (r == refBounds.end() || rows < r->second))
      unsupported("a lookup by token ids in " + std::to_string(rows) + " rows, fewer than the "
                  "ids range (XLA clamps an out-of-range id; a vocabulary-sharded lookup is "
                  "not covered)");
  }

private:
  Val collective(const std::vector<const Val *> &in);
  std::vector<size_t> collectiveAxes();
  json axisNames(const std::vector<size_t> &axes) {
    json a = json::array();
    for (size_t x : axes)
      a.push_back(mesh->axes[x].name);
    return a;
  }
};

Val Translator::translate(const hlo::Instruction &inst, const std::vector<const Val *> &in,
                          const std::vector<Val> &args, int depth) {
  const std::string &op = inst.opcode;
  std::string base = inst.name;

  if (op == "parameter") {
    std::vector<int64_t> k = ints(inst.rawOperands, "parameter number");
    if (k.size() != 1 || k[0] < 0 || k[0] >= (int64_t)args.size())
      malformed("parameter(" + inst.rawOperands + ") out of range");
    return args[k[0]];
  }
  if (op == "tuple") {
    Val t;
    t.kind = Val::Tuple;
    for (auto *v : in)
      t.elements.push_back(*v);
    return t;
  }
  if (op == "get-tuple-element") {
    const Val &t = need(in, 1);
    std::vector<int64_t> k = ints(attr("index"), "tuple index");
    if (t.kind != Val::Tuple || k.size() != 1 || k[0] < 0 || k[0] >= (int64_t)t.elements.size())
      malformed("get-tuple-element index out of range");
    return t.elements[k[0]];
  }
  if (op == "call") {
    std::string callee = attr("to_apply");
    if (!callee.empty() && callee[0] == '%')
      callee.erase(0, 1);
    const hlo::Computation *c = m.find(callee);
    if (!c)
      malformed("call of an unknown computation '" + callee + "'");
    std::vector<Val> a;
    for (auto *v : in)
      a.push_back(*v);
    const hlo::Instruction *saved = cur;
    Val r = run(*c, a, depth + 1);
    cur = saved;
    if (track)
      *track = saved;
    return r;
  }
  if (op == "opt-barrier" || op == "optimization-barrier")
    return need(in, 1);
  if (op == "custom-call") {
    auto it = inst.attrs.find("custom_call_target");
    std::string target = it == inst.attrs.end() ? "" : trim(it->second);
    if (target == "\"Sharding\"" && in.size() == 1)
      return *in[0];  // an annotation: the value itself
    unsupported("custom-call " + target);
  }

  if (op == "while")
    return whileLoop(in, depth);
  if (inst.shape.isTuple() && op != "all-reduce")
    unsupported("HLO op '" + op + "' with a tuple result");
  if (op == "conditional")
    unsupported("HLO op '" + op + "' (control flow)");

  // Integer values: token ids stay symbolic; partition ids, index arithmetic and tables
  // are evaluated.
  if (!inst.shape.isTuple() && isInt(inst.shape.type) && op != "all-reduce") {
    for (auto *v : in)
      if (v->kind == Val::Ids)
        return idsOp(inst, in);
    return indexOp(inst, in);
  }
  if (!inst.shape.isTuple() && !isFloat(inst.shape.type))
    unsupported("element type " + inst.shape.type);

  std::vector<int64_t> dims = inst.shape.isTuple() ? std::vector<int64_t>{} : inst.shape.dims;
  const std::string &type = inst.shape.type;

  if (op == "constant") {
    std::vector<std::string> els = literalElements(inst.rawOperands);
    int64_t n = product(dims);
    if ((int64_t)els.size() != n)
      malformed("a constant with " + std::to_string(els.size()) + " values for " +
                std::to_string(n) + " elements");
    if (dims.empty()) {
      std::string t = trim(els[0]);
      if (t == "inf" || t == "-inf" || t == "nan" || t == "-nan") {
        Val v = tensor("", type, dims);
        v.scalarConst = t;
        return v;
      }
      Val v = tensor(emit("constant", {}, {{"value", floatLiteral(els[0])}}, &dims, base), type,
                     dims);
      v.scalarConst = els[0];
      return v;
    }
    if (n > 1 << 20)
      unsupported("a dense constant of more than 2^20 elements");
    json values = json::array();
    for (auto &e : els)
      values.push_back(floatLiteral(e));
    return tensor(emit("literal", {}, {{"values", values}}, &dims, base), type, dims);
  }
  if (op == "convert" || op == "copy") {
    const Val &x = need(in, 1);
    checkTensor(x);  // float to float: the same real number (rounding is replay's concern)
    Val v = x;
    v.type = type;
    return v;
  }
  static const std::map<std::string, std::string> binary = {
      {"add", "add"}, {"subtract", "sub"}, {"multiply", "mul"},
      {"divide", "div"}, {"maximum", "maximum"}, {"minimum", "minimum"}};
  if (auto it = binary.find(op); it != binary.end()) {
    if (in.size() != 2)
      malformed("'" + op + "' takes 2 operands");
    for (int k = 0; k < 2; ++k)  // max(x, -inf) = x, min(x, inf) = x
      if ((op == "maximum" && isConst(*in[k], "-inf")) || (op == "minimum" && isConst(*in[k], "inf")))
        return *in[1 - k];
    checkTensor(*in[0]);
    checkTensor(*in[1]);
    return tensor(emit(it->second, {in[0]->name, in[1]->name}, nullptr, nullptr, base), type, dims);
  }
  static const std::map<std::string, std::string> unary = {
      {"exponential", "exp"}, {"log", "log"}, {"rsqrt", "rsqrt"}, {"sqrt", "sqrt"},
      {"tanh", "tanh"}, {"logistic", "logistic"}};
  if (auto it = unary.find(op); it != unary.end()) {
    const Val &x = need(in, 1);
    checkTensor(x);
    return tensor(emit(it->second, {x.name}, nullptr, nullptr, base), type, dims);
  }
  if (op == "negate") {
    const Val &x = need(in, 1);
    checkTensor(x);
    return tensor(emit("scale", {x.name}, {{"factor", -1}}, nullptr, base), type, dims);
  }
  if (op == "broadcast") {
    const Val &x = need(in, 1);
    if (x.kind != Val::Tensor)
      checkTensor(x);
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    if (x.name.empty() && x.dims.empty()) {  // a non-finite constant, still unemitted
      Val v = tensor("", type, dims);
      v.scalarConst = x.scalarConst;
      return v;
    }
    if (!x.scalarConst.empty() && x.dims.empty()) {
      Val v = tensor(emit("constant", {}, {{"value", floatLiteral(x.scalarConst)}}, &dims, base),
                     type, dims);
      v.scalarConst = x.scalarConst;  // a splat: scatters into zeros are recognized
      return v;
    }
    if (bd.size() == dims.size() && x.dims == dims)
      return x;
    return tensor(emit("broadcast", {x.name}, {{"dims", bd}}, &dims, base), type, dims);
  }
  if (op == "reshape" || op == "bitcast") {
    const Val &x = need(in, 1);
    checkTensor(x);
    if (x.dims == dims)
      return x;
    if (op == "bitcast")
      unsupported("a bitcast that changes the shape");
    return tensor(emit("reshape", {x.name}, nullptr, &dims, base), type, dims);
  }
  if (op == "transpose") {
    const Val &x = need(in, 1);
    checkTensor(x);
    std::vector<int64_t> perm = ints(attr("dimensions"), "transpose dimensions");
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= perm[i] == (int64_t)i;
    if (identity)
      return x;
    return tensor(emit("transpose", {x.name}, {{"perm", perm}}, nullptr, base), type, dims);
  }
  if (op == "slice") {
    const Val &x = need(in, 1);
    checkTensor(x);
    std::string s = trim(attr("slice"));
    if (s.size() < 2 || s.front() != '{' || s.back() != '}')
      malformed("malformed slice attribute");
    std::vector<int64_t> offsets, sizes;
    for (auto &r : hlo::splitTopLevel(s.substr(1, s.size() - 2))) {
      if (r.size() < 2 || r.front() != '[' || r.back() != ']')
        malformed("malformed slice range '" + r + "'");
      std::string range = r.substr(1, r.size() - 2);
      std::replace(range.begin(), range.end(), ':', ',');
      std::vector<int64_t> b = ints(range, "slice range");
      if (b.size() == 3 && b[2] != 1)
        unsupported("a strided slice");
      if (b.size() < 2)
        malformed("malformed slice range '" + r + "'");
      offsets.push_back(b[0]);
      sizes.push_back(b[1] - b[0]);
    }
    if (sizes == x.dims)
      return x;
    return tensor(emit("slice", {x.name}, {{"offsets", offsets}, {"sizes", sizes}}, nullptr, base),
                  type, dims);
  }
  if (op == "concatenate") {
    std::vector<std::string> names;
    for (auto *v : in) {
      checkTensor(*v);
      names.push_back(v->name);
    }
    std::vector<int64_t> d = ints(attr("dimensions"), "concatenate dimension");
    if (d.size() != 1)
      malformed("concatenate needs one dimension");
    return tensor(emit("concat", names, {{"dim", d[0]}}, nullptr, base), type, dims);
  }
  if (op == "dot")
    return dot(in);
  if (op == "reduce") {
    if (in.size() != 2)
      unsupported("a variadic reduce");
    checkTensor(*in[0]);
    std::string kind = reductionKind();
    const Val &init = *in[1];
    std::vector<int64_t> rd = ints(attr("dimensions"), "reduce dimensions");
    std::sort(rd.begin(), rd.end());
    if (kind == "sum") {
      if (init.scalarConst.empty() || floatLiteral(init.scalarConst) != 0.0)
        unsupported("a sum reduction whose initial value is not the constant 0");
      return tensor(emit("reduce_sum", {in[0]->name}, {{"dims", rd}}, nullptr, base), type, dims);
    }
    if (trim(init.scalarConst) != "-inf")
      unsupported("a max reduction whose initial value is not -inf");
    return tensor(emit("reduce_max", {in[0]->name}, {{"dims", rd}}, nullptr, base), type, dims);
  }
  if (op == "dynamic-slice")
    return dynamicSlice(in);
  if (op == "dynamic-update-slice")
    return dynamicUpdateSlice(in);
  if (op == "select")
    return select(in);
  if (op == "gather")
    return gather(in);
  if (op == "scatter")
    return scatterAdd(in);
  if (op == "collective-permute") {
    if (!plan)
      malformed("a collective in the module before partitioning");
    return collectivePermute(in);
  }
  if (op == "all-reduce" || op == "all-gather" || op == "reduce-scatter" || op == "all-to-all") {
    if (!plan)
      malformed("a collective in the module before partitioning");
    return collective(in);
  }
  unsupported("HLO op '" + op + "'");
}

Val Translator::dot(const std::vector<const Val *> &in) {
  if (in.size() != 2)
    malformed("dot takes 2 operands");
  const Val &l = *in[0], &r = *in[1];
  checkTensor(l);
  checkTensor(r);
  auto get = [&](const char *k) {
    auto it = cur->attrs.find(k);
    return it == cur->attrs.end() ? std::vector<int64_t>{} : ints(it->second, k);
  };
  std::vector<int64_t> lb = get("lhs_batch_dims"), rb = get("rhs_batch_dims"),
                       lc = get("lhs_contracting_dims"), rc = get("rhs_contracting_dims");
  if (lb.size() != rb.size() || lc.size() != rc.size())
    malformed("dot dimension lists disagree");
  auto check = [&](const std::vector<int64_t> &ds, size_t rank) {
    for (int64_t d : ds)
      if (d < 0 || d >= (int64_t)rank)
        malformed("dot dimension out of range");
  };
  check(lb, l.dims.size()), check(lc, l.dims.size());
  check(rb, r.dims.size()), check(rc, r.dims.size());
  auto freeDims = [](size_t rank, const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < (int64_t)rank; ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
        f.push_back(d);
    return f;
  };
  std::vector<int64_t> lf = freeDims(l.dims.size(), lb, lc), rf = freeDims(r.dims.size(), rb, rc);
  std::vector<int64_t> out = dimsOf();
  std::string type = cur->shape.type;
  auto sizeOf = [](const Val &v, const std::vector<int64_t> &ds) {
    int64_t n = 1;
    for (int64_t d : ds)
      n *= v.dims[d];
    return n;
  };
  // The plain matmul: 2-D operands, one contracted dim each, no batch.
  if (lb.empty() && lc.size() == 1 && l.dims.size() == 2 && r.dims.size() == 2)
    return tensor(emit("matmul", {l.name, r.name}, {{"lhs_dim", lc[0]}, {"rhs_dim", rc[0]}},
                       nullptr, cur->name),
                  type, out);
  // Otherwise: lhs to [B, M, K], rhs to [B, K, N] (transposes and reshapes), one
  // batch_matmul, and the result back to [batch..., lhs free..., rhs free...].
  auto arrange = [&](const Val &v, std::vector<int64_t> order, std::vector<int64_t> shape3,
                     const char *what) {
    std::string name = v.name;
    std::vector<int64_t> dims;
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) {
      identity &= order[i] == (int64_t)i;
      dims.push_back(v.dims[order[i]]);
    }
    if (!identity)
      name = emit("transpose", {name}, {{"perm", order}}, nullptr, cur->name + "_" + what + "_t");
    if (dims != shape3)
      name = emit("reshape", {name}, nullptr, &shape3, cur->name + "_" + what + "_r");
    return name;
  };
  int64_t B = sizeOf(l, lb), M = sizeOf(l, lf), K = sizeOf(l, lc), N = sizeOf(r, rf);
  if (sizeOf(r, rb) != B || sizeOf(r, rc) != K)
    malformed("dot operand sizes disagree");
  std::vector<int64_t> lo = lb, ro = rb;
  lo.insert(lo.end(), lf.begin(), lf.end());
  lo.insert(lo.end(), lc.begin(), lc.end());
  ro.insert(ro.end(), rc.begin(), rc.end());
  ro.insert(ro.end(), rf.begin(), rf.end());
  std::string ln = arrange(l, lo, {B, M, K}, "lhs"), rn = arrange(r, ro, {B, K, N}, "rhs");
  std::vector<int64_t> res3 = {B, M, N};
  std::string res = emit("batch_matmul", {ln, rn}, {{"lhs_dim", 2}, {"rhs_dim", 1}}, nullptr,
                         cur->name);
  if (out != res3)
    res = emit("reshape", {res}, nullptr, &out, cur->name + "_r");
  return tensor(res, type, out);
}

std::vector<size_t> Translator::collectiveAxes() {
  std::string rg = replicaGroupsText(*cur);
  if (!cur->attrs.count("channel_id"))
    unsupported("a cross-replica collective (no channel_id): only cross-partition "
                "collectives are covered");
  return groupAxes(*mesh, parseReplicaGroups(rg, mesh->devices));
}

Val Translator::collective(const std::vector<const Val *> &in) {
  const std::string &op = cur->opcode;
  std::vector<size_t> axes = collectiveAxes();
  if (op == "all-reduce") {
    std::string kind = reductionKind();
    auto one = [&](const Val &x, const std::vector<int64_t> &dims) {
      checkTensor(x);
      if (axes.empty())
        return x;
      return tensor(emit("all_reduce", {x.name}, {{"axes", axisNames(axes)}, {"kind", kind}},
                         nullptr, cur->name),
                    x.type, dims);
    };
    if (!cur->shape.isTuple())
      return one(need(in, 1), cur->shape.dims);
    Val t;
    t.kind = Val::Tuple;
    if (in.size() != cur->shape.elements.size())
      malformed("a tuple all-reduce with mismatched operands");
    for (size_t i = 0; i < in.size(); ++i)
      t.elements.push_back(one(*in[i], cur->shape.elements[i].dims));
    return t;
  }
  const Val &x = need(in, 1);
  checkTensor(x);
  std::vector<int64_t> d = ints(attr("dimensions"), "collective dimension");
  if (d.size() != 1)
    unsupported("'" + op + "' over several dimensions");
  std::vector<int64_t> dims = dimsOf();
  if (axes.empty())
    return x;
  if (op == "all-gather")
    return tensor(emit("all_gather", {x.name}, {{"axes", axisNames(axes)}, {"dim", d[0]}}, nullptr,
                       cur->name),
                  x.type, dims);
  if (op == "reduce-scatter")
    return tensor(emit("reduce_scatter", {x.name},
                       {{"axes", axisNames(axes)}, {"dim", d[0]}, {"kind", reductionKind()}},
                       nullptr, cur->name),
                  x.type, dims);
  return tensor(emit("all_to_all", {x.name},
                     {{"axes", axisNames(axes)}, {"split_dim", d[0]}, {"concat_dim", d[0]}},
                     nullptr, cur->name),
                x.type, dims);
}

Val Translator::dynamicSlice(const std::vector<const Val *> &in) {
  if (in.empty())
    malformed("dynamic-slice needs operands");
  const Val &x = *in[0];
  checkTensor(x);
  if (in.size() != x.dims.size() + 1)
    unsupported("dynamic-slice with offsets in one tensor operand");
  std::vector<int64_t> sizes = ints(attr("dynamic_slice_sizes"), "dynamic_slice_sizes");
  if (sizes.size() != x.dims.size())
    malformed("dynamic_slice_sizes has the wrong rank");
  std::string name = x.name;
  std::vector<int64_t> dims = x.dims;
  for (size_t d = 0; d < x.dims.size(); ++d) {
    const Val &o = *in[d + 1];
    if (o.kind != Val::Index || !o.dims.empty())
      unsupported("a dynamic-slice offset that depends on the data");
    if (sizes[d] < 0 || sizes[d] > x.dims[d])
      malformed("dynamic-slice size out of range");
    // XLA clamps every offset into [0, dim - size].
    std::vector<int64_t> off(o.idx.size());
    for (size_t r = 0; r < off.size(); ++r)
      off[r] = std::clamp<int64_t>(o.idx[r][0], 0, x.dims[d] - sizes[d]);
    bool same = std::all_of(off.begin(), off.end(), [&](int64_t v) { return v == off[0]; });
    if (same) {
      if (sizes[d] == x.dims[d])
        continue;
      std::vector<int64_t> offsets(dims.size(), 0), sz = dims;
      offsets[d] = off[0];
      sz[d] = sizes[d];
      name = emit("slice", {name}, {{"offsets", offsets}, {"sizes", sz}}, nullptr, cur->name);
      dims = sz;
      continue;
    }
    // offset(rank) = size x (index of the rank over some mesh axes, major first)
    if (!plan)
      malformed("rank-dependent offsets outside the plan");
    std::vector<size_t> axes;
    std::string why = blockAxes(*mesh, off, sizes[d], x.dims[d], axes);
    if (!why.empty()) {
      // Perhaps over parts of mesh axes that no sharding names: find them on the mesh
      // cut into prime factors, and restart the import with those cuts.
      Mesh fine = primeRefined(*mesh);
      std::vector<size_t> fineAxes;
      if (!newBounds || !blockAxes(fine, off, sizes[d], x.dims[d], fineAxes).empty())
        unsupported(why);
      for (size_t a : fineAxes) {
        newBounds->insert(fine.axes[a].stride);
        newBounds->insert(fine.axes[a].stride * fine.axes[a].size);
      }
      throw Remesh{};
    }
    dims[d] = sizes[d];
    name = emit("shard_slice", {name}, {{"axes", axisNames(axes)}, {"dim", (int64_t)d}}, nullptr,
                cur->name);
  }
  return tensor(name, x.type, dims);
}

/// The axis map of a permutation of ranks that permutes mesh coordinates: the source
/// of rank t has, on axis a, t's coordinate on axis perm[a]. Empty when `src` is not one.
std::vector<size_t> coordinatePermutation(const Mesh &mesh, const std::vector<int64_t> &src) {
  std::vector<size_t> perm(mesh.axes.size());
  std::vector<bool> taken(mesh.axes.size(), false);
  for (size_t a = 0; a < mesh.axes.size(); ++a) {
    bool found = false;
    for (size_t b = 0; b < mesh.axes.size() && !found; ++b) {
      if (taken[b] || mesh.axes[b].size != mesh.axes[a].size)
        continue;
      bool ok = true;
      for (int64_t t = 0; t < mesh.devices && ok; ++t)
        ok = mesh.coord(src[t], a) == mesh.coord(t, b);
      if (ok) {
        perm[a] = b;
        taken[b] = found = true;
      }
    }
    if (!found)
      return {};
  }
  return perm;
}

/// collective-permute: rank t receives the value of rank src(t). When src permutes mesh
/// coordinates (axis a of the source is axis perm[a] of the receiver), rank t's value is
/// block indexOver(t, perm(A)) of the all-gather over the moved axes A -- exactly what
/// all_gather over A followed by shard_slice over perm(A) computes.
Val Translator::collectivePermute(const std::vector<const Val *> &in) {
  const Val &x = need(in, 1);
  checkTensor(x);
  if (!cur->attrs.count("channel_id"))
    unsupported("a cross-replica collective-permute (no channel_id)");
  std::string pairsText = trim(attr("source_target_pairs"));
  if (pairsText.size() < 2 || pairsText.front() != '{' || pairsText.back() != '}')
    malformed("malformed source_target_pairs");
  std::vector<int64_t> src(mesh->devices, -1);
  for (auto &pr : hlo::splitTopLevel(pairsText.substr(1, pairsText.size() - 2))) {
    std::vector<int64_t> st = ints(pr, "source-target pair");
    if (st.size() != 2 || st[0] < 0 || st[1] < 0 || st[0] >= mesh->devices ||
        st[1] >= mesh->devices)
      malformed("source-target pair out of range");
    if (src[st[1]] != -1)
      malformed("rank " + std::to_string(st[1]) + " receives twice");
    src[st[1]] = st[0];
  }
  std::vector<bool> sent(mesh->devices, false);
  for (int64_t t = 0; t < mesh->devices; ++t) {
    if (src[t] < 0)
      unsupported("a collective-permute in which rank " + std::to_string(t) +
                  " receives nothing (it gets zeros)");
    if (sent[src[t]])
      unsupported("a collective-permute that sends one rank's value twice");
    sent[src[t]] = true;
  }
  std::vector<size_t> perm = coordinatePermutation(*mesh, src);
  if (perm.empty()) {
    Mesh fine = primeRefined(*mesh);
    std::vector<size_t> finePerm = coordinatePermutation(fine, src);
    if (finePerm.empty() || !newBounds)
      unsupported("a collective-permute that does not permute mesh coordinates");
    for (size_t a = 0; a < fine.axes.size(); ++a)
      if (finePerm[a] != a) {
        newBounds->insert(fine.axes[a].stride);
        newBounds->insert(fine.axes[a].stride * fine.axes[a].size);
      }
    throw Remesh{};
  }
  std::vector<size_t> moved, onto;
  for (size_t a = 0; a < perm.size(); ++a)
    if (perm[a] != a) {
      moved.push_back(a);
      onto.push_back(perm[a]);
    }
  if (moved.empty())
    return x;
  std::vector<int64_t> one = x.dims;
  one.insert(one.begin(), 1);
  int64_t k = 1;
  for (size_t a : moved)
    k *= mesh->axes[a].size;
  std::vector<int64_t> gathered = one;
  gathered[0] = k;
  std::string r = emit("reshape", {x.name}, nullptr, &one, cur->name + "_block");
  r = emit("all_gather", {r}, {{"axes", axisNames(moved)}, {"dim", 0}}, nullptr, cur->name + "_gather");
  r = emit("shard_slice", {r}, {{"axes", axisNames(onto)}, {"dim", 0}}, nullptr, cur->name + "_pick");
  r = emit("reshape", {r}, nullptr, &x.dims, cur->name);
  return tensor(r, x.type, x.dims);
}

/// Integer ops on token ids. Ids are assumed in [0, rows) of every table they index (the
/// spec's `bound`), so a comparison with a constant that this range decides (JAX's
/// `ids < 0` wrap-around of negative indices) is that constant predicate; ids keep their
/// shape through reshapes and conversions; anything else on ids is unsupported.
Val Translator::idsOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = inst.shape.dims;
  int64_t n = product(dims);
  auto constant = [&](const Val &v, int64_t &c) {
    if (v.kind != Val::Index)
      return false;
    c = v.idx[0].empty() ? 0 : v.idx[0][0];
    for (auto &row : v.idx)
      for (int64_t x : row)
        if (x != c)
          return false;
    return true;
  };
  if (op == "reshape" || op == "bitcast" || op == "copy" || op == "convert" ||
      op == "broadcast") {
    const Val &x = need(in, 1);
    if (product(x.dims) != n)
      unsupported("a broadcast of token ids");
    Val v = x;
    v.dims = dims;
    v.type = inst.shape.type;
    return v;
  }
  if (op == "add" && in.size() == 2) {
    for (int k = 0; k < 2; ++k) {
      int64_t c;
      if (in[k]->kind == Val::Ids && constant(*in[1 - k], c)) {
        Val v = *in[k];
        if (!checkedAdd(v.offset, c, v.offset))
          unsupported("integer overflow in token-id arithmetic");
        v.dims = dims;
        return v;
      }
    }
  }
  if (op == "compare" && in.size() == 2) {
    // ids + offset (in [offset, inf)) against a constant c: decided when the range is
    // on one side of c.
    int k = in[0]->kind == Val::Ids ? 0 : 1;
    int64_t c;
    if (in[1 - k]->kind != Val::Ids && constant(*in[1 - k], c)) {
      std::string dir = attr("direction");
      if (k == 1) {  // c OP ids  ->  ids OP' c
        static const std::map<std::string, std::string> flip = {
            {"LT", "GT"}, {"LE", "GE"}, {"GT", "LT"}, {"GE", "LE"}, {"EQ", "EQ"}, {"NE", "NE"}};
        dir = flip.count(dir) ? flip.at(dir) : dir;
      }
      int64_t lo = in[k]->offset;  // the least value ids + offset takes
      int decided = -1;
      if (dir == "LT" && lo >= c) decided = 0;
      if (dir == "LE" && lo > c) decided = 0;
      if (dir == "GT" && lo > c) decided = 1;
      if (dir == "GE" && lo >= c) decided = 1;
      if (dir == "EQ" && lo > c) decided = 0;
      if (dir == "NE" && lo > c) decided = 1;
      // Against the upper end (a bounds check, `ids <= rows - 1`): decided by the bound,
      // which the gathers fix later; the decision is recorded and checked at the end
      // (every id + offset <= c  iff  bound + offset - 1 <= c).
      int64_t limit;  // the decision holds iff bound <= limit
      if (decided < 0 && (dir == "LE" || dir == "GT") && !__builtin_sub_overflow(c + 1, in[k]->offset, &limit)) {
        decided = dir == "LE" ? 1 : 0;
        boundLimits.push_back({in[k]->name, limit, cur});
      } else if (decided < 0 && (dir == "LT" || dir == "GE") && !__builtin_sub_overflow(c, in[k]->offset, &limit)) {
        decided = dir == "LT" ? 1 : 0;
        boundLimits.push_back({in[k]->name, limit, cur});
      }
      if (decided >= 0) {
        Val v;
        v.kind = Val::Index;
        v.type = inst.shape.type;
        v.dims = dims;
        v.idx.assign(ranks, std::vector<int64_t>(n, decided));
        return v;
      }
    }
    unsupported("a comparison of token ids that their range [0, rows) does not decide");
  }
  if (op == "select" && in.size() == 3) {
    int64_t c;
    if (constant(*in[0], c)) {
      const Val &pick = c ? *in[1] : *in[2];
      if (pick.kind == Val::Ids) {
        Val v = pick;
        v.dims = dims;
        return v;
      }
    }
    unsupported("a select between token ids on a predicate that is not constant");
  }
  unsupported("integer HLO op '" + op + "' on token ids");
}

const Val &Translator::idsOperand(const Val &v) {
  if (v.kind != Val::Ids)
    unsupported("'" + cur->opcode + "' with indices that are not token ids of an input");
  if (v.offset != 0)
    unsupported("'" + cur->opcode + "' with token ids shifted by " + std::to_string(v.offset));
  return v;
}

/// one_hot(ids) as [T, classes]: the embedding of the classes x classes identity.
std::string Translator::oneHot(const Val &ids, int64_t classes) {
  if (classes > 1024)
    unsupported("a one-hot over more than 1024 classes");
  auto it = identities.find(classes);
  if (it == identities.end()) {
    json values = json::array();
    for (int64_t i = 0; i < classes; ++i)
      for (int64_t j = 0; j < classes; ++j)
        values.push_back(i == j ? 1 : 0);
    std::vector<int64_t> shape = {classes, classes};
    it = identities.emplace(classes, emit("literal", {}, {{"values", values}}, &shape,
                                          "identity_" + std::to_string(classes))).first;
  }
  useRows(ids, classes);
  return emit("embedding", {it->second, ids.name}, nullptr, nullptr, cur->name + "_onehot");
}

/// gather in the two forms JAX emits for token ids:
///  - an embedding lookup (jnp.take(table, ids, axis=0)): rows of the table by id;
///  - take_along_axis on the last dim with the other dims as batch dims (the label's
///    log-probability in a cross-entropy): the sum over that dim of x * one_hot(id).
Val Translator::gather(const std::vector<const Val *> &in) {
  if (in.size() != 2)
    malformed("gather takes 2 operands");
  const Val &x = *in[0];
  checkTensor(x);
  const Val &ids = idsOperand(*in[1]);
  std::vector<int64_t> out = dimsOf(), collapsed = attrInts("collapsed_slice_dims"),
                       startMap = attrInts("start_index_map"), sizes = attrInts("slice_sizes"),
                       offsetDims = attrInts("offset_dims"),
                       opBatch = attrInts("operand_batching_dims"),
                       idxBatch = attrInts("start_indices_batching_dims");
  int64_t ivd = ints(attr("index_vector_dim"), "index_vector_dim").at(0);
  int64_t r = x.dims.size(), t = product(ids.dims);
  // the index vector has one component
  if (!(ivd == (int64_t)ids.dims.size() ||
        (ivd >= 0 && ivd < (int64_t)ids.dims.size() && ids.dims[ivd] == 1)))
    unsupported("a gather whose index vectors have more than one component");
  if (r >= 2 && opBatch.empty() && collapsed == std::vector<int64_t>{0} &&
      startMap == std::vector<int64_t>{0} && (int64_t)sizes.size() == r && sizes[0] == 1) {
    bool whole = true;
    for (int64_t d = 1; d < r; ++d)
      whole &= sizes[d] == x.dims[d];
    int64_t lead = out.size() - (r - 1);
    for (int64_t k = 0; k < r - 1; ++k)
      whole &= k < (int64_t)offsetDims.size() && offsetDims[k] == lead + k;
    if (whole && (int64_t)offsetDims.size() == r - 1) {
      std::vector<int64_t> rows = {x.dims[0], product(x.dims) / x.dims[0]};
      std::string table = x.name;
      if (r > 2)
        table = emit("reshape", {table}, nullptr, &rows, cur->name + "_table");
      useRows(ids, x.dims[0]);
      std::string e = emit("embedding", {table, ids.name}, nullptr, nullptr, cur->name);
      std::vector<int64_t> flat = {t, rows[1]};
      if (flat != out)
        e = emit("reshape", {e}, nullptr, &out, cur->name + "_r");
      return tensor(e, x.type, out);
    }
  }
  // take_along_axis over the last dim: batch dims 0..r-2 on both sides, in order.
  std::vector<int64_t> lead(r > 0 ? r - 1 : 0);
  std::iota(lead.begin(), lead.end(), 0);
  if (r >= 1 && opBatch == lead && idxBatch == lead && collapsed == std::vector<int64_t>{r - 1} &&
      startMap == std::vector<int64_t>{r - 1} && offsetDims.empty() &&
      t == product(x.dims) / x.dims[r - 1] && product(out) == t) {
    int64_t v = x.dims[r - 1];
    std::vector<int64_t> flat = {t, v}, col = {t};
    std::string oh = oneHot(ids, v);
    std::string xf = x.dims == flat ? x.name : emit("reshape", {x.name}, nullptr, &flat, cur->name + "_x");
    std::string pick = emit("mul", {xf, oh}, nullptr, nullptr, cur->name + "_pick");
    std::string s = emit("reduce_sum", {pick}, {{"dims", {1}}}, nullptr, cur->name + "_sum");
    if (out != col)
      s = emit("reshape", {s}, nullptr, &out, cur->name);
    return tensor(s, x.type, out);
  }
  unsupported("a gather other than an embedding lookup or take_along_axis on the last dim");
}

/// scatter with an add computation, the adjoints of the two gathers above: rows added
/// by id (embedding_grad), or updates placed at each batch position's id (one-hot
/// times the update). Added to the scattered-into operand unless it is zeros.
Val Translator::scatterAdd(const std::vector<const Val *> &in) {
  if (in.size() != 3)
    unsupported("a variadic scatter");
  if (reductionKind() != "sum")
    unsupported("a scatter that does not add");
  const Val &base = *in[0], &upd = *in[2];
  checkTensor(base);
  checkTensor(upd);
  const Val &ids = idsOperand(*in[1]);
  std::vector<int64_t> window = attrInts("update_window_dims"), inserted = attrInts("inserted_window_dims"),
                       toOperand = attrInts("scatter_dims_to_operand_dims"),
                       inBatch = attrInts("input_batching_dims"),
                       idxBatch = attrInts("scatter_indices_batching_dims");
  int64_t r = base.dims.size(), t = product(ids.dims);
  bool zeros = !base.scalarConst.empty() && floatLiteral(base.scalarConst) == 0.0;
  std::string result;
  std::vector<int64_t> lead(r > 0 ? r - 1 : 0);
  std::iota(lead.begin(), lead.end(), 0);
  if (r >= 2 && inBatch.empty() && inserted == std::vector<int64_t>{0} &&
      toOperand == std::vector<int64_t>{0} && (int64_t)window.size() == r - 1 &&
      product(upd.dims) == t * (product(base.dims) / base.dims[0])) {
    std::vector<int64_t> rows = {base.dims[0], product(base.dims) / base.dims[0]}, flat = {t, rows[1]};
    std::string u = upd.dims == flat ? upd.name : emit("reshape", {upd.name}, nullptr, &flat, cur->name + "_u");
    useRows(ids, base.dims[0]);
    result = emit("embedding_grad", {u, ids.name}, nullptr, &rows, cur->name + "_rows");
    if (rows != base.dims)
      result = emit("reshape", {result}, nullptr, &base.dims, cur->name + "_r");
  } else if (r >= 1 && inBatch == lead && idxBatch == lead &&
             inserted == std::vector<int64_t>{r - 1} && toOperand == std::vector<int64_t>{r - 1} &&
             window.empty() && product(upd.dims) == t && t == product(base.dims) / base.dims[r - 1]) {
    int64_t v = base.dims[r - 1];
    std::vector<int64_t> flat = {t, v}, col = {t};
    std::string oh = oneHot(ids, v);
    std::string u = upd.dims == col ? upd.name : emit("reshape", {upd.name}, nullptr, &col, cur->name + "_u");
    u = emit("broadcast", {u}, {{"dims", {0}}}, &flat, cur->name + "_ub");
    result = emit("mul", {oh, u}, nullptr, nullptr, cur->name + "_place");
    if (flat != base.dims)
      result = emit("reshape", {result}, nullptr, &base.dims, cur->name + "_r");
  } else {
    unsupported("a scatter other than the adjoint of an embedding lookup or of "
                "take_along_axis on the last dim");
  }
  if (!zeros)
    result = emit("add", {base.name, result}, nullptr, nullptr, cur->name);
  return tensor(result, base.type, base.dims);
}

/// while: unrolled. The condition must evaluate to the same constant on every rank
/// (a trip count: scan over layers, over microbatches); each iteration runs the body
/// on the loop state. At most 4096 iterations in all, else unsupported.
Val Translator::whileLoop(const std::vector<const Val *> &in, int depth) {
  const Val &init = need(in, 1);
  auto comp = [&](const char *key) {
    std::string n = attr(key);
    if (!n.empty() && n[0] == '%')
      n.erase(0, 1);
    const hlo::Computation *c = m.find(n);
    if (!c)
      malformed(std::string("while: unknown ") + key + " computation '" + n + "'");
    return c;
  };
  const hlo::Computation *cond = comp("condition"), *body = comp("body");
  const hlo::Instruction *self = cur;
  Val state = init;
  for (;;) {
    Val c = run(*cond, {state}, depth + 1);
    cur = self;
    if (track)
      *track = self;
    if (c.kind != Val::Index || product(c.dims) != 1)
      unsupported("a while loop whose condition is not an integer computation");
    for (auto &row : c.idx)
      if (row[0] != c.idx[0][0])
        unsupported("a while loop whose trip count differs between ranks");
    if (!c.idx[0][0])
      return state;
    if (++iterations > 4096)
      unsupported("while loops of more than 4096 iterations in all (unrolled)");
    state = run(*body, {state}, depth + 1);
    cur = self;
    if (track)
      *track = self;
  }
}

/// base with `update` written at `offsets` (from dim `from` on), by slices and concats.
std::string Translator::replaceBlock(const std::string &base, const std::vector<int64_t> &baseDims,
                                     const std::string &update, const std::vector<int64_t> &updDims,
                                     const std::vector<int64_t> &offsets, size_t from) {
  size_t d = from;
  while (d < baseDims.size() && updDims[d] == baseDims[d])
    ++d;
  if (d == baseDims.size())
    return update;
  int64_t o = offsets[d], u = updDims[d];
  auto slice = [&](int64_t lo, int64_t size) {
    std::vector<int64_t> off(baseDims.size(), 0), sz = baseDims;
    off[d] = lo;
    sz[d] = size;
    return emit("slice", {base}, {{"offsets", off}, {"sizes", sz}}, nullptr, cur->name + "_keep");
  };
  std::vector<int64_t> midDims = baseDims;
  midDims[d] = u;
  std::string mid = replaceBlock(slice(o, u), midDims, update, updDims, offsets, d + 1);
  std::vector<std::string> parts;
  if (o > 0)
    parts.push_back(slice(0, o));
  parts.push_back(mid);
  if (o + u < baseDims[d])
    parts.push_back(slice(o + u, baseDims[d] - o - u));
  if (parts.size() == 1)
    return mid;
  return emit("concat", parts, {{"dim", (int64_t)d}}, nullptr, cur->name);
}

/// dynamic-update-slice with offsets the same on every rank (a loop counter's): the
/// base with the update's block replaced. XLA clamps each offset into
/// [0, dim - update dim].
Val Translator::dynamicUpdateSlice(const std::vector<const Val *> &in) {
  if (in.size() < 2)
    malformed("dynamic-update-slice needs operands");
  const Val &base = *in[0], &upd = *in[1];
  checkTensor(base);
  checkTensor(upd);
  if (in.size() != base.dims.size() + 2 || upd.dims.size() != base.dims.size())
    unsupported("dynamic-update-slice with offsets in one tensor operand");
  std::vector<int64_t> offsets;
  for (size_t d = 0; d < base.dims.size(); ++d) {
    const Val &o = *in[d + 2];
    if (o.kind != Val::Index || !o.dims.empty())
      unsupported("a dynamic-update-slice offset that depends on the data");
    if (upd.dims[d] > base.dims[d])
      malformed("dynamic-update-slice update larger than its base");
    for (auto &row : o.idx)
      if (row[0] != o.idx[0][0])
        unsupported("a dynamic-update-slice whose offsets differ between ranks");
    offsets.push_back(std::clamp<int64_t>(o.idx[0][0], 0, base.dims[d] - upd.dims[d]));
  }
  return tensor(replaceBlock(base.name, base.dims, upd.name, upd.dims, offsets, 0), base.type,
                base.dims);
}

/// select(p, a, b) with a predicate known element by element (a mask from iota and
/// constants, the same on every rank) is p*a + (1-p)*b with p a 0/1 literal: exactly
/// the selection for finite values, which is every value planproof reasons about.
Val Translator::select(const std::vector<const Val *> &in) {
  if (in.size() != 3)
    malformed("select takes 3 operands");
  const Val &p = *in[0];
  if (in[1]->kind == Val::Tensor && in[2]->kind == Val::Tensor && !in[1]->name.empty() &&
      in[1]->name == in[2]->name)
    return *in[1];  // the same value either way, whatever the predicate
  if (p.kind != Val::Index)
    unsupported("a select on a predicate computed from the data");
  std::vector<int64_t> dims = dimsOf();
  int64_t n = product(dims);
  for (auto &row : p.idx)
    if (row != p.idx[0])
      unsupported("a select whose mask differs between ranks");
  auto bit = [&](int64_t e) { return p.idx[0][p.dims.empty() ? 0 : e] != 0; };
  bool all = true, none = true;
  for (int64_t e = 0; e < n; ++e)
    (bit(e) ? none : all) = false;
  // (a fill value that is never selected, NaN for out-of-range indices, is never read)
  if (all) {
    checkTensor(*in[1]);
    return *in[1];
  }
  if (none) {
    checkTensor(*in[2]);
    return *in[2];
  }
  checkTensor(*in[1]);
  checkTensor(*in[2]);
  json mask = json::array(), inverse = json::array();
  for (int64_t e = 0; e < n; ++e) {
    mask.push_back(bit(e) ? 1 : 0);
    inverse.push_back(bit(e) ? 0 : 1);
  }
  std::string m = emit("literal", {}, {{"values", mask}}, &dims, cur->name + "_mask");
  std::string im = emit("literal", {}, {{"values", inverse}}, &dims, cur->name + "_unmask");
  std::string a = emit("mul", {m, in[1]->name}, nullptr, nullptr, cur->name + "_on");
  std::string b = emit("mul", {im, in[2]->name}, nullptr, nullptr, cur->name + "_off");
  return tensor(emit("add", {a, b}, nullptr, nullptr, cur->name), cur->shape.type, dims);
}

Val Translator::indexOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = inst.shape.dims;
  int64_t n = product(dims);
  if (n > 1 << 16)
    unsupported("an integer tensor of more than 2^16 elements (token ids and masks are not "
                "covered yet)");
  Val v;
  v.kind = Val::Index;
  v.type = inst.shape.type;
  v.dims = dims;
  v.idx.assign(ranks, std::vector<int64_t>(n, 0));
  auto operand = [&](size_t i) -> const Val & {
    if (i >= in.size())
      malformed("'" + op + "' has too few operands");
    if (in[i]->kind != Val::Index)
      unsupported("'" + op + "' mixing integer and float values");
    return *in[i];
  };
  if (op == "partition-id") {
    if (!plan)
      unsupported("partition-id in the module before partitioning");
    for (int64_t r = 0; r < ranks; ++r)
      v.idx[r][0] = r;
    return v;
  }
  if (op == "replica-id")
    return v;
  if (op == "constant") {
    std::vector<std::string> els = literalElements(inst.rawOperands);
    if ((int64_t)els.size() != n)
      malformed("a constant with the wrong number of values");
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t e = 0; e < n; ++e)
        v.idx[r][e] = intLiteral(els[e]);
    return v;
  }
  if (op == "iota") {
    int64_t id = ints(attr("iota_dimension"), "iota_dimension").at(0);
    if (id < 0 || id >= (int64_t)dims.size())
      malformed("iota_dimension out of range");
    int64_t inner = 1;
    for (size_t k = id + 1; k < dims.size(); ++k)
      inner *= dims[k];
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t e = 0; e < n; ++e)
        v.idx[r][e] = (e / inner) % dims[id];
    return v;
  }
  if (op == "convert" || op == "copy" || op == "reshape" || op == "bitcast") {
    const Val &x = operand(0);
    if (product(x.dims) != n)
      malformed("'" + op + "' changes the element count");
    v.idx = x.idx;
    return v;
  }
  if (op == "broadcast") {
    const Val &x = operand(0);
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    if (bd.size() != x.dims.size())
      malformed("broadcast dimensions do not match the operand's rank");
    for (size_t k = 0; k < bd.size(); ++k)
      if (bd[k] < 0 || bd[k] >= (int64_t)dims.size() || dims[bd[k]] != x.dims[k])
        malformed("broadcast dimension " + std::to_string(k) + " out of range");
    // result element -> operand element: the operand's dims read at dims[bd[k]]
    std::vector<int64_t> stride(dims.size(), 1);
    for (int k = (int)dims.size() - 2; k >= 0; --k)
      stride[k] = stride[k + 1] * dims[k + 1];
    for (int64_t e = 0; e < n; ++e) {
      int64_t src = 0;
      for (size_t k = 0; k < bd.size(); ++k)
        src = src * x.dims[k] + (e / stride[bd[k]]) % dims[bd[k]];
      for (int64_t r = 0; r < ranks; ++r)
        v.idx[r][e] = x.idx[r][src];
    }
    return v;
  }
  if (op == "dynamic-slice") {
    const Val &t = operand(0);
    if (t.dims.size() != 1 || in.size() != 2 || n != 1)
      unsupported("an integer dynamic-slice other than one entry of a table");
    const Val &o = operand(1);
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t k = std::clamp<int64_t>(o.idx[r][0], 0, t.dims[0] - 1);
      v.idx[r][0] = t.idx[r][k];
    }
    return v;
  }
  static const std::set<std::string> binary = {"add", "subtract", "multiply", "divide",
                                               "remainder", "minimum", "maximum", "compare",
                                               "and", "or"};
  if (binary.count(op)) {
    const Val &a = operand(0), &b = operand(1);
    if (product(a.dims) != n || product(b.dims) != n)
      malformed("'" + op + "' operand shapes disagree");
    std::string dir;
    if (op == "compare")
      dir = attr("direction");
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t e = 0; e < n; ++e) {
        int64_t x = a.idx[r][e], y = b.idx[r][e], z = 0;
        bool ok = true;
        if (op == "add") ok = checkedAdd(x, y, z);
        else if (op == "subtract") ok = !__builtin_sub_overflow(x, y, &z);
        else if (op == "multiply") ok = checkedMul(x, y, z);
        else if (op == "divide" || op == "remainder") {
          if (y == 0)
            unsupported("an integer division by zero");
          z = op == "divide" ? x / y : x % y;
        } else if (op == "minimum") z = std::min(x, y);
        else if (op == "maximum") z = std::max(x, y);
        else if (op == "and") z = x & y;
        else if (op == "or") z = x | y;
        else if (dir == "EQ") z = x == y;
        else if (dir == "NE") z = x != y;
        else if (dir == "LT") z = x < y;
        else if (dir == "LE") z = x <= y;
        else if (dir == "GT") z = x > y;
        else if (dir == "GE") z = x >= y;
        else malformed("unknown compare direction '" + dir + "'");
        if (!ok)
          unsupported("integer overflow in index arithmetic");
        v.idx[r][e] = z;
      }
    return v;
  }
  if (op == "reduce") {
    const Val &x = operand(0), &init = operand(1);
    std::string fn = attr("to_apply");
    const hlo::Computation *c = m.find(fn.substr(fn[0] == '%'));
    if (!c || in.size() != 2)
      unsupported("an integer reduce other than one operand with a computation");
    std::string how = c->root()->opcode;
    if (how != "and" && how != "or" && how != "add" && how != "maximum" && how != "minimum")
      unsupported("an integer reduce by '" + how + "'");
    std::vector<int64_t> rd = ints(attr("dimensions"), "reduce dimensions");
    std::vector<int64_t> stride(x.dims.size(), 1);
    for (int k = (int)x.dims.size() - 2; k >= 0; --k)
      stride[k] = stride[k + 1] * x.dims[k + 1];
    int64_t xn = product(x.dims);
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<bool> seen(n, false);
      for (int64_t e = 0; e < xn; ++e) {
        int64_t o = 0;
        for (size_t d = 0; d < x.dims.size(); ++d)
          if (std::find(rd.begin(), rd.end(), (int64_t)d) == rd.end())
            o = o * x.dims[d] + (e / stride[d]) % x.dims[d];
        int64_t acc = seen[o] ? v.idx[r][o] : init.idx[r][0], y = x.idx[r][e];
        acc = how == "and" ? (acc && y) : how == "or" ? (acc || y) : how == "add" ? acc + y
              : how == "maximum" ? std::max(acc, y) : std::min(acc, y);
        v.idx[r][o] = acc;
        seen[o] = true;
      }
      for (int64_t o = 0; o < n; ++o)
        if (!seen[o])
          v.idx[r][o] = init.idx[r][0];
    }
    return v;
  }
  if (op == "select" || op == "clamp") {
    const Val &a = operand(0), &b = operand(1), &c = operand(2);
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t e = 0; e < n; ++e) {
        auto at = [&](const Val &x) { return x.idx[r][x.dims.empty() ? 0 : e]; };
        v.idx[r][e] = op == "select" ? (at(a) ? at(b) : at(c))
                                     : std::clamp(at(b), at(a), std::max(at(a), at(c)));
      }
    return v;
  }
  unsupported("integer HLO op '" + op + "' (index arithmetic other than +, -, *, /, %, min, "
              "max, compare, select, tables)");
}

//===--- Putting it together --------------------------------------------------===//

std::string located(const hlo::Module &m, const hlo::Instruction *inst, const std::string &what) {
  if (!inst)
    return m.path + ": " + what;
  std::string s = m.path + ":" + std::to_string(inst->line) + ":" + std::to_string(inst->col) +
                  ": " + what + " (`" + inst->name + "`";
  if (!inst->loc.file.empty())
    s += ", from " + inst->loc.file + ":" + std::to_string(inst->loc.line);
  if (!inst->loc.opName.empty())
    s += ", " + inst->loc.opName;
  return s + ")";
}

json layoutJson(const Mesh &mesh, const std::vector<std::vector<size_t>> &axes, size_t rank) {
  json dims = json::array();
  for (size_t d = 0; d < rank; ++d) {
    if (d >= axes.size() || axes[d].empty())
      dims.push_back(nullptr);
    else if (axes[d].size() == 1)
      dims.push_back(mesh.axes[axes[d][0]].name);
    else {
      json l = json::array();
      for (size_t a : axes[d])
        l.push_back(mesh.axes[a].name);
      dims.push_back(l);
    }
  }
  return {{"dims", dims}};
}

/// The layout (per-dim mesh axes) of a value with sharding `sh` and global `dims`.
json layoutOf(const Mesh &mesh, const Sharding &sh, const std::vector<int64_t> &dims) {
  if (sh.kind == Sharding::Replicated)
    return layoutJson(mesh, {}, dims.size());
  if (sh.kind != Sharding::Tiled)
    unsupported(sh.why.empty() ? "a tuple sharding where an array's is needed" : sh.why);
  if (sh.dataRank != dims.size())
    malformed("a sharding of rank " + std::to_string(sh.dataRank) + " on a value of rank " +
              std::to_string(dims.size()));
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] % sh.tiles.dims[d])
      unsupported("dimension " + std::to_string(d) + " of size " + std::to_string(dims[d]) +
                  " split " + std::to_string(sh.tiles.dims[d]) + " ways unevenly (XLA pads it)");
  return layoutJson(mesh, shardingAxes(mesh, sh), dims.size());
}

} // namespace

bool planproof::parseMeshOption(const std::string &text,
                                std::vector<std::pair<std::string, int64_t>> &mesh,
                                std::string &why) {
  mesh.clear();
  for (auto &item : hlo::splitTopLevel(text)) {
    size_t e = item.find('=');
    if (e == std::string::npos || e == 0) {
      why = "expected NAME=SIZE in --mesh, got '" + item + "'";
      return false;
    }
    std::string name = item.substr(0, e);
    for (char c : name)
      if (!std::isalnum((unsigned char)c) && c != '_') {
        why = "mesh axis name '" + name + "' has characters other than letters, digits, '_'";
        return false;
      }
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str() + e + 1, &end, 10);
    if (errno || *end || v < 1 || v > kMaxAxisSize) {
      why = "mesh axis size '" + item.substr(e + 1) + "' is not an integer in [1, 2^20]";
      return false;
    }
    for (auto &[n, s] : mesh)
      if (n == name) {
        why = "mesh axis '" + name + "' given twice";
        return false;
      }
    mesh.push_back({name, v});
  }
  if (mesh.empty()) {
    why = "--mesh needs NAME=SIZE,...";
    return false;
  }
  return true;
}

namespace {
XlaImportStatus translateAll(const hlo::Module &before, const hlo::Module &after,
                             const hlo::Module &refm, const Mesh &mesh,
                             const XlaImportOptions &options,
                             const std::string &beforePath, const std::string &afterPath,
                             std::set<int64_t> *cuts, const hlo::Instruction *&at,
                             const hlo::Module *&where, json &spec);
} // namespace

XlaImportStatus planproof::importXla(const std::string &beforePath, const std::string &beforeText,
                                     const std::string &afterPath, const std::string &afterText,
                                     const XlaImportOptions &options, json &spec,
                                     std::string &message) {
  hlo::Module before, after, refModule;
  hlo::Error perr;
  if (!hlo::parseModule(beforePath, beforeText, before, perr) ||
      !hlo::parseModule(afterPath, afterText, after, perr) ||
      (!options.referenceText.empty() &&
       !hlo::parseModule(options.referencePath, options.referenceText, refModule, perr))) {
    message = perr.str();
    return XlaImportStatus::BadInput;
  }
  const hlo::Module *where = &before;
  const hlo::Instruction *at = nullptr;
  try {
    auto partitions = [&](const hlo::Module &m) {
      auto it = m.attrs.find("num_partitions");
      if (it == m.attrs.end())
        return int64_t(1);
      auto v = ints(it->second, "num_partitions");
      if (v.size() != 1 || v[0] < 1 || v[0] > (1 << 16))
        unsupported("num_partitions " + it->second + " (at most 65536 are covered)");
      return v[0];
    };
    int64_t devices = partitions(after);
    if (partitions(before) != devices)
      malformed("the two modules disagree on num_partitions");
    if (devices < 2)
      unsupported("a module of one partition: nothing was partitioned");
    if (auto it = after.attrs.find("replica_count"); it != after.attrs.end() && trim(it->second) != "1")
      unsupported("replica_count " + it->second + " (only partitions are covered)");

    // 1. The mesh, from every device assignment in both modules.
    MeshBuilder mb(devices);
    for (const hlo::Module *m : {&before, &after}) {
      where = m;
      for (auto &c : m->computations)
        for (auto &inst : c.insts) {
          at = &inst;
          if (auto it = inst.attrs.find("sharding"); it != inst.attrs.end()) {
            Sharding sh = parseSharding(it->second, devices);
            std::vector<const Sharding *> all{&sh};
            for (auto &e : sh.elements)
              all.push_back(&e);
            for (auto *s : all)
              if (s->kind == Sharding::Tiled && !mb.addArray(s->tiles))
                unsupported("a tile assignment that is not a mixed-radix pattern of devices");
          }
          if (inst.attrs.count("replica_groups")) {
            auto groups = parseReplicaGroups(replicaGroupsText(inst), devices);
            if (!mb.addArray(groupsArray(groups, devices)))
              unsupported("replica groups that are not a mixed-radix pattern of devices");
          }
        }
    }
    at = nullptr;
    std::set<int64_t> cuts;
    for (int attempt = 0;; ++attempt) {
      MeshBuilder again = mb;
      again.bounds.insert(cuts.begin(), cuts.end());
      Mesh mesh = again.build(options.mesh);
      try {
        return translateAll(before, after, options.referenceText.empty() ? before : refModule,
                            mesh, options, beforePath, afterPath, &cuts, at, where, spec);
      } catch (const Remesh &) {
        if (attempt >= 16)
          unsupported("the plan's rank-dependent slices need more than 16 cuts of the mesh");
      }
    }
  } catch (const Malformed &e) {
    message = located(*where, at, "error: " + e.what);
    return XlaImportStatus::BadInput;
  } catch (const Unsupported &e) {
    message = located(*where, at, "unsupported: " + e.what);
    return XlaImportStatus::Unsupported;
  }
}

namespace {
XlaImportStatus translateAll(const hlo::Module &before, const hlo::Module &after,
                             const hlo::Module &refm, const Mesh &mesh,
                             const XlaImportOptions &options,
                             const std::string &beforePath, const std::string &afterPath,
                             std::set<int64_t> *cuts, const hlo::Instruction *&at,
                             const hlo::Module *&where, json &spec) {
  int64_t devices = mesh.devices;
  {

    // 2. The reference: the entry before partitioning, parameters named by metadata.
    where = &before;
    const hlo::Computation *bentry = before.entry(), *aentry = after.entry();
    std::vector<const hlo::Instruction *> bparams, aparams;
    auto params = [&](const hlo::Computation *c, std::vector<const hlo::Instruction *> &out) {
      for (auto &inst : c->insts)
        if (inst.opcode == "parameter") {
          at = &inst;
          auto k = ints(inst.rawOperands, "parameter number");
          if (k.size() != 1 || k[0] < 0 || k[0] > 100000)
            malformed("parameter number out of range");
          if ((size_t)k[0] >= out.size())
            out.resize(k[0] + 1, nullptr);
          if (out[k[0]])
            malformed("parameter " + std::to_string(k[0]) + " is defined twice");
          out[k[0]] = &inst;
        }
      for (size_t i = 0; i < out.size(); ++i)
        if (!out[i])
          malformed("parameter " + std::to_string(i) + " is missing");
    };
    params(bentry, bparams);
    where = &after;
    params(aentry, aparams);
    if (aparams.size() != bparams.size())
      malformed("the modules have " + std::to_string(bparams.size()) + " and " +
                std::to_string(aparams.size()) + " parameters");
    // The reference program: the module before partitioning, or a separate one (the
    // single-device step, for shard_map programs whose module before partitioning
    // already runs per shard); its parameters are the same arrays.
    where = &refm;
    const hlo::Computation *rentry = refm.entry();
    std::vector<const hlo::Instruction *> rparams;
    params(rentry, rparams);
    if (rparams.size() != bparams.size())
      malformed("the reference has " + std::to_string(rparams.size()) + " parameters, the " +
                "partitioned program " + std::to_string(bparams.size()));
    for (size_t k = 0; k < rparams.size(); ++k) {
      at = rparams[k];
      if (rparams[k]->shape.str() != bparams[k]->shape.str())
        malformed("reference parameter " + std::to_string(k) + " is " + rparams[k]->shape.str() +
                  ", the partitioned program's " + bparams[k]->shape.str());
    }

    Translator ref(refm, false, &mesh);
    ref.track = &at;
    json rinputs = json::array(), pinputs = json::array();
    std::vector<Val> rargs;
    for (size_t k = 0; k < rparams.size(); ++k) {
      const hlo::Instruction &p = *rparams[k];
      at = &p;
      bool ids = !p.shape.isTuple() && isInt(p.shape.type) && p.shape.type != "pred";
      if (p.shape.isTuple() || (!isFloat(p.shape.type) && !ids))
        unsupported("parameter " + std::to_string(k) + " of type " + p.shape.str() +
                    " (float arrays and integer token ids are covered)");
      std::string name = ref.fresh(p.loc.opName.empty() ? p.name : p.loc.opName);
      Val v;
      v.name = name;
      v.type = p.shape.type;
      v.dims = p.shape.dims;
      if (ids) {
        // Token ids: one i64 vector in the spec (its bound found from the gathers).
        v.kind = Val::Ids;
        rinputs.push_back({{"name", name}, {"shape", {product(p.shape.dims)}}, {"dtype", "i64"}});
      } else {
        rinputs.push_back({{"name", name}, {"shape", p.shape.dims}});
      }
      rargs.push_back(v);
    }
    Val rroot = ref.run(*rentry, rargs, 0);
    ref.checkBoundLimits(ref.bounds, at);
    for (auto &input : rinputs)
      if (input.contains("dtype")) {
        std::string n = input["name"];
        auto b = ref.bounds.find(n);
        if (b == ref.bounds.end())
          unsupported("integer parameter `" + n + "` is not used as the indices of a gather "
                      "(token ids and labels are covered)");
        input["bound"] = b->second;
      }
    at = rentry->root();
    std::vector<Val> routs = rroot.kind == Val::Tuple ? rroot.elements : std::vector<Val>{rroot};
    json routNames = json::array();
    std::set<std::string> inputNames;
    for (auto &v : rargs)
      inputNames.insert(v.name);
    std::set<std::string> seen;
    for (auto &v : routs) {
      if (v.kind != Val::Tensor || v.name.empty())
        unsupported("a result that is not a float array");
      std::string n = v.name;
      if (seen.count(n) || inputNames.count(n)) {  // a distinct value for each result
        n = ref.fresh(v.name + "_out");
        ref.ops.push_back({{"result", n}, {"op", "scale"}, {"operands", {v.name}},
                           {"attrs", {{"factor", 1}}}});
      }
      seen.insert(n);
      routNames.push_back(n);
    }

    // Output layouts: the root's sharding before partitioning.
    where = &before;
    const hlo::Instruction *broot = bentry->root();
    std::vector<Sharding> outSh;
    {
      at = broot;
      auto it = broot->attrs.find("sharding");
      if (it == broot->attrs.end())
        unsupported("the result has no sharding before partitioning");
      Sharding sh = parseSharding(it->second, devices);
      if (sh.tuple)
        outSh = sh.elements;
      else if (rroot.kind == Val::Tuple)
        outSh.assign(routs.size(), sh);
      else
        outSh = {sh};
      if (outSh.size() != routs.size())
        malformed("the result's sharding has " + std::to_string(outSh.size()) +
                  " elements for " + std::to_string(routs.size()) + " results");
    }

    // 3. The plan: the entry after partitioning, on every partition.
    where = &after;
    Translator pl(after, true, &mesh);
    pl.track = &at;
    pl.newBounds = cuts;
    std::vector<Val> pargs;
    for (size_t k = 0; k < aparams.size(); ++k) {
      const hlo::Instruction &p = *aparams[k];
      at = &p;
      const std::string *shText = nullptr;
      if (auto it = p.attrs.find("sharding"); it != p.attrs.end())
        shText = &it->second;
      else if (auto it2 = bparams[k]->attrs.find("sharding"); it2 != bparams[k]->attrs.end())
        shText = &it2->second;
      std::vector<int64_t> global = bparams[k]->shape.dims;
      json layout = shText ? layoutOf(mesh, parseSharding(*shText, devices), global)
                           : layoutJson(mesh, {}, global.size());
      std::vector<int64_t> local = global;
      for (size_t d = 0; d < local.size(); ++d) {
        const json &e = layout["dims"][d];
        std::vector<std::string> names;
        if (e.is_string())
          names.push_back(e.get<std::string>());
        else if (e.is_array())
          for (auto &n : e)
            names.push_back(n.get<std::string>());
        for (auto &n : names)
          for (auto &ax : mesh.axes)
            if (ax.name == n)
              local[d] /= ax.size;
      }
      if (local != p.shape.dims) {
        hlo::Shape want = p.shape;
        want.dims = local;
        malformed("parameter " + std::to_string(k) + " is " + p.shape.str() + ", but its "
                  "sharding gives each partition " + want.str() + " (is this the module after "
                  "partitioning?)");
      }
      std::string name = pl.fresh(p.name);
      Val v;
      v.name = name;
      v.type = p.shape.type;
      v.dims = p.shape.dims;
      std::vector<int64_t> shape = p.shape.dims;
      if (rargs[k].kind == Val::Ids) {
        // The ids as one vector: a split of dim 0 is a split of the vector; a split of
        // any later dim is not a block of it.
        v.kind = Val::Ids;
        for (size_t d = 1; d < global.size(); ++d)
          if (!layout["dims"][d].is_null())
            unsupported("token ids split on dim " + std::to_string(d) + " (only the leading "
                        "dim of ids may be split)");
        layout = {{"dims", json::array({global.empty() ? json(nullptr) : layout["dims"][0]})}};
        shape = {product(p.shape.dims)};
        pl.refBounds[name] = ref.bounds.at(rargs[k].name);
      }
      pargs.push_back(v);
      pinputs.push_back({{"name", name}, {"value", rargs[k].name}, {"layout", layout},
                         {"shape", shape}});
    }
    Val proot = pl.run(*aentry, pargs, 0);
    pl.checkBoundLimits(pl.refBounds, at);
    at = aentry->root();
    std::vector<Val> pouts = proot.kind == Val::Tuple ? proot.elements : std::vector<Val>{proot};
    if (pouts.size() != routs.size())
      malformed("the modules return " + std::to_string(routs.size()) + " and " +
                std::to_string(pouts.size()) + " results");
    json poutputs = json::array();
    for (size_t i = 0; i < pouts.size(); ++i) {
      if (pouts[i].kind != Val::Tensor || pouts[i].name.empty())
        unsupported("a result that is not a float array");
      where = &before;
      at = broot;
      json layout = layoutOf(mesh, outSh[i], routs[i].dims);
      poutputs.push_back({{"name", pouts[i].name}, {"value", routNames[i]}, {"layout", layout}});
    }

    json axes = json::array();
    for (auto &a : mesh.axes)
      axes.push_back({{"name", a.name}, {"size", a.size}});
    spec = json::object();
    spec["planproof"] = 1;
    spec["description"] = options.description.empty()
                              ? "imported from XLA's SPMD partitioner: " + beforePath + " -> " + afterPath
                              : options.description;
    spec["reference"] = {{"inputs", rinputs}, {"ops", ref.ops}, {"outputs", routNames}};
    spec["plan"] = {{"mesh", {{"name", "mesh"}, {"axes", axes}}},
                    {"inputs", pinputs},
                    {"ops", pl.ops},
                    {"outputs", poutputs}};
    return XlaImportStatus::Ok;
  }
}
} // namespace
