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
// The steps live in XlaMesh (1), XlaTranslator (2, 3); this file puts them together.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaImport.h"

#include "Import/Hlo.h"
#include "Import/XlaMesh.h"
#include "Import/XlaTranslator.h"
#include "Support/Limits.h"

#include <cerrno>
#include <cstdlib>
#include <set>

using namespace planproof;
using namespace planproof::xla;

namespace {

//===--- Putting it together --------------------------------------------------===//

/// `what`, at `inst` of `m` (at `m` when there is no instruction), with the name of
/// the instruction and the framework source it came from.
Diagnostic located(const hlo::Module &m, const hlo::Instruction *inst, const std::string &what,
                   const std::string &headerAttr = "") {
  if (auto it = m.attrAt.find(headerAttr); !inst && it != m.attrAt.end())
    return Diagnostic{SourceLoc{m.path, it->second.first, it->second.second}, what, {}, ""};
  if (!inst)
    return Diagnostic{SourceLoc{m.path}, what, {}, ""};
  std::string s = what + " (`" + inst->name + "`";
  if (!inst->loc.file.empty())
    s += ", from " + inst->loc.file + ":" + std::to_string(inst->loc.line);
  if (!inst->loc.opName.empty())
    s += ", " + inst->loc.opName;
  return Diagnostic{SourceLoc{m.path, (unsigned)inst->line, (unsigned)inst->col}, s + ")", {}, ""};
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

bool planproof::parseOutputNames(const std::string &text, std::vector<std::string> &names,
                                 std::string &why) {
  names.clear();
  std::set<std::string> seen;
  size_t from = 0;
  while (true) {
    size_t comma = text.find(',', from);
    std::string name = text.substr(from, comma == std::string::npos ? std::string::npos
                                                                    : comma - from);
    bool ok = !name.empty() && name.size() <= 200 &&
              (std::isalpha((unsigned char)name[0]) || name[0] == '_');
    for (char c : name)
      ok &= std::isalnum((unsigned char)c) || c == '_';
    if (!ok) {
      why = "--output-names takes identifiers (letters, digits, '_'; not starting with a "
            "digit), not '" + name.substr(0, 60) + "'";
      return false;
    }
    if (!seen.insert(name).second) {
      why = "--output-names gives '" + name + "' twice";
      return false;
    }
    names.push_back(name);
    if (comma == std::string::npos)
      return true;
    from = comma + 1;
  }
}

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
                                     Diagnostics &diags) {
  hlo::Module before, after, refModule;
  Diagnostic perr;
  if (!hlo::parseModule(beforePath, beforeText, before, perr) ||
      !hlo::parseModule(afterPath, afterText, after, perr) ||
      (!options.referenceText.empty() &&
       !hlo::parseModule(options.referencePath, options.referenceText, refModule, perr))) {
    diags.add(perr);
    return XlaImportStatus::BadInput;
  }
  const hlo::Module *where = &before;
  const hlo::Instruction *at = nullptr;
  std::string headerAttr; // a header attribute the error is about (its place)
  try {
    // (Hlo.cpp checked the syntax: a decimal integer in [1, 2^31].)
    auto partitions = [&](const hlo::Module &m) {
      where = &m;
      headerAttr = "num_partitions";
      auto it = m.attrs.find("num_partitions");
      if (it == m.attrs.end())
        return int64_t(1);
      int64_t n = std::stoll(it->second);
      if (n > (1 << 16))
        unsupported("num_partitions " + it->second + " (at most 65536 are covered)");
      return n;
    };
    int64_t devices = partitions(after);
    if (partitions(before) != devices)
      malformed("the two modules disagree on num_partitions (" + std::to_string(devices) +
                " after partitioning)");
    where = &after;
    if (devices < 2)
      unsupported("a module of one partition: nothing was partitioned");
    headerAttr = "replica_count";
    if (auto it = after.attrs.find("replica_count"); it != after.attrs.end() && trim(it->second) != "1")
      unsupported("replica_count " + it->second + " (only partitions are covered)");
    headerAttr.clear();
    // Counted once per computation over the call DAG: a dump that inlines past what a
    // translation may run is refused before anything is translated.
    for (const hlo::Module *m : {&before, &after, options.referenceText.empty() ? nullptr : &refModule}) {
      if (!m)
        continue;
      where = m;
      std::map<const hlo::Computation *, int64_t> memo;
      if (xla::inlinedSize(*m, *m->entry(), memo) > xla::kMaxTranslated)
        unsupported("a program of more than " + std::to_string(xla::kMaxTranslated) +
                    " instructions once its calls are inlined");
    }
    where = &before;

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
    diags.add(located(*where, at, e.what, headerAttr));
    return XlaImportStatus::BadInput;
  } catch (const Unsupported &e) {
    diags.add(located(*where, at, e.what, headerAttr));
    return XlaImportStatus::Unsupported;
  }
}

namespace {

/// The per-partition dims of a value of `global` dims laid out by `layout`.
std::vector<int64_t> localDims(const Mesh &mesh, const json &layout,
                               const std::vector<int64_t> &global) {
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
  return local;
}

/// The translation of both modules on one mesh, step by step, into one spec. `where`
/// and `at` follow the module and the instruction being read, for error messages.
struct SpecTranslation {
  const hlo::Module &before, &after, &refm;
  const Mesh &mesh;
  const hlo::Instruction *&at;
  const hlo::Module *&where;
  int64_t devices = mesh.devices;

