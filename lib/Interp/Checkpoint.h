//===- Checkpoint.h - dist.save and dist.load, written once -----*- C++ -*-===//
//
// What a checkpoint op does on every rank, for every engine that runs a plan: the
// element engine (canonical polynomials) and the CPU replay (numbers) call the same
// checkpointOp with their element type. docs/checkpoint.md states the semantics:
//
//  - dist.save writes the rank's piece at its offsets into the entry `key` of the
//    global shape; elements past the end are padding and not written. A rank outside
//    the op's `on` filter saves nothing and relies on the rank that saves for it
//    holding the same value (a DroppedReplica event when it does not). Two ranks
//    writing different values to one element is a Conflict; a piece that starts before
//    the entry (a negative offset) is OutOfRange.
//  - dist.load reads the rank's piece; an element past the end is padding (whatever the
//    buffer holds: the engine's `padding`), an element the saving plan never wrote is
//    Unsaved (the engine's `unsaved` value: an unknown, or NaN).
//
// The engine supplies its element type E and an Elements policy:
//
//   bool offset(const Tensor<E> &v, int64_t &out);  // the integer an index value holds
//   E fill();                                       // an entry's element before any write
//   E padding(const std::string &key, int64_t rank, int64_t l);
//   E unsaved(const std::string &key, const std::vector<int64_t> &global);
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_INTERP_CHECKPOINT_H
#define PLANPROOF_INTERP_CHECKPOINT_H

#include "Interp/PlanWalk.h"
#include "Semantics/OpSemantics.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace planproof {

/// Something wrong in how pieces were written or read, found while executing.
struct CheckpointEvent {
  enum Kind { Conflict, OutOfRange, Unsaved, DroppedReplica } kind;
  mlir::Operation *op;
  int64_t rank, otherRank = -1;
  std::string key;
  std::vector<int64_t> index; // the element (Conflict, Unsaved) or the piece's offsets
};

/// One entry as the saving plan wrote it: every element's value and who wrote it.
template <class E> struct CheckpointEntryOf {
  Shape shape;
  bool isIndex = false;
  std::vector<E> values;
  std::vector<int64_t> writer;              // rank, or -1 when never written
  std::vector<mlir::Operation *> writerOp;  // the dist.save that wrote it
  /// Read by the resuming plan. Mutable: reading records that, and changes no value.
  mutable std::vector<bool> read;
};

/// A checkpoint as the saving plan wrote it, and what went wrong writing or reading it.
template <class E> struct CheckpointOf {
  std::map<std::string, CheckpointEntryOf<E>> entries;
  /// Mutable: a resuming plan reading the checkpoint records its unsaved reads here.
  mutable std::vector<CheckpointEvent> events;
};

