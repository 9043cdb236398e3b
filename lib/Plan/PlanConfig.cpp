//===- PlanConfig.cpp - a model configuration and --parallel text -*- C++ -*-===//
//
// What `planproof plan` is asked for: the model (a JSON file, errors naming the JSON
// path) and the parallel degrees and options (`--parallel` text). The generator that
// writes their spec is PlanGen.cpp.
//
//===----------------------------------------------------------------------===//
#include "Plan/PlanGen.h"
#include "Support/Input.h"
#include "Support/JsonDocument.h"
#include "Support/Printable.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

using nlohmann::json;

namespace planproof::plangen {

bool readModel(const std::string &path, Model &m, Diagnostics &diags) {
  std::string text;
  if (!readInputFile(path, text, diags) || !checkNesting(path, text, Syntax::Json, diags))
    return false;
  JsonDocument doc;
  if (!doc.parse(path, text, diags))
    return false;
  const json &j = doc.root;
  // Every error names the field's line, column and path.
  auto error = [&](const std::string &ptr, const std::string &message) {
    return doc.error(diags, ptr, message);
  };
  if (!j.is_object())
    return error("", "a model configuration is a JSON object");
  auto field = [&](const json &o, const std::string &ptr, const char *key, int64_t &out,
                   bool required) {
    if (!o.contains(key)) {
      if (required)
        error(ptr + "/" + key, "missing (an integer)");
      return !required;
    }
    const json &v = o[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 40))
      return error(ptr + "/" + key, "must be an integer in [0, 2^40]");
    out = v.get<int64_t>();
    return true;
  };
  if (j.contains("name") && !j["name"].is_string())
    return error("/name", "must be a string");
  // (The generated plan writes it into a comment line.)
  if (j.contains("name"))
    if (std::string why = nameProblem(j["name"].get<std::string>()); !why.empty())
      return error("/name", "not a name: " + why);
  m.name = j.contains("name") ? j["name"].get<std::string>() : printable(path, false);
  if (!field(j, "", "layers", m.layers, true) || !field(j, "", "hidden", m.hidden, true) ||
      !field(j, "", "heads", m.heads, true) || !field(j, "", "kv_heads", m.kvHeads, true) ||
      !field(j, "", "head_dim", m.headDim, true) || !field(j, "", "ffn", m.ffn, true) ||
      !field(j, "", "vocab", m.vocab, true))
    return false;
  if (m.layers < 1)
    return error("/layers", "must be positive");
  if (m.heads < 1)
    return error("/heads", "must be positive");
  if (m.kvHeads < 1 || m.heads % m.kvHeads != 0)
    return error("/kv_heads", "must be positive and divide heads (" + std::to_string(m.heads) + ")");
  if (j.contains("moe")) {
    const json &e = j["moe"];
    if (!e.is_object())
      return error("/moe", "must be an object");
    if (!field(e, "/moe", "experts", m.experts, true) || !field(e, "/moe", "top_k", m.topK, true) ||
        !field(e, "/moe", "shared_experts", m.sharedExperts, false) ||
        !field(e, "/moe", "expert_ffn", m.expertFfn, true) ||
        !field(e, "/moe", "first_dense_layers", m.firstDenseLayers, false))
      return false;
    if (m.experts < 2)
      return error("/moe/experts", "needs at least 2 experts");
    if (m.topK < 1 || m.topK > m.experts)
      return error("/moe/top_k", "needs 1 <= top_k <= experts");
  }
  return true;
}

bool parseParallel(const std::string &text, Parallel &p, std::string &err) {
  std::stringstream ss(text);
  std::string item;
  std::set<std::string> seen;
  while (std::getline(ss, item, ',')) {
    if (item.empty())
      continue;
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (!seen.insert(key).second)
      return (err = "--parallel: '" + key + "' is given twice", false);
    if (key == "sp" || key == "compact") {
      if (eq != std::string::npos)
        return (err = "--parallel: " + key + " takes no value", false);
      (key == "sp" ? p.sp : p.compact) = true;
      continue;
    }
    if (key == "schedule") {
      if (val != "gpipe" && val != "1f1b" && val != "interleaved")
        return (err = "--parallel: unknown schedule '" + val + "' (expected gpipe, 1f1b or interleaved)",
                false);
      p.schedule = val;
      continue;
    }
    if (key == "size") {
      if (val != "full" && val != "reduced")
        return (err = "--parallel: size is full or reduced", false);
      p.fullSize = val == "full";
      continue;
    }
    if (key == "seq") {
      char *end = nullptr;
      long v = std::strtol(val.c_str(), &end, 10);
      if (val.empty() || *end || v < 1 || v > (1 << 20))
        return (err = "--parallel: seq needs an integer in [1, 2^20]", false);
      p.seq = v;
      continue;
    }
    if (key == "cf") {
      char *end = nullptr;
      p.capacityFactor = std::strtod(val.c_str(), &end);
      // Written so that NaN fails too.
      if (val.empty() || *end || !(p.capacityFactor >= 0 && p.capacityFactor <= 64))
        return (err = "--parallel: cf must be a number in [0, 64]", false);
      continue;
    }
    int64_t *slot = key == "dp" ? &p.dp : key == "tp" ? &p.tp : key == "pp" ? &p.pp
                  : key == "ep" ? &p.ep : key == "cp" ? &p.cp : key == "zero" ? &p.zero
                  : key == "microbatches" ? &p.microbatches : key == "layers" ? &p.layers
                  : key == "chunks" ? &p.chunks : nullptr;
    if (!slot)
      return (err = "--parallel: unknown item '" + item +
                    "' (expected dp, tp, pp, ep, cp, zero, microbatches, layers, chunks, cf = N, "
                    "sp, compact, schedule = gpipe|1f1b|interleaved, size = full|reduced, seq = N)",
              false);
    char *end = nullptr;
    long v = std::strtol(val.c_str(), &end, 10);
    if (val.empty() || *end || v < 0 || v > 1024)
      return (err = "--parallel: " + key + " needs an integer in [0, 1024]", false);
    *slot = v;
  }
  return true;
}

std::string printParallel(const Parallel &p) {
  std::string out;
  auto item = [&](const std::string &s) { out += (out.empty() ? "" : ",") + s; };
  for (auto [n, v] : {std::pair<const char *, int64_t>{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp},
                      {"ep", p.ep}, {"cp", p.cp}})
    if (v != 1)
      item(std::string(n) + "=" + std::to_string(v));
  if (p.sp)
    item("sp");
  if (p.zero)
    item("zero=" + std::to_string(p.zero));
  if (p.microbatches != 1)
    item("microbatches=" + std::to_string(p.microbatches));
  if (p.schedule != "1f1b")
    item("schedule=" + p.schedule);
  if (p.chunks)
    item("chunks=" + std::to_string(p.chunks));
  if (p.layers)
    item("layers=" + std::to_string(p.layers));
  if (p.capacityFactor > 0) {
    std::ostringstream cf;
    cf.precision(17);
    cf << p.capacityFactor;
    item("cf=" + cf.str());
  }
  if (p.fullSize)
    item("size=full");
  if (p.seq)
    item("seq=" + std::to_string(p.seq));
  if (p.compact)
    item("compact");
  return out;
}

} // namespace planproof::plangen
