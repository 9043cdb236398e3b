//===- XlaMesh.cpp - device assignments of XLA programs as a mesh -------------===//
//
// See XlaMesh.h. Every device array the importer reads is re-derived from the mesh
// axes it is translated into and compared, so an assignment that the mesh does not
// express is unsupported, never mistranslated.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaMesh.h"

#include "Support/Limits.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <numeric>

namespace planproof::xla {

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
  // Distinct devices of the module: an id out of range or twice is no device array.
  std::vector<bool> seen(devices, false);
  for (int64_t id : a.ids) {
    if (id < 0 || id >= devices)
      malformed("device id " + std::to_string(id) + " in a device list of a module of " +
                std::to_string(devices) + " partitions");
    if (seen[id])
      malformed("device id " + std::to_string(id) + " appears twice in a device list");
    seen[id] = true;
  }
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

//===--- Shardings ------------------------------------------------------------===//

Sharding parseSharding(const std::string &raw, int64_t devices, int depth) {
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

namespace {

/// The device ids of mesh replica groups from `rest` (the text after the mesh; the ids
/// are consumed from it): `, device_ids=([2,4]T(1,0))` or `, device_ids=(0,2,...)`: mesh
/// position k (row major) is device ids[k]; without it, device k (and no ids).
std::vector<int64_t> meshDeviceIds(std::string &rest, int64_t devices) {
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
  return ids;
}

/// The groups of a mesh of axis `sizes` (row major) that vary over the axes `sel`:
/// one group per position on the other axes; device ids[k] at mesh position k.
std::vector<std::vector<int64_t>> groupsOverAxes(const std::vector<int64_t> &sizes,
                                                 const std::vector<size_t> &sel,
                                                 const std::vector<int64_t> &ids,
                                                 int64_t devices) {
  std::vector<std::vector<int64_t>> groups;
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

/// `mesh['a'=2,'b'=4] {'a'}`, optionally with device_ids, as explicit lists.
std::vector<std::vector<int64_t>> meshReplicaGroups(const std::string &t, int64_t devices) {
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
  std::vector<int64_t> ids = meshDeviceIds(rest, devices);
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
  return groupsOverAxes(sizes, sel, ids, devices);
}

} // namespace

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
  if (t.rfind("mesh[", 0) == 0)  // mesh['a'=2,'b'=4] {'a'}
    return meshReplicaGroups(t, devices);
  if (t.front() != '{' || t.back() != '}')
    malformed("malformed replica groups '" + t.substr(0, 60) + "'");
  // {{0,1},{2,3}}: every group braced. A flat {0,1} is not XLA's syntax; read as groups
  // of one device each it would make every collective a no-op.
  for (auto &g : hlo::splitTopLevel(t.substr(1, t.size() - 2))) {
    std::string group = trim(g);
    if (group.size() < 2 || group.front() != '{' || group.back() != '}')
      malformed("malformed replica groups '" + t.substr(0, 60) +
                "': each group is a braced list of device ids, {{0,1},{2,3}}");
    groups.push_back(ints(group, "replica group"));
  }
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

} // namespace planproof::xla