  const hlo::Computation *bentry = nullptr, *aentry = nullptr, *rentry = nullptr;
  std::vector<const hlo::Instruction *> bparams, aparams, rparams;
  Translator ref{refm, false, &mesh}, pl{after, true, &mesh};
  json rinputs = json::array(), pinputs = json::array();
  std::vector<Val> rargs, pargs;
  Val rroot;
  std::vector<Val> routs;
  json routNames = json::array();
  const hlo::Instruction *broot = nullptr;
  std::vector<Sharding> outSh;
  json poutputs = json::array();

  SpecTranslation(const hlo::Module &before, const hlo::Module &after, const hlo::Module &refm,
                  const Mesh &mesh, const hlo::Instruction *&at, const hlo::Module *&where,
                  std::map<size_t, int64_t> &ignored)
      : before(before), after(after), refm(refm), mesh(mesh), at(at), where(where),
        ignored(ignored) {
    ref.lateIgnored = pl.lateIgnored = &late;
  }

  /// The parameters of labels found late (MoreIgnored): ignorable next time.
  void noteLate() {
    for (auto &[name, c] : late)
      for (size_t k = 0; k < rargs.size() || k < pargs.size(); ++k)
        if ((k < rargs.size() && rargs[k].name == name) || (k < pargs.size() && pargs[k].name == name))
          ignored.emplace(k, c);
  }

  /// The parameters of computation `c` by number, each defined once, none missing.
  void collectParams(const hlo::Computation *c, std::vector<const hlo::Instruction *> &out) {
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
  }

  /// The entries' parameters: the same arrays in all three modules.
  void matchParams() {
    where = &before;
    bentry = before.entry();
    aentry = after.entry();
    collectParams(bentry, bparams);
    where = &after;
    collectParams(aentry, aparams);
    if (aparams.size() != bparams.size())
      malformed("the modules have " + std::to_string(bparams.size()) + " and " +
                std::to_string(aparams.size()) + " parameters");
    // The reference program: the module before partitioning, or a separate one (the
    // single-device step, for shard_map programs whose module before partitioning
    // already runs per shard); its parameters are the same arrays.
    where = &refm;
    rentry = refm.entry();
    collectParams(rentry, rparams);
    if (rparams.size() != bparams.size())
      malformed("the reference has " + std::to_string(rparams.size()) + " parameters, the " +
                "partitioned program " + std::to_string(bparams.size()));
    for (size_t k = 0; k < rparams.size(); ++k) {
      at = rparams[k];
      if (rparams[k]->shape.str() != bparams[k]->shape.str())
        malformed("reference parameter " + std::to_string(k) + " is " + rparams[k]->shape.str() +
                  ", the partitioned program's " + bparams[k]->shape.str());
    }
  }

