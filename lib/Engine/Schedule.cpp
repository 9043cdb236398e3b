//===- Schedule.cpp - pipeline schedules: structure and deadlock freedom ---===//
//
// A pipelined plan's stages each run their own ops in the order written (their
// schedule). Messages are blocking: a send waits until the destination stage reaches
// the matching recv, a recv until the source stage reaches the send, and a collective
// over the pipeline axis until every stage reaches it. The checks:
//
//  - the structural defects Pipeline.cpp found (unmatched messages, values used on a
//    stage no message carries them to, cycles), each a `schedule` violation;
//  - deadlock freedom: the stages' programs are run against each other under those
//    semantics (all ranks of a stage behave alike, so a stage stands for its ranks).
//    When no stage can move and some have not finished, the stages wait on each other
//    in a cycle; the violation names the cycle's ranks and the op each waits at.
//
//===----------------------------------------------------------------------===//
#include "Engine/Schedule.h"

#include "Dist/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace planproof;

namespace {

struct Event {
  enum Kind { Send, Recv, Barrier } kind;
  Operation *op;
  int64_t peer = -1; // the stage a send or recv waits for
  std::tuple<int64_t, int64_t, std::string, int> key; // (from, to, tag, occurrence)
};

std::string describe(const Spec &spec, Operation *op) {
  SourceLoc at = toSourceLoc(op->getLoc());
  std::string what;
  if (auto s = dyn_cast<dist::SendOp>(op))
    what = "dist.send to stage " + std::to_string(s.getTo()) + " tag \"" + s.getTag().str() + "\"";
  else if (auto r = dyn_cast<dist::RecvOp>(op))
    what = "`" + spec.nameOf(r.getResult()) + "` = dist.recv from stage " +
           std::to_string(r.getFrom()) + " tag \"" + r.getTag().str() + "\"";
  else
    what = "`" + (op->getNumResults() ? spec.nameOf(op->getResult(0)) : std::string("?")) + "` = " +
           op->getName().getStringRef().str();
  return what + (at.known() ? " (line " + std::to_string(at.line) + ")" : "");
}

std::string stageRanks(const Spec &spec, int64_t stage) {
  return "(" + spec.mesh.axes[spec.pipelineAxis] + "=" + std::to_string(stage) + ")";
}

/// The structural defects Pipeline.cpp found, each a `schedule` violation.
void reportScheduleProblems(const Spec &spec, VerifyResult &result) {
  for (const ScheduleProblem &p : spec.scheduleProblems) {
    Violation v;
    v.kind = "schedule";
    v.location = toSourceLoc(p.op->getLoc());
    v.at = p.op->getNumResults() ? spec.nameOf(p.op->getResult(0)) : "";
    v.message = p.message;
    v.hint = p.hint;
    result.violations.push_back(std::move(v));
  }
}

/// The stages' programs run against each other under blocking semantics: which events
/// have been matched, and where each stage stands.
struct StageRun {
  const Spec &spec;
  int64_t stages;
  std::string axis;
  std::vector<std::vector<Event>> program;
  std::vector<std::vector<std::pair<size_t, size_t>>> sets; // [first, last)
  std::vector<size_t> cur;
  std::vector<std::vector<bool>> matched;

  explicit StageRun(const Spec &spec)
      : spec(spec), stages(spec.mesh.shape[spec.pipelineAxis]),
        axis(spec.mesh.axes[spec.pipelineAxis]), program(stages), sets(stages), cur(stages, 0),
        matched(stages) {}

