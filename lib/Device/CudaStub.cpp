//===- CudaStub.cpp - the CUDA entry points of a build without CUDA -------===//
#include "Device/Device.h"

using namespace planproof::kernels;

bool planproof::kernels::cudaBuilt() { return false; }

int planproof::kernels::cudaDeviceCount(std::string &why) {
  why = "this build of planproof has no CUDA backend (the CUDA toolkit was not found "
        "when it was configured)";
  return 0;
}

std::unique_ptr<Device> planproof::kernels::makeCudaDevice(int, std::string &why) {
  cudaDeviceCount(why);
  return nullptr;
}

std::unique_ptr<Collectives> planproof::kernels::makeNcclCollectives(std::string &why) {
  cudaDeviceCount(why);
  return nullptr;
}

std::string planproof::kernels::ncclSmokeTest(std::string &report) {
  std::string why;
  cudaDeviceCount(why);
  report = why;
  return why;
}