  /// Labels that a module compares with a negative constant (XlaLabels.cpp), by
  /// parameter number, with that constant (the first module's, if they differ); those
  /// found by an earlier attempt come in with it.
  std::map<size_t, int64_t> &ignored;
  std::map<std::string, int64_t> late;
  /// The reference's input of each plan ids input.
  std::map<std::string, std::string> refNameOf;

  void findIgnoredLabels() {
    const hlo::Computation *entries[] = {rentry, bentry, aentry};
    const std::vector<const hlo::Instruction *> *params[] = {&rparams, &bparams, &aparams};
    for (int e = 0; e < 3; ++e) {
      std::map<std::string, int64_t> found = ignoredLabels(*entries[e]);
      for (size_t k = 0; k < params[e]->size(); ++k)
        if (auto it = found.find((*params[e])[k]->name); it != found.end())
          ignored.emplace(k, it->second);
    }
  }

  /// Each input's `where` puts one class on ignored labels, in the reference and the
  /// plan alike (`reference`: the reference's, by input, once its own are checked).
  void checkFills(const Translator &t, const std::map<std::string, int64_t> &bound,
                  std::map<std::string, int64_t> &reference) {
    for (auto &f : t.fills) {
      at = f.at;
      auto b = bound.find(f.ids);
      if (b == bound.end() || f.value >= b->second)
        unsupported("`where` puts " + std::to_string(f.value) + " on the ignored labels, "
                    "which is not one of their classes");
      std::string key = refNameOf.count(f.ids) ? refNameOf.at(f.ids) : f.ids;
      auto [it, fresh] = reference.emplace(key, f.value);
      if (!fresh && it->second != f.value)
        unsupported("`where` puts " + std::to_string(f.value) + " on the ignored labels "
                    "here and " + std::to_string(it->second) + " elsewhere (the reference "
                    "or the plan): the class an ignored token reads must be one");
    }
  }
  std::map<std::string, int64_t> fillOf;

  /// The reference's inputs: float arrays and integer token ids.
  void referenceInputs() {
    ref.track = &at;
    findIgnoredLabels();
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
      if (ids && p.shape.dims.empty()) {
        // A scalar integer: a step count (optax's `count`), an index input.
        v.kind = Val::Count;
        rinputs.push_back({{"name", name}, {"dtype", "index"}});
      } else if (ids) {
        // Token ids: one i64 vector in the spec (its bound found from the gathers).
        v.kind = Val::Ids;
        v.input = name;
        rinputs.push_back({{"name", name}, {"shape", {product(p.shape.dims)}}, {"dtype", "i64"}});
        if (auto g = ignored.find(k); g != ignored.end()) {
          // Labels that may be ignored: which are kept, a second vector of 0s and 1s.
          v.ignorable = true;
          v.ignore = g->second;
          v.keptIds = ref.fresh(name + "_kept");
          ref.bounds[v.keptIds] = 2;
          rinputs.push_back({{"name", v.keptIds}, {"shape", {product(p.shape.dims)}}, {"dtype", "i64"}});
        }
      } else {
        rinputs.push_back({{"name", name}, {"shape", p.shape.dims}});
      }
      rargs.push_back(v);
    }
  }