namespace detail {
/// T, in a parameter that template deduction does not look at (so nullptr binds).
template <class T> struct Same {
  using type = T;
};

/// The rank's offsets of a checkpoint op, or why not.
template <class E, class Elements>
std::string checkpointOffsets(mlir::ValueRange offsets, RankValues<E> &values, int64_t r,
                              Elements &elems, std::vector<int64_t> &off) {
  off.clear();
  for (mlir::Value o : offsets) {
    int64_t at;
    if (!elems.offset(values[o][r], at))
      return "checkpoint offsets must be integers on every rank (rank coordinates and "
             "constants), not values of the step's inputs";
    off.push_back(at);
  }
  return "";
}

/// dist.save on rank r.
template <class E, class Elements>
std::string checkpointSave(mlir::Operation &op, const CheckpointAccess &access, const Mesh &mesh,
                           RankValues<E> &values, int64_t r, const std::vector<int64_t> &off,
                           CheckpointOf<E> &save, Elements &elems) {
  auto s = mlir::cast<dist::SaveOp>(op);
  const std::string &key = access.key;
  const std::vector<Tensor<E>> &held = values[s.getValue()];
  // Ranks outside `on` rely on the rank that saves for them holding the same value.
  if (int64_t saver = checkpointSaver(mesh, r, s); saver != r) {
    if (held[r].data != held[saver].data)
      save.events.push_back({CheckpointEvent::DroppedReplica, &op, r, saver, key, off});
    return "";
  }
  CheckpointEntryOf<E> &e = save.entries[key];
  if (e.values.empty()) {
    e.shape = access.shape;
    e.isIndex = access.type.isIndex();
    e.values.assign(numElements(access.shape), elems.fill());
    e.writer.assign(e.values.size(), -1);
    e.writerOp.assign(e.values.size(), nullptr);
    e.read.assign(e.values.size(), false);
  } else if (e.shape != access.shape) {
    return "entry '" + key + "' is saved with two different shapes";
  }
  for (int64_t l = 0; l < numElements(access.local); ++l) {
    std::vector<int64_t> g = unravelIndex(access.local, l);
    for (size_t d = 0; d < g.size(); ++d)
      g[d] += off[d];
    if (!Layout::inBounds(g, access.shape)) {
      // Past the end: padding, unless a whole piece starts outside the entry.
      if (std::any_of(off.begin(), off.end(), [](int64_t x) { return x < 0; }))
        save.events.push_back({CheckpointEvent::OutOfRange, &op, r, -1, key, off});
      continue;
    }
    int64_t at = linearIndex(access.shape, g);
    const E &value = held[r].data[e.isIndex ? 0 : l];
    if (e.writer[at] >= 0 && !(e.values[at] == value))
      save.events.push_back({CheckpointEvent::Conflict, &op, r, e.writer[at], key, g});
    if (e.writer[at] < 0) {
      e.values[at] = value;
      e.writer[at] = r;
      e.writerOp[at] = &op;
    }
  }
  return "";
}

/// dist.load on rank r: its piece.
template <class E, class Elements>
Tensor<E> checkpointLoad(mlir::Operation &op, const CheckpointAccess &access, int64_t r,
                         const std::vector<int64_t> &off, const CheckpointOf<E> &load,
                         Elements &elems) {
  const std::string &key = access.key;
  auto it = load.entries.find(key);
  const CheckpointEntryOf<E> *entry =
      it != load.entries.end() && it->second.shape == access.shape ? &it->second : nullptr;
  bool isIndex = access.type.isIndex();
  Tensor<E> t(isIndex ? Shape{} : access.local, elems.fill());
  for (int64_t l = 0; l < numElements(access.local); ++l) {
    std::vector<int64_t> g = unravelIndex(access.local, l);
    for (size_t d = 0; d < g.size(); ++d)
      g[d] += off[d];
    E &out = t.data[isIndex ? 0 : l];
    if (!Layout::inBounds(g, access.shape)) {
      out = elems.padding(key, r, l); // past the end of the entry: a padded shard's padding
      continue;
    }
    int64_t at = linearIndex(access.shape, g);
    if (entry && entry->writer[at] >= 0) {
      out = entry->values[at];
      entry->read[at] = true;
      continue;
    }
    // Whatever the file holds there.
    out = elems.unsaved(key, g);
    load.events.push_back({CheckpointEvent::Unsaved, &op, r, -1, key, g});
  }
  return t;
}
} // namespace detail

/// dist.save or dist.load `op` on every rank. `save` collects what a saving plan writes
/// (null: not collecting, and saving changes no value); `load` is what a resuming plan
/// reads (null: this step resumes from nothing, and a load is an error). Returns why the
/// op cannot run, or "".
template <class E, class Elements>
std::string checkpointOp(mlir::Operation &op, const Mesh &mesh, RankValues<E> &values,
                         typename detail::Same<CheckpointOf<E>>::type *save,
                         const typename detail::Same<CheckpointOf<E>>::type *load,
                         Elements &elems) {
  CheckpointAccess access = checkpointAccess(op);
  if (access.saving && !save)
    return "";
  if (!access.saving && !load)
    return "dist.load outside a resumed step: this spec has no saving plan";
  int64_t ranks = mesh.numRanks();
  std::vector<Tensor<E>> results(access.saving ? 0 : ranks);
  std::vector<int64_t> off;
  for (int64_t r = 0; r < ranks; ++r) {
    if (std::string why = detail::checkpointOffsets(access.offsets, values, r, elems, off);
        !why.empty())
      return why;
    if (!access.saving) {
      results[r] = detail::checkpointLoad(op, access, r, off, *load, elems);
      continue;
    }
    if (std::string why = detail::checkpointSave(op, access, mesh, values, r, off, *save, elems);
        !why.empty())
      return why;
  }
  if (!access.saving)
    values[op.getResult(0)] = std::move(results);
  return "";
}

} // namespace planproof

#endif
