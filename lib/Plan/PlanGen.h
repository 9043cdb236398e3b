//===- PlanGen.h - reference and plan of a model configuration -*- C++ -*-===//
//
// `planproof plan`: from a model configuration (layers, hidden size, heads, KV heads,
// FFN width, vocabulary, MoE experts and top-k) and a parallel configuration (dp, tp,
// sp, ep, cp, pp with a schedule, zero, microbatches), writes a spec in MLIR: the single-device training
// step (forward, token-mean cross-entropy, the Switch load-balancing loss for MoE
// layers, every weight's gradient) and the SPMD plan that runs it on the mesh. The
// generator is the reference implementation of correct plans; the test suite verifies
// it on a grid of configurations (docs/plan.md).
//
// Shapes are reduced for the element engine: every size keeps the divisibility the
// parallel degrees need (heads by tp, tokens by the data axes, the sequence by 2*cp
// chunks), the GQA group is capped at 2 query heads per KV head, top-k at half of the
// reduced experts. The header of the generated file lists the real and the reduced
// sizes.
//
// The spec is built with MLIR's builders (every op by its ODS builder, lib/Plan/
// PlanBody.cpp) and verified before it is printed: a configuration the generator
// writes wrongly is an internal error here, never a spec that fails to load.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_PLAN_PLANGEN_H
#define PLANPROOF_PLAN_PLANGEN_H

#include "Support/Diagnostic.h"
#include "Support/JsonDocument.h"

#include <cstdint>
#include <string>
#include <vector>

namespace planproof::plangen {

struct Model {
  std::string name;
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, headDim = 0, ffn = 0, vocab = 0;
  // Mixture of experts (experts == 0: a dense model).
  int64_t experts = 0, topK = 0, sharedExperts = 0, expertFfn = 0, firstDenseLayers = 0;
};

struct Parallel {
  int64_t dp = 1, tp = 1, pp = 1, ep = 1, cp = 1, zero = 0, microbatches = 1;
  bool sp = false;
  std::string schedule = "1f1b";
  /// Model chunks per stage under the interleaved schedule (0: two).
  int64_t chunks = 0;
  /// Layers to generate (0: the reduced default, two layers or the model's own count
  /// if smaller).
  int64_t layers = 0;
  /// Expert capacity factor (0: no token is dropped).
  double capacityFactor = 0;
  /// `size=full`: the model's own sizes (hidden, heads, FFN, vocabulary, layers) and a
  /// sequence of `seq` tokens per sample, one sample per data rank and microbatch --
  /// for the layout engine, whose cost does not depend on sizes. Default: the reduced
  /// sizes the element engine decides in seconds.
  bool fullSize = false;
  int64_t seq = 0;
  /// `compact`: each distinct layer written once as a private function (one for the
  /// reference, one for the plan; MoE layers their own) and called per layer and
  /// microbatch (docs/calls.md). Default: written out.
  bool compact = false;
};

/// Reads a model configuration (JSON). Errors name the file and the JSON path.
bool readModel(const std::string &path, Model &m, Diagnostics &diags);
/// Parses "dp=2,tp=2,sp,ep=2,cp=2,zero=2,microbatches=2,pp=2,schedule=1f1b,chunks=2,
/// layers=2,size=full,seq=4096,compact".
bool parseParallel(const std::string &text, Parallel &p, std::string &err);
/// Writes the spec. False with a reason for configurations it cannot generate.
bool generate(const Model &m, const Parallel &p, std::string &mlir, std::string &err);

/// A generated spec (`.plan`, PlanRecipe.cpp): a JSON object naming a model
/// configuration (relative to the file), --parallel text, edits of the generated text
/// (`replace`/`with`, `replace_all`/`with`, `move_line`/`before`), and what the
/// catalogue expects (`verdict`, `kind`, `at`: the plan value the report's first place
/// is, `engine`: the engine the expectation is stated for).
struct Recipe {
  std::string mlir; // the generated plan, edited
  bool expected = false;
  std::string verdict, kind, at, engine;
  int atLine = 0; // the line of the generated plan that defines `at`
};
/// Generates and edits a `.plan` file's spec; errors name the file and the JSON path.
bool loadRecipe(const std::string &path, Recipe &r, Diagnostics &diags);

/// One edit of a generated plan's text: `replace` (the text occurs exactly once),
/// `replace_all` (at least once), `move_line` (the one line holding `from` moved before
/// the one line holding `to`).
struct Edit {
  enum Kind { Replace, ReplaceAll, MoveLine } kind = Replace;
  std::string from, to;
};
/// A `.plan` file read, its model read, nothing generated.
struct RecipeFile {
  std::string path, description;
  std::string modelRef;  // as written, relative to the file
  std::string modelPath; // the model's path from here
  Model model;
  std::string parallelText;
  Parallel parallel;
  std::vector<Edit> edits;
  Recipe expect; // the expectation (mlir and atLine unset)
  /// The file as read: errors found later (an edit that does not apply) are placed at
  /// the field they come from.
  JsonDocument doc;
};
bool readRecipeFile(const std::string &path, RecipeFile &r, Diagnostics &diags);
/// The spec of a recipe read: generated, edited, its expectation's line found
/// (loadRecipe is readRecipeFile, then this).
bool buildRecipe(const RecipeFile &file, Recipe &r, Diagnostics &diags);
/// Applies one edit to `text`; false with why it does not apply.
bool applyEdit(const Edit &e, std::string &text, std::string &why);
/// --parallel's text of `p` (parseParallel reads it back to `p`).
std::string printParallel(const Parallel &p);

/// Shrinking a recipe (PlanShrink.cpp, `planproof shrink`, docs/plan.md): the
/// configurations of the same model, parallelism kinds, schedule and options at
/// reduced sizes with smaller degrees, layers and microbatches -- every degree above 1
/// stays above 1 -- smallest first (ranks x layers x microbatches), at most `limit`.
std::vector<Parallel> smallerConfigurations(const Model &m, const Parallel &big, size_t limit);
/// A recipe's edits carried over to the plan of another configuration of the same
/// model. Each edit's text is read as a pattern whose runs of digits are holes (a
/// layer, a stage, a microbatch, a size); it takes the occurrence in `text` whose
/// numbers agree best with the edit's own and with the numbers matched so far (ties:
/// the first), and its replacement takes the matched numbers where the edit's does.
/// The edits are applied in order to `text`, as the recipe applies them.
struct Translation {
  std::vector<Edit> edits;
  std::string at; // the counterpart of the expectation's `at` ("" if none)
  std::string text;
};
bool translateEdits(const std::vector<Edit> &edits, const std::string &at,
                    const std::string &text, Translation &out, std::string &why);

} // namespace planproof::plangen

#endif
