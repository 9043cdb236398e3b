//===- Schedule.h - pipeline schedules ----------------------------*- C++ -*-===//
#ifndef PLANPROOF_ENGINE_SCHEDULE_H
#define PLANPROOF_ENGINE_SCHEDULE_H

#include "Engine/Verifier.h"

namespace planproof {

/// A pipelined plan's structure and schedule (docs/pipeline.md): every message
/// matched, every value used only where it is computed or received, and no deadlock
/// under blocking sends and receives. Violations (kind `schedule`) go to `result`.
void checkSchedule(const Spec &spec, VerifyResult &result);

} // namespace planproof

#endif
