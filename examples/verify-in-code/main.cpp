//===- main.cpp - verify a parallel plan built in code ---------------------===//
//
// Builds, as a JSON object in code (docs/json-format.md), the Megatron MLP's forward
// step at tensor parallelism TP: the first weight split by columns, the second by rows,
// one all-reduce of the partial sums. Verifies it, then the same plan without its
// all-reduce (each rank's partial sum returned as the whole), then replays the correct
// one on numbers. Exit status 0 when planproof says what it must.
//
//===----------------------------------------------------------------------===//
#include <planproof/planproof.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

using json = nlohmann::json;
namespace api = planproof::api;

namespace {

json tensor(const std::string &name, int rows, int cols) {
  return {{"name", name}, {"shape", {rows, cols}}};
}

json op(const std::string &result, const std::string &kind, json operands, json attrs = nullptr) {
  json o = {{"result", result}, {"op", kind}, {"operands", operands}};
  if (!attrs.is_null())
    o["attrs"] = attrs;
  return o;
}

json layout(json dims) { return {{"dims", dims}}; }

/// y = gelu(x w1) w2 on one device, and on `tp` ranks; `reduce`: whether the plan sums
/// the partial products over tp.
json mlp(int tp, bool reduce) {
  const int B = 4, H = 8, F = 8 * tp;
  json contract = {{"lhs_dim", 1}, {"rhs_dim", 0}};
  json reference = {
      {"inputs", {tensor("x", B, H), tensor("w1", H, F), tensor("w2", F, H)}},
      {"ops",
       {op("h", "matmul", {"x", "w1"}, contract), op("a", "gelu", {"h"}),
        op("y", "matmul", {"a", "w2"}, contract)}},
      {"outputs", {"y"}}};
  json planOps = {op("h", "matmul", {"x", "w1"}, contract), op("a", "gelu", {"h"}),
                  op("y_part", "matmul", {"a", "w2"}, contract)};
  if (reduce)
    planOps.push_back(op("y", "all_reduce", {"y_part"}, {{"axes", {"tp"}}, {"kind", "sum"}}));
  json plan = {
      {"mesh", {{"name", "mesh"}, {"axes", {{{"name", "tp"}, {"size", tp}}}}}},
      {"inputs",
       {{{"name", "x"}, {"value", "x"}, {"layout", layout({nullptr, nullptr})}},
        {{"name", "w1"}, {"value", "w1"}, {"layout", layout({nullptr, "tp"})}},
        {{"name", "w2"}, {"value", "w2"}, {"layout", layout({"tp", nullptr})}}}},
      {"ops", planOps},
      {"outputs",
       {{{"name", reduce ? "y" : "y_part"}, {"value", "y"}, {"layout", layout({nullptr, nullptr})}}}}};
  return {{"planproof", 1}, {"reference", reference}, {"plan", plan}};
}

} // namespace

int main() {
  api::Session session;
  bool ok = true;
  for (bool reduce : {true, false}) {
    auto spec = session.loadText(reduce ? "mlp_tp4.json" : "mlp_tp4_no_allreduce.json",
                                 mlp(4, reduce).dump());
    if (!spec) {
      std::cerr << spec.error().diagnostics;
      return 2;
    }
    api::Result r = session.verify(*spec);
    std::cout << spec->name() << ": " << api::verdictName(r.verdict) << " (" << spec->ranks()
              << " ranks, " << r.stats.obligations << " obligations)\n";
    for (const api::Finding &v : r.violations)
      std::cout << "  [" << v.kind << "] at " << v.op << " (" << v.at.str() << "): " << v.message
                << "\n";
    ok &= r.verdict == (reduce ? api::Verdict::Verified : api::Verdict::Violated);
    if (reduce) {
      auto numbers = session.replay(*spec);
      if (!numbers || !numbers->ran) {
        std::cerr << "replay did not run\n";
        return 1;
      }
      std::cout << "  replay (fp32): " << (numbers->diverged ? "diverged" : "within tolerance")
                << "\n";
      ok &= !numbers->diverged;
    }
  }
  // Bad input is an Error value with its place, not an exception.
  auto bad = session.loadText("broken.json", R"({"planproof": 1, "reference": 3})");
  if (bad)
    return 1;
  std::cout << "bad input: " << bad.error().at.str() << ": " << bad.error().message << "\n";
  return ok ? 0 : 1;
}
