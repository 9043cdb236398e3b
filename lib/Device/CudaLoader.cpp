//===- CudaLoader.cpp - the CUDA backend, loaded when first asked for -----===//
//
// The CUDA entry points of Device.h in a build with CUDA: the first call loads the
// module libplanproof-cuda.so (CudaDevice.cu with the CUDA runtime, cuBLAS and NCCL)
// and forwards to its table. It is looked for, in order, at $PLANPROOF_CUDA_MODULE, in
// ../lib beside the running executable (the build tree and an installed tree), in the
// install's library folder, and on the loader's search path. When it cannot be loaded,
// every entry point says why, as in a build without CUDA.
//
//===----------------------------------------------------------------------===//
#include "Device/Device.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

using namespace planproof::kernels;

#ifndef PLANPROOF_CUDA_MODULE_NAME
#define PLANPROOF_CUDA_MODULE_NAME "libplanproof-cuda.so"
#endif

namespace {

std::string executableDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return "";
  std::string path(buf, n);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

struct Module {
  const CudaEntryPoints *entry = nullptr;
  std::string why; // when entry is null
};

const Module &module() {
  static Module m;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char *env = std::getenv("PLANPROOF_CUDA_MODULE"); env && *env)
      candidates.push_back(env);
    if (std::string dir = executableDir(); !dir.empty())
      candidates.push_back(dir + "/../lib/" PLANPROOF_CUDA_MODULE_NAME);
#ifdef PLANPROOF_CUDA_INSTALL_DIR
    candidates.push_back(PLANPROOF_CUDA_INSTALL_DIR "/" PLANPROOF_CUDA_MODULE_NAME);
#endif
    candidates.push_back(PLANPROOF_CUDA_MODULE_NAME);
    std::string errors;
    for (const std::string &path : candidates) {
      bool explicitPath = path.find('/') != std::string::npos;
      if (explicitPath && access(path.c_str(), F_OK) != 0)
        continue;
      void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        errors += std::string(errors.empty() ? "" : "; ") + dlerror();
        continue;
      }
      using Get = const CudaEntryPoints *(*)();
      auto get = reinterpret_cast<Get>(dlsym(handle, "planproof_cuda_entry_points"));
      const CudaEntryPoints *entry = get ? get() : nullptr;
      if (!entry || entry->version != kCudaEntryVersion) {
        errors += std::string(errors.empty() ? "" : "; ") + path +
                  " is not this build's CUDA backend";
        dlclose(handle);
        continue;
      }
      m.entry = entry; // stays loaded for the process's life
      return;
    }
    m.why = "the CUDA backend (" PLANPROOF_CUDA_MODULE_NAME ") could not be loaded" +
            (errors.empty() ? std::string(": not found beside the executable")
                            : ": " + errors);
  });
  return m;
}

} // namespace

bool planproof::kernels::cudaBuilt() { return true; }

int planproof::kernels::cudaDeviceCount(std::string &why) {
  const Module &m = module();
  if (!m.entry) {
    why = m.why;
    return 0;
  }
  return m.entry->deviceCount(why);
}

std::unique_ptr<Device> planproof::kernels::makeCudaDevice(int index, std::string &why) {
  const Module &m = module();
  if (!m.entry) {
    why = m.why;
    return nullptr;
  }
  return m.entry->makeDevice(index, why);
}

std::unique_ptr<Collectives> planproof::kernels::makeNcclCollectives(std::string &why) {
  const Module &m = module();
  if (!m.entry) {
    why = m.why;
    return nullptr;
  }
  return m.entry->makeCollectives(why);
}

std::string planproof::kernels::ncclSmokeTest(std::string &report) {
  const Module &m = module();
  if (!m.entry) {
    report = m.why;
    return m.why;
  }
  return m.entry->smokeTest(report);
}