  void buildPrograms();
  void groupPostingSets();
  const std::pair<size_t, size_t> *posted(int64_t st) const {
    return cur[st] < sets[st].size() ? &sets[st][cur[st]] : nullptr;
  }
  const Event *at(int64_t st) const;
  bool matchPosted(int64_t st);
  bool advanceStages();
  void run();
  int64_t waitsFor(int64_t st) const;
  Violation deadlock(const std::vector<int64_t> &stuck) const;
  Violation::Timeline timeline(const std::vector<int64_t> &cycle) const;
};

/// Each stage's program: its sends, receives and pipeline-wide collectives, in order.
void StageRun::buildPrograms() {
  std::map<std::tuple<int64_t, int64_t, std::string>, int> sent, received;
  for (Operation &op : spec.plan.getBody().front()) {
    if (auto s = dyn_cast<dist::SendOp>(op)) {
      int n = sent[{s.getFrom(), s.getTo(), s.getTag().str()}]++;
      program[s.getFrom()].push_back(
          {Event::Send, &op, (int64_t)s.getTo(),
           {(int64_t)s.getFrom(), (int64_t)s.getTo(), s.getTag().str(), n}});
    } else if (auto r = dyn_cast<dist::RecvOp>(op)) {
      int n = received[{r.getFrom(), r.getTo(), r.getTag().str()}]++;
      program[r.getTo()].push_back(
          {Event::Recv, &op, (int64_t)r.getFrom(),
           {(int64_t)r.getFrom(), (int64_t)r.getTo(), r.getTag().str(), n}});
    } else if (auto axes = op.getAttrOfType<ArrayAttr>("axes")) {
      bool overPipe = llvm::any_of(
          axes, [&](Attribute a) { return cast<StringAttr>(a).getValue() == axis; });
      if (overPipe && spec.stageOf(&op) < 0)
        for (int64_t s = 0; s < stages; ++s)
          program[s].push_back({Event::Barrier, &op, -1, {}});
    }
  }
}

/// Posting sets: a stage's consecutive messages with one `batch` number are posted
/// together; every other event is a set of its own.
void StageRun::groupPostingSets() {
  auto batchOf = [](const Event &e) -> int64_t {
    if (e.kind == Event::Barrier)
      return -1;
    auto b = e.op->getAttrOfType<IntegerAttr>("batch");
    return b ? b.getInt() : -1;
  };
  for (int64_t st = 0; st < stages; ++st)
    for (size_t i = 0; i < program[st].size();) {
      size_t j = i + 1;
      int64_t b = batchOf(program[st][i]);
      while (b >= 0 && j < program[st].size() && batchOf(program[st][j]) == b)
        ++j;
      sets[st].push_back({i, j});
      i = j;
    }
  for (int64_t st = 0; st < stages; ++st)
    matched[st].assign(program[st].size(), false);
}

/// The first event of `st`'s current set still waiting, or null.
const Event *StageRun::at(int64_t st) const {
  const auto *set = posted(st);
  if (!set)
    return nullptr;
  for (size_t i = set->first; i < set->second; ++i)
    if (!matched[st][i])
      return &program[st][i];
  return &program[st][set->first];
}

/// Matches the sends of `st`'s current set with their peers' posted receives, and a
/// pipeline-wide collective every stage has reached. Whether anything matched.
bool StageRun::matchPosted(int64_t st) {
  bool moved = false;
  const auto *set = posted(st);
  if (!set)
    return moved;
  for (size_t i = set->first; i < set->second; ++i) {
    const Event &e = program[st][i];
    if (matched[st][i] || e.kind != Event::Send)
      continue;
    const auto *other = posted(e.peer);
    if (!other)
      continue;
    for (size_t k = other->first; k < other->second; ++k) {
      const Event &o = program[e.peer][k];
      if (!matched[e.peer][k] && o.kind == Event::Recv && o.key == e.key) {
        matched[st][i] = matched[e.peer][k] = true;
        moved = true;
        break;
      }
    }
  }
  if (program[st][set->first].kind == Event::Barrier) {
    bool all = true;
    for (int64_t u = 0; u < stages; ++u)
      all &= posted(u) && program[u][posted(u)->first].op == program[st][set->first].op;
    if (all) {
      for (int64_t u = 0; u < stages; ++u)
        matched[u][posted(u)->first] = true;
      moved = true;
    }
  }
  return moved;
}

/// Moves every stage whose current set is fully matched on to its next set. Whether
/// any stage moved.
bool StageRun::advanceStages() {
  bool moved = false;
  for (int64_t st = 0; st < stages; ++st) {
    const auto *set = posted(st);
    if (!set)
      continue;
    bool done = true;
    for (size_t i = set->first; i < set->second; ++i)
      done &= matched[st][i];
    if (done) {
      ++cur[st];
      moved = true;
    }
  }
  return moved;
}

/// Runs the stages until none can move.
void StageRun::run() {
  bool moved = true;
  while (moved) {
    moved = false;
    for (int64_t st = 0; st < stages; ++st)
      moved |= matchPosted(st);
    moved |= advanceStages();
  }
}

/// The stage `st` waits for at its current event.
int64_t StageRun::waitsFor(int64_t st) const {
  const Event *e = at(st);
  if (e->kind != Event::Barrier)
    return e->peer;
  for (int64_t u = 0; u < stages; ++u)
    if (!at(u) || at(u)->op != e->op)
      return u;
  return st;
}

/// The deadlock violation for the `stuck` stages (not empty).
Violation StageRun::deadlock(const std::vector<int64_t> &stuck) const {
  // Who waits for whom: follow the waits from the first stuck stage to a cycle.
  std::vector<int64_t> path;
  std::map<int64_t, size_t> seen;
  int64_t s = stuck[0];
  while (!seen.count(s) && at(s)) {
    seen[s] = path.size();
    path.push_back(s);
    s = waitsFor(s);
  }
  std::vector<int64_t> cycle;
  if (seen.count(s))
    cycle.assign(path.begin() + seen[s], path.end());
  else
    cycle = path; // ends at a stage that finished: it never reaches what is awaited
  Violation v;
  v.kind = "schedule";
  const Event *first = at(cycle[0]);
  v.location = toSourceLoc(first->op->getLoc());
  v.at = first->op->getNumResults() ? spec.nameOf(first->op->getResult(0)) : "";
  std::string chain;
  for (size_t i = 0; i < cycle.size(); ++i) {
    int64_t st = cycle[i], next = waitsFor(st);
    chain += (i ? ", which" : "stage " + std::to_string(st) + " " + stageRanks(spec, st)) +
             std::string(" waits at ") + describe(spec, at(st)->op) + " for stage " +
             std::to_string(next) + " " + stageRanks(spec, next);
    v.ranks.push_back(stageRanks(spec, st));
  }
  v.message = "deadlock: " + chain +
              (seen.count(s) ? ": the stages wait on each other in a cycle"
                             : ", which has finished without reaching it");
  v.hint = "each stage must receive messages in the order its peers send them (with blocking "
           "sends and receives, a recv waiting for a later message stalls the sender's earlier "
           "one)";
  for (int64_t st : stuck)
    v.locatedNotes.push_back({toSourceLoc(at(st)->op->getLoc()),
                              "stage " + std::to_string(st) + " waits here"});
  v.timeline = timeline(cycle);
  return v;
}

/// The time-line of the run as it stopped (Violation::Timeline).
Violation::Timeline StageRun::timeline(const std::vector<int64_t> &cycle) const {
  Violation::Timeline t;
  t.cycle = cycle;
  for (int64_t st = 0; st < stages; ++st) {
    std::vector<std::string> events;
    for (const Event &e : program[st]) {
      std::string tag = e.kind == Event::Barrier ? "" : std::get<2>(e.key);
      events.push_back(e.kind == Event::Send   ? "send " + tag + " to " + std::to_string(e.peer)
                       : e.kind == Event::Recv ? "recv " + tag + " from " + std::to_string(e.peer)
                                               : "collective");
    }
    t.events.push_back(std::move(events));
    const Event *waiting = at(st);
    t.done.push_back(waiting ? waiting - program[st].data() : -1);
    t.waitsFor.push_back(waiting ? waitsFor(st) : -1);
  }
  return t;
}

} // namespace

void planproof::checkSchedule(const Spec &spec, VerifyResult &result) {
  if (spec.pipelineAxis < 0)
    return;
  reportScheduleProblems(spec, result);
  if (!spec.scheduleProblems.empty())
    return; // the run below needs every message matched

  StageRun sim(spec);
  sim.buildPrograms();
  sim.groupPostingSets();
  sim.run();
  std::vector<int64_t> stuck;
  for (int64_t st = 0; st < sim.stages; ++st)
    if (sim.posted(st))
      stuck.push_back(st);
  if (stuck.empty())
    return;
  result.violations.push_back(sim.deadlock(stuck));
}
