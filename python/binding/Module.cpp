//===- Module.cpp - planproof._planproof: the public API in Python ---------===//
//
// The extension module under `import planproof` (python/planproof/__init__.py): the
// public C++ API of include/planproof/planproof.h, nothing else -- Session, the loaded
// Spec, verify() and replay() with their result structs, and the plan generator. The
// Python package adds the conveniences (module-level verify(), dicts, the builder);
// this file only converts.
//
// Conventions: a load error raises planproof.SpecError (python/planproof/_errors.py)
// with the API's Error (message, file, line, column, every diagnostic); a bad option
// raises ValueError. The GIL is released while the library works, so a planner may
// verify in threads, one Session per thread (a Session is not for concurrent use; the
// binding refuses a call that would share one).
//
//===----------------------------------------------------------------------===//
#include "planproof/planproof.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <climits>
#include <optional>
#include <memory>
#include <sstream>
#include <tuple>

namespace py = pybind11;
using namespace planproof::api;

namespace {

/// Raises planproof.SpecError for `e`.
[[noreturn]] void raise(const Error &e) {
  py::object cls = py::module_::import("planproof._errors").attr("SpecError");
  py::object exc = cls(e.message, e.at.file, e.at.line, e.at.column, e.diagnostics);
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

/// A Session with the guard that keeps two threads out of it.
struct PySession {
  Session session;
  std::atomic<bool> busy{false};
};

/// Held while a call uses the session; refuses a second, concurrent one.
class Use {
public:
  explicit Use(PySession &s) : s(s) {
    if (s.busy.exchange(true))
      throw std::runtime_error("this Session is in use by another thread; make one per thread");
  }
  ~Use() { s.busy = false; }

private:
  PySession &s;
};

/// A loaded spec and the session it lives in (the Python object keeps the session
/// alive: py::keep_alive below).
struct PySpec {
  Spec spec;
  PySession *owner;
};

Options::Engine engineOf(const std::string &name) {
  if (name == "element")
    return Options::Engine::Element;
  if (name == "layout")
    return Options::Engine::Layout;
  if (name == "auto")
    return Options::Engine::Auto;
  throw py::value_error("unknown engine '" + name + "' (element, layout, auto)");
}

Options loadOptions(bool fullShapes) {
  Options o;
  o.fullShapes = fullShapes;
  return o;
}

PySpec checked(Expected<Spec> r, PySession &owner) {
  if (!r)
    raise(r.error());
  return PySpec{std::move(*r), &owner};
}

const PySpec &mine(PySession &s, const PySpec &spec) {
  if (spec.owner != &s)
    throw py::value_error("the spec '" + spec.spec.name() +
                          "' was loaded by another Session; load it in this one");
  return spec;
}

std::string reprLocation(const Location &l) {
  return l.file.empty() && !l.line ? "<unknown>" : l.str();
}

void bindResults(py::module_ &m) {
  py::class_<Location>(m, "Location", "A place in an input: file, 1-based line and column (0: unknown).")
      .def_readonly("file", &Location::file)
      .def_readonly("line", &Location::line)
      .def_readonly("column", &Location::column)
      .def("__str__", &Location::str)
      .def("__repr__", [](const Location &l) { return "Location('" + reprLocation(l) + "')"; });

  py::class_<Counterexample>(m, "Counterexample",
                             "Concrete inputs that show a violation: the nonzero inputs (every "
                             "other input 0), the reference's and the plan's value of one "
                             "output element, and the plan's values on the ranks involved.")
      .def_readonly("element", &Counterexample::element)
      .def_readonly("inputs", &Counterexample::inputs)
      .def_readonly("reference", &Counterexample::reference)
      .def_readonly("plan", &Counterexample::plan)
      .def_readonly("rank_values", &Counterexample::rankValues)
      .def("__repr__", [](const Counterexample &c) {
        std::ostringstream s;
        s << "Counterexample(" << c.element << ": reference " << c.reference << ", plan " << c.plan
          << ")";
        return s.str();
      });

  py::class_<Finding>(m, "Finding",
                      "A violation or a warning: its kind ('sharding', 'reduction', 'rng', ...), "
                      "the message, the plan op it points at and where, the reference value "
                      "concerned, the ranks, notes, a checked fix hint, a counterexample.")
      .def_readonly("kind", &Finding::kind)
      .def_readonly("message", &Finding::message)
      .def_readonly("hint", &Finding::hint)
      .def_readonly("at", &Finding::at)
      .def_readonly("op", &Finding::op)
      .def_readonly("value", &Finding::value)
      .def_readonly("ranks", &Finding::ranks)
      .def_readonly("notes", &Finding::notes)
      .def_readonly("counterexample", &Finding::counterexample)
      .def("__repr__", [](const Finding &f) {
        return "Finding(" + f.kind + " at " + reprLocation(f.at) + ": " + f.message + ")";
      });

  py::class_<Stats>(m, "Stats", "What a verification did and how long it took.")
      .def_readonly("obligations", &Stats::obligations)
      .def_readonly("decided_canonical", &Stats::decidedCanonical)
      .def_readonly("solver_queries", &Stats::solverQueries)
      .def_readonly("ranks", &Stats::ranks)
      .def_readonly("reference_ops", &Stats::referenceOps)
      .def_readonly("plan_ops", &Stats::planOps)
      .def_readonly("milliseconds", &Stats::milliseconds)
      .def_readonly("reused_states", &Stats::reusedStates)
      .def_readonly("reused_reference", &Stats::reusedReference);

  py::class_<ProofRule>(m, "ProofRule", "One rule of a proof and how often it applied.")
      .def_readonly("rule", &ProofRule::rule)
      .def_readonly("count", &ProofRule::count)
      .def("__repr__", [](const ProofRule &r) {
        return "ProofRule(" + r.rule + " x" + std::to_string(r.count) + ")";
      });
  py::class_<Proof>(m, "Proof", "How one output was proved (verify(explain_proof=True)).")
      .def_readonly("output", &Proof::output)
      .def_readonly("engine", &Proof::engine)
      .def_readonly("rules", &Proof::rules);
  py::class_<Result>(m, "Result",
                     "A verdict ('verified', 'violated', 'inconclusive') with its violations, "
                     "warnings, the reasons of an inconclusive verdict, statistics, and the "
                     "CLI's text and JSON reports.")
      .def_property_readonly("verdict", [](const Result &r) { return verdictName(r.verdict); })
      .def_property_readonly("verified", [](const Result &r) { return r.verdict == Verdict::Verified; })
      .def_readonly("violations", &Result::violations)
      .def_readonly("warnings", &Result::warnings)
      .def_readonly("inconclusive", &Result::inconclusive)
      .def_readonly("assumptions", &Result::assumptions)
      .def_readonly("stats", &Result::stats)
      .def_readonly("proof", &Result::proof)
      .def_readonly("text", &Result::text)
      .def_readonly("json", &Result::json)
      .def_readonly("html", &Result::html)
      .def("__bool__", [](const Result &r) { return r.verdict == Verdict::Verified; })
      .def("__repr__", [](const Result &r) {
        return std::string("Result(") + verdictName(r.verdict) + ", " +
               std::to_string(r.violations.size()) + " violation(s))";
      });

  py::class_<ReplayOutput>(m, "ReplayOutput", "One plan output against the fp64 reference.")
      .def_readonly("name", &ReplayOutput::name)
      .def_readonly("within", &ReplayOutput::within)
      .def_readonly("max_abs_error", &ReplayOutput::maxAbsError)
      .def_readonly("max_rel_error", &ReplayOutput::maxRelError);

  py::class_<ReplayResult>(m, "ReplayResult",
                           "A replay on numbers: whether it ran (else why not), whether an "
                           "output left its tolerance, each output's errors, and the first "
                           "plan op whose value leaves the reference.")
      .def_readonly("ran", &ReplayResult::ran)
      .def_readonly("failure", &ReplayResult::failure)
      .def_readonly("diverged", &ReplayResult::diverged)
      .def_readonly("outputs", &ReplayResult::outputs)
      .def_readonly("first_op", &ReplayResult::firstOp)
      .def_readonly("first_at", &ReplayResult::firstAt)
      .def_readonly("first_note", &ReplayResult::firstNote)
      .def_readonly("seed", &ReplayResult::seed)
      .def("__repr__", [](const ReplayResult &r) {
        return std::string("ReplayResult(") +
               (!r.ran ? "did not run: " + r.failure
                       : r.diverged ? "diverged at " + (r.firstOp.empty() ? "?" : r.firstOp)
                                    : std::string("within tolerance")) +
               ")";
      });
}

/// Session's loaders: a file, text, a candidate plan against a loaded spec.
void bindLoading(py::class_<PySession> &session) {
  session
      .def(
          "load",
          [](PySession &s, const std::string &path, bool fullShapes) {
            Use use(s);
            Expected<Spec> r = [&] {
              py::gil_scoped_release unlocked;
              return s.session.load(path, loadOptions(fullShapes));
            }();
            return checked(std::move(r), s);
          },
          py::arg("path"), py::kw_only(), py::arg("full_shapes") = false, py::keep_alive<0, 1>(),
          "Loads a spec file: .json (docs/json-format.md) or MLIR.")
      .def(
          "load_text",
          [](PySession &s, const std::string &text, const std::string &name, bool fullShapes) {
            Use use(s);
            Expected<Spec> r = [&] {
              py::gil_scoped_release unlocked;
              return s.session.loadText(name, text, loadOptions(fullShapes));
            }();
            return checked(std::move(r), s);
          },
          py::arg("text"), py::kw_only(), py::arg("name") = "<text>",
          py::arg("full_shapes") = false, py::keep_alive<0, 1>(),
          "Loads a spec from text: JSON when it starts with '{' (or the name ends in "
          ".json), else MLIR. `name` is what diagnostics call it.")
      .def(
          "load_plan",
          [](PySession &s, const PySpec &base, const std::string &text, const std::string &name) {
            Use use(s);
            const PySpec &b = mine(s, base);
            Expected<Spec> r = [&] {
              py::gil_scoped_release unlocked;
              return s.session.loadPlan(b.spec, name, text);
            }();
            return checked(std::move(r), s);
          },
          py::arg("base"), py::arg("plan_text"), py::kw_only(), py::arg("name") = "<candidate>",
          py::keep_alive<0, 1>(),
          "Loads a candidate plan (MLIR: the mesh and the plan function) against the "
          "reference of `base`, a spec this session loaded; the reference is neither parsed "
          "nor derived again, and the layout engine reuses its run.")
      .def(
          "edit",
          [](PySession &s, PySpec &spec,
             const std::vector<std::tuple<std::string, std::string, std::string>> &edits) {
            Use use(s);
            mine(s, spec);
            std::vector<PlanEdit> in;
            for (const auto &[value, attribute, to] : edits)
              in.push_back({value, attribute, to});
            Expected<std::vector<PlanEdit>> r = [&] {
              py::gil_scoped_release unlocked;
              return s.session.edit(spec.spec, in);
            }();
            if (!r)
              raise(r.error());
            std::vector<std::tuple<std::string, std::string, std::string>> undo;
            for (const PlanEdit &e : *r)
              undo.emplace_back(e.value, e.attribute, e.to);
            return undo;
          },
          py::arg("spec"), py::arg("edits"),
          "Changes the plan of `spec` in place, all edits or none: each (value, attribute, "
          "to) sets attribute `attribute` of the plan op defining `value` ('%g1') to `to` "
          "in MLIR syntax ('\"avg\"', '[\"dp\"]'; '' removes it). Returns the edits that "
          "undo these. The layout engine then re-derives only what the edited ops reach. "
          "Raises SpecError for an edit that cannot be made (nothing changes).");
}

/// Runs `call` without the GIL on a thread of its own while this one waits, looking at
/// Python's signals every 50 ms: Ctrl-C sets `interrupt` (the call then ends soon,
/// inconclusive) and, once it has, raises KeyboardInterrupt -- instead of waiting for
/// the whole call as a plain GIL release would.
template <class F> auto interruptible(std::atomic<bool> &interrupt, F call) -> decltype(call()) {
  using R = decltype(call());
  std::optional<R> result;
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  bool interrupted = false;
  {
    py::gil_scoped_release unlocked;
    std::thread worker([&] {
      try {
        result.emplace(call());
      } catch (...) {
        failure = std::current_exception();
      }
      done = true;
    });
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (done || interrupted)
        continue;
      py::gil_scoped_acquire locked;
      if (PyErr_CheckSignals() != 0) {
        interrupted = true;
        interrupt = true;
      }
    }
    worker.join();
  }
  if (interrupted)
    throw py::error_already_set();
  if (failure)
    std::rethrow_exception(failure);
  return std::move(*result);
}

/// Session's decisions: verify and replay.
void bindDeciding(py::class_<PySession> &session) {
  session
      .def(
          "verify",
          [](PySession &s, const PySpec &spec, const std::string &engine, double timeLimit,
             unsigned threads, uint64_t solverBudget, std::optional<uint64_t> solverTimeoutMs,
             bool checkFixes, bool explainProof) {
            Use use(s);
            const PySpec &sp = mine(s, spec);
            Options o;
            o.engine = engineOf(engine);
            if (!(timeLimit > 0))
              throw py::value_error("time_limit must be positive");
            if (threads == 0)
              throw py::value_error("threads must be at least 1");
            o.timeLimitSeconds = timeLimit;
            o.threads = threads;
            if (solverBudget == 0 || solverBudget > UINT32_MAX)
              throw py::value_error("solver_budget must be between 1 and 4294967295");
            o.solverBudget = solverBudget;
            // The older, millisecond form: a fixed rate, not a clock (deterministic).
            if (solverTimeoutMs) {
              if (*solverTimeoutMs == 0 || *solverTimeoutMs > 3600000)
                throw py::value_error("solver_timeout_ms must be between 1 and 3600000");
              o.solverBudget = *solverTimeoutMs * planproof::api::kSolverUnitsPerMs;
            }
            o.checkFixes = checkFixes;
            o.explainProof = explainProof;
            std::atomic<bool> interrupt{false};
            o.interrupt = &interrupt;
            return interruptible(interrupt, [&] { return s.session.verify(sp.spec, o); });
          },
          py::arg("spec"), py::kw_only(), py::arg("engine") = "auto",
          py::arg("time_limit") = 600.0, py::arg("threads") = 2,
          py::arg("solver_budget") = planproof::api::kDefaultSolverBudget,
          py::arg("solver_timeout_ms") = py::none(), py::arg("check_fixes") = true,
          py::arg("explain_proof") = false,
          "Decides the spec: 'verified' only for what was proven. engine: 'auto' (the "
          "default: layout, then element), 'element' or 'layout' (verified or "
          "inconclusive).")
      .def(
          "replay",
          [](PySession &s, const PySpec &spec, const std::string &dtype, const std::string &order,
             uint64_t seed, double timeLimit, bool localize) {
            Use use(s);
            const PySpec &sp = mine(s, spec);
            if (!(timeLimit > 0))
              throw py::value_error("time_limit must be positive");
            ReplayOptions o;
            o.dtype = dtype;
            o.order = order;
            o.seed = seed;
            o.timeLimitSeconds = timeLimit;
            o.localize = localize;
            std::atomic<bool> interrupt{false};
            o.interrupt = &interrupt;
            Expected<ReplayResult> r =
                interruptible(interrupt, [&] { return s.session.replay(sp.spec, o); });
            if (!r)
              throw py::value_error(r.error().message);
            return *r;
          },
          py::arg("spec"), py::kw_only(), py::arg("dtype") = "fp32", py::arg("order") = "ring",
          py::arg("seed") = 1, py::arg("time_limit") = 600.0, py::arg("localize") = true,
          "Runs reference and plan on numbers (CPU) and compares them. dtype: fp64, fp32, "
          "bf16; order (of the collectives' reductions): rank, ring, tree.");
}

void bindSession(py::module_ &m) {
  py::class_<PySpec>(m, "Spec", "A loaded spec; it lives in the Session that loaded it.")
      .def_property_readonly("name", [](const PySpec &s) { return s.spec.name(); })
      .def_property_readonly("ranks", [](const PySpec &s) { return s.spec.ranks(); })
      .def("__repr__", [](const PySpec &s) {
        return "Spec('" + s.spec.name() + "', " + std::to_string(s.spec.ranks()) + " ranks)";
      });

  py::class_<PySession> session(m, "Session",
                                "Where specs are loaded, verified and replayed (an MLIR "
                                "context with planproof's dialects, and the layout engine's "
                                "reuse between candidates). Not for concurrent use: make one "
                                "per thread.");
  session.def(py::init<>());
  bindLoading(session);
  bindDeciding(session);

  m.def(
      "generate_plan",
      [](const std::string &model, const std::string &parallel) {
        Expected<std::string> r = [&] {
          py::gil_scoped_release unlocked;
          return generatePlan(model, parallel);
        }();
        if (!r)
          raise(r.error());
        return *r;
      },
      py::arg("model"), py::arg("parallel") = "",
      "`planproof plan`: the spec (MLIR text) of a model configuration file under a "
      "parallel configuration such as 'dp=2,tp=2,sp,microbatches=2' (docs/plan.md).");
}

} // namespace

PYBIND11_MODULE(_planproof, m) {
  m.doc() = "planproof's public C++ API (include/planproof/planproof.h); use the package "
            "`planproof`, which wraps it.";
  bindResults(m);
  bindSession(m);
}