  /// Runs the reference; the ids' bounds, and its results (a distinct value for each).
  void runReference() {
    rroot = ref.run(*rentry, rargs, 0);
    ref.checkBoundLimits(ref.bounds, at);
    checkFills(ref, ref.bounds, fillOf);
    for (auto &input : rinputs)
      if (input.contains("dtype") && input["dtype"] == "i64") {
        std::string n = input["name"];
        auto b = ref.bounds.find(n);
        if (b == ref.bounds.end())
          unsupported("integer parameter `" + n + "` is not used as the indices of a gather "
                      "(token ids and labels are covered)");
        input["bound"] = b->second;
      }
    at = rentry->root();
    routs = rroot.kind == Val::Tuple ? rroot.elements : std::vector<Val>{rroot};
    std::set<std::string> inputNames;
    for (auto &v : rargs)
      inputNames.insert(v.name);
    std::set<std::string> seen;
    for (auto &v : routs) {
      if ((v.kind != Val::Tensor && v.kind != Val::Count) || v.name.empty())
        unsupported("a result that is not a float array or a step count");
      std::string n = v.name;
      if ((seen.count(n) || inputNames.count(n)) && v.kind == Val::Count) {
        // (the count returned as it came: count + 0, a value of its own)
        std::string zero = ref.fresh(v.name + "_zero");
        n = ref.fresh(v.name + "_out");
        ref.ops.push_back({{"result", zero}, {"op", "arith.constant"}, {"attrs", {{"value", 0}}}});
        ref.ops.push_back({{"result", n}, {"op", "arith.addi"}, {"operands", {v.name, zero}}});
      } else if (seen.count(n) || inputNames.count(n)) {  // a distinct value for each result
        n = ref.fresh(v.name + "_out");
        ref.ops.push_back({{"result", n}, {"op", "scale"}, {"operands", {v.name}},
                           {"attrs", {{"factor", 1}}}});
      }
      seen.insert(n);
      routNames.push_back(n);
    }
  }

