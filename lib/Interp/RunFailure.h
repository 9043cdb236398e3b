//===- RunFailure.h - why a run of a program stopped ------------*- C++ -*-===//
#ifndef PLANPROOF_INTERP_RUNFAILURE_H
#define PLANPROOF_INTERP_RUNFAILURE_H

#include "mlir/IR/Location.h"

#include <string>

namespace planproof {

/// Why a run of a program stopped (an op or feature the backend does not support, a
/// size limit, a malformed operand), and where: the op's location, else the function's.
/// The one stop reason of every engine that runs programs -- symbolic execution, the
/// CPU replay, the kernel replay -- reported by each as *inconclusive* or *could not
/// run* at that location.
struct RunFailure {
  std::string why;
  mlir::Location loc;
};

} // namespace planproof

#endif
