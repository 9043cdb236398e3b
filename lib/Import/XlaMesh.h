//===- XlaMesh.h - device assignments of XLA programs as a mesh --*- C++ -*-===//
//
// The part of the XLA importer (XlaImport.h) that reads where things run: every
// sharding's tile assignment and every collective's replica groups (all of XLA's
// syntaxes) as device arrays, the mixed-radix digit patterns ("pieces") of device ids
// along their dimensions, the one mesh of axes that all of them cut together, and the
// checked translation of an assignment back into mesh axes. Also the two exceptions the
// importer throws (unsupported input, malformed input) and small parsing helpers.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_XLAMESH_H
#define PLANPROOF_IMPORT_XLAMESH_H

#include "Import/Hlo.h"

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace planproof::xla {

/// Thrown for what the importer does not cover (message located by the caller).
struct Unsupported {
  std::string what;
};

/// Thrown for malformed input.
struct Malformed {
  std::string what;
};

[[noreturn]] inline void unsupported(const std::string &w) { throw Unsupported{w}; }
[[noreturn]] inline void malformed(const std::string &w) { throw Malformed{w}; }

/// `s` without leading and trailing blanks.
std::string trim(const std::string &s);
/// An integer list (`{1,0}` or `1,0`); malformed input otherwise.
std::vector<int64_t> ints(const std::string &text, const char *what);
/// The product of sizes, overflow-checked (malformed past 2^40).
int64_t product(const std::vector<int64_t> &dims);

/// A row-major array of device ids.
struct DeviceArray {
  std::vector<int64_t> dims;
  std::vector<int64_t> ids;
};

/// One digit of a mixed-radix pattern: `count` values `stride` apart.
struct Piece {
  int64_t count, stride;
};

/// The pieces (major first) along dim `d` of `a`, or false when the ids along that dim
/// are not a mixed-radix pattern with positive strides.
bool dimPieces(const DeviceArray &a, size_t d, std::vector<Piece> &pieces);

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

/// Thrown when the plan needs mesh axes cut finer than the shardings say.
struct Remesh {};

struct Sharding {
  enum Kind { Replicated, Tiled, Other } kind = Other;
  std::string why;            // for Other
  DeviceArray tiles;          // Tiled: data dims, then the replicated dim if any
  size_t dataRank = 0;
  std::vector<Sharding> elements;  // a tuple sharding
  bool tuple = false;
};

/// `[t...]<=[R...]T(p...)` or `[t...]d0,d1,...` at s[pos] (after "devices="); advances pos.
DeviceArray parseTileAssignment(const std::string &s, size_t &pos, int64_t devices);
/// A sharding attribute (`{replicated}`, `{devices=...}`, tuple shardings).
Sharding parseSharding(const std::string &raw, int64_t devices, int depth = 0);
/// The replica groups of `inst` as written, with the mesh syntax's `device_ids` joined on.
std::string replicaGroupsText(const hlo::Instruction &inst);
/// Replica groups in any of XLA's syntaxes, as explicit lists.
std::vector<std::vector<int64_t>> parseReplicaGroups(const std::string &raw, int64_t devices);
/// The groups as a device array [groups, members], checked to partition the devices.
DeviceArray groupsArray(const std::vector<std::vector<int64_t>> &groups, int64_t devices);
/// The mesh axes, in group order, that a collective's groups run over (checked).
std::vector<size_t> groupAxes(const Mesh &mesh, const std::vector<std::vector<int64_t>> &groups);
/// A tiled sharding's mesh axes per data dim, major first (checked).
std::vector<std::vector<size_t>> shardingAxes(const Mesh &mesh, const Sharding &sh);
/// The mesh cut into axes of prime size, for finding sub-axes.
Mesh primeRefined(const Mesh &m);
/// Whether offsets by rank are `size` x the rank's index over some mesh axes and tile a
/// dimension of `extent`: "" (axes written to `axes`) or why not.
std::string blockAxes(const Mesh &mesh, const std::vector<int64_t> &off, int64_t size,
                      int64_t extent, std::vector<size_t> &axes);
/// The axis map of a permutation of ranks that permutes mesh coordinates; empty if none.
std::vector<size_t> coordinatePermutation(const Mesh &mesh, const std::vector<int64_t> &src);

} // namespace planproof::xla

#endif