  /// Output layouts: the root's sharding before partitioning.
  void outputShardings() {
    where = &before;
    broot = bentry->root();
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

  /// The plan's parameter `k`: its layout (from its sharding, else the one before
  /// partitioning), which must give each partition its shape.
  void planInput(size_t k) {
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
    std::vector<int64_t> local = localDims(mesh, layout, global);
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
    if (rargs[k].kind == Val::Count) {  // one integer, the same on every rank
      v.kind = Val::Count;
      pargs.push_back(v);
      pinputs.push_back({{"name", name}, {"value", rargs[k].name}});
      return;
    }
    if (rargs[k].kind == Val::Ids) {
      // The ids as one vector: a split of dim 0 is a split of the vector; a split of
      // any later dim is not a block of it.
      v.kind = Val::Ids;
      v.input = name;
      for (size_t d = 1; d < global.size(); ++d)
        if (!layout["dims"][d].is_null())
          unsupported("token ids split on dim " + std::to_string(d) + " (only the leading "
                      "dim of ids may be split)");
      layout = {{"dims", json::array({global.empty() ? json(nullptr) : layout["dims"][0]})}};
      shape = {product(p.shape.dims)};
      pl.refBounds[name] = ref.bounds.at(rargs[k].name);
      refNameOf[name] = rargs[k].name;
    }
    std::string kept;
    if (rargs[k].ignorable) {  // labels that may be ignored: the kept vector alike
      v.ignorable = true;
      v.ignore = rargs[k].ignore;
      v.keptIds = kept = pl.fresh(name + "_kept");
      pl.refBounds[kept] = 2;
    }
    pargs.push_back(v);
    pinputs.push_back({{"name", name}, {"value", rargs[k].name}, {"layout", layout},
                       {"shape", shape}});
    if (!kept.empty())
      pinputs.push_back({{"name", kept}, {"value", rargs[k].keptIds}, {"layout", layout},
                         {"shape", shape}});
  }

  /// 3. The plan: the entry after partitioning, on every partition; its results are the
  /// reference's, laid out by the shardings before partitioning.
  void translatePlan(std::set<int64_t> *cuts) {
    where = &after;
    pl.track = &at;
    pl.newBounds = cuts;
    for (size_t k = 0; k < aparams.size(); ++k)
      planInput(k);
    Val proot = pl.run(*aentry, pargs, 0);
    pl.checkBoundLimits(pl.refBounds, at);
    checkFills(pl, pl.refBounds, fillOf);
    at = aentry->root();
    std::vector<Val> pouts = proot.kind == Val::Tuple ? proot.elements : std::vector<Val>{proot};
    if (pouts.size() != routs.size())
      malformed("the modules return " + std::to_string(routs.size()) + " and " +
                std::to_string(pouts.size()) + " results");
    for (size_t i = 0; i < pouts.size(); ++i) {
      if (pouts[i].kind == Val::Count && routs[i].kind == Val::Count) {  // an index: no layout
        poutputs.push_back({{"name", pouts[i].name}, {"value", routNames[i]}});
        continue;
      }
      if (pouts[i].kind != Val::Tensor || pouts[i].name.empty())
        unsupported("a result that is not a float array");
      if (!pouts[i].runs.empty())
        unsupported("a result that is a lookup in a vocabulary shard's rows not zeroed outside "
                    "the shard (XLA's gather clamps those ids into the shard)");
      where = &before;
      at = broot;
      json layout = layoutOf(mesh, outSh[i], routs[i].dims);
      poutputs.push_back({{"name", pouts[i].name}, {"value", routNames[i]}, {"layout", layout}});
    }
  }

  /// Gives the reference's loss normalizer its role, as planproof.torch does: the ops
  /// computing a divisor, on the way to a scalar result (the loss), that reads no float
  /// input -- a token count from the labels, a batch size -- carry "role":
  /// "loss-normalization", so that a plan dividing by another count (a rank's or a
  /// microbatch's own tokens) is reported as a loss-normalization error.
  void markLossNormalization() {
    std::map<std::string, size_t> producer;
    for (size_t i = 0; i < ref.ops.size(); ++i)
      producer[ref.ops[i]["result"].get<std::string>()] = i;
    std::set<std::string> floats; // values that read a float input
    for (const json &in : rinputs)
      if (!in.contains("dtype"))
        floats.insert(in["name"].get<std::string>());
    auto operands = [&](size_t i) {
      std::vector<std::string> out;
      if (ref.ops[i].contains("operands"))
        for (const json &o : ref.ops[i]["operands"])
          out.push_back(o.get<std::string>());
      return out;
    };
    for (size_t i = 0; i < ref.ops.size(); ++i) // ops are in program order
      for (const std::string &o : operands(i))
        if (floats.count(o))
          floats.insert(ref.ops[i]["result"].get<std::string>());
    std::vector<std::string> todo, divisors;
    for (size_t i = 0; i < routs.size(); ++i)
      if (routs[i].kind == Val::Tensor && routs[i].dims.empty())
        todo.push_back(routNames[i].get<std::string>());
    std::set<std::string> onPath, marked;
    while (!todo.empty()) {
      std::string v = todo.back();
      todo.pop_back();
      auto it = producer.find(v);
      if (it == producer.end() || !onPath.insert(v).second)
        continue;
      std::vector<std::string> ops = operands(it->second);
      if (ref.ops[it->second]["op"] == "div" && ops.size() == 2 && !floats.count(ops[1]))
        divisors.push_back(ops[1]);
      todo.insert(todo.end(), ops.begin(), ops.end());
    }
    while (!divisors.empty()) {
      std::string v = divisors.back();
      divisors.pop_back();
      auto it = producer.find(v);
      if (it == producer.end() || !marked.insert(v).second)
        continue;
      ref.ops[it->second]["role"] = "loss-normalization";
      for (const std::string &o : operands(it->second))
        divisors.push_back(o);
    }
  }

  /// Gives the results the names `--output-names` gives them (the step's pytree paths):
  /// each a copy of its value under that name (scale by 1; a step count plus 0), so
  /// reports say which result is wrong. (A name a value already has gets a suffix.)
  void nameOutputs(const std::vector<std::string> &names) {
    if (names.empty())
      return;
    if (names.size() != routs.size())
      malformed("--output-names gives " + std::to_string(names.size()) + " names for " +
                std::to_string(routs.size()) + " results");
    for (size_t i = 0; i < routs.size(); ++i) {
      std::string from = routNames[i], to = ref.fresh(names[i]);
      if (routs[i].kind == Val::Count) {
        std::string zero = ref.fresh(to + "_zero");
        ref.ops.push_back({{"result", zero}, {"op", "arith.constant"}, {"attrs", {{"value", 0}}}});
        ref.ops.push_back({{"result", to}, {"op", "arith.addi"}, {"operands", {from, zero}}});
      } else {
        ref.ops.push_back({{"result", to}, {"op", "scale"}, {"operands", {from}},
                           {"attrs", {{"factor", 1}}}});
      }
      routNames[i] = to;
      for (json &o : poutputs)
        if (o["value"] == from)
          o["value"] = to;
    }
  }

  void writeSpec(const XlaImportOptions &options, const std::string &beforePath,
                 const std::string &afterPath, json &spec) {
    nameOutputs(options.outputNames);
    markLossNormalization();
    json axes = json::array();
    for (auto &a : mesh.axes)
      axes.push_back({{"name", a.name}, {"size", a.size}});
    spec = json::object();
    spec["planproof"] = 1;
    spec["description"] = options.description.empty()
                              ? "imported from XLA's SPMD partitioner: " + beforePath + " -> " +
                                    afterPath
                              : options.description;
    spec["reference"] = {{"inputs", rinputs}, {"ops", ref.ops}, {"outputs", routNames}};
    spec["plan"] = {{"mesh", {{"name", "mesh"}, {"axes", axes}}},
                    {"inputs", pinputs},
                    {"ops", pl.ops},
                    {"outputs", poutputs}};
    // Labels whose comparisons tell labels below 0 apart: modelled as the classes and
    // one ignored label (XlaLabels.cpp), which the verdict then assumes.
    json assumed = json::array();
    std::set<std::string> said;
    for (const Translator *t : {&ref, &pl})
      for (auto &[input, g] : t->assumedIgnored) {
        std::string name = refNameOf.count(input) ? refNameOf.at(input) : input;
        if (said.insert(name).second)
          assumed.push_back("every label in `" + name + "` is a class or " + std::to_string(g) +
                            " (the program compares labels with constants that would tell "
                            "other negative labels apart)");
      }
    if (!assumed.empty())
      spec["assumptions"] = assumed;
  }
};

XlaImportStatus translateAll(const hlo::Module &before, const hlo::Module &after,
                             const hlo::Module &refm, const Mesh &mesh,
                             const XlaImportOptions &options,
                             const std::string &beforePath, const std::string &afterPath,
                             std::set<int64_t> *cuts, const hlo::Instruction *&at,
                             const hlo::Module *&where, json &spec) {
  std::map<size_t, int64_t> ignored;
  for (;;) {
    SpecTranslation t(before, after, refm, mesh, at, where, ignored);
    size_t known = ignored.size();
    try {
      // 2. The reference: the entry before partitioning, parameters named by metadata.
      t.matchParams();
      t.referenceInputs();
      t.runReference();
      t.ref.labelsOrderTested();
      t.outputShardings();
      t.translatePlan(cuts);
      t.pl.labelsOrderTested();
    } catch (const MoreIgnored &) {
      t.noteLate();
      if (ignored.size() == known)  // (each attempt finds another input)
        unsupported("labels compared with an ignored label whose input is not found");
      continue;
    }
    t.writeSpec(options, beforePath, afterPath, spec);
    return XlaImportStatus::Ok;
  }
}
} // namespace
