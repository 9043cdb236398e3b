//===- Precompiled.h - the headers every planproof translation unit parses -===//
//
// Compiled once per build into a precompiled header (cmake/PlanproofPch.cmake) that
// every C++ target of the project reuses. Parsing MLIR's and LLVM's headers, the two
// dialects' generated op classes and nlohmann/json took 8-9 s of the 15-20 s that each
// translation unit compiled for; with the precompiled header it loads in well under one.
//
// Only headers that do not change while planproof is developed go here (the toolchain's,
// MLIR's, the dialects' generated declarations): a change to any of them rebuilds every
// object anyway. Sources still include what they use; a build with -DPLANPROOF_PCH=OFF
// checks that they do.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_PRECOMPILED_H
#define PLANPROOF_PRECOMPILED_H

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#endif // PLANPROOF_PRECOMPILED_H
