//===- KernelDevices.cpp - the devices of the kernel replay -----------------===//
//
// Opening the devices of a kernel replay (the host device, one GPU for every virtual
// rank, or one GPU per rank with NCCL), and one ref op evaluated on a device through
// the kernel backend's lowering (for the unit tests).
//
//===----------------------------------------------------------------------===//
#include "Device/Device.h"
#include "Replay/KernelLowering.h"
#include "Replay/ReplayInternal.h"

using namespace mlir;
using namespace planproof;
using namespace planproof::kernels;
using namespace planproof::replay;

std::string replay::openDevices(const Spec &spec, const ReplayOptions &options,
                                std::vector<std::unique_ptr<Device>> &owned,
                                std::vector<Device *> &rankDev,
                                std::unique_ptr<Collectives> &nccl, bool &located) {
  int64_t ranks = spec.mesh.numRanks();
  auto fail = [&](const std::string &why) { return located = true, why; };
  auto unavailable = [&](const std::string &why) { return located = false, why; };
  if (options.backend == ReplayBackend::Emulated) {
    if (options.ranks == ReplayRanks::Nccl)
      return fail("--ranks nccl needs --backend cuda");
    // The host device is for correctness tests: refuse what would take minutes.
    double work = 4 * workOf(spec.reference, 1) + workOf(spec.plan, ranks);
    if (work > options.maxWork)
      return fail("the emulated kernel backend would take about " +
                  std::to_string((long long)work) + " scalar operations (limit " +
                  std::to_string((long long)options.maxWork) + ")");
    owned.push_back(makeHostDevice());
    rankDev.assign(ranks, owned[0].get());
  } else {
    std::string why;
    int gpus = cudaDeviceCount(why);
    if (gpus <= 0)
      return unavailable("the CUDA backend cannot run here: " + why);
    if (options.ranks == ReplayRanks::Nccl) {
      if (gpus < ranks)
        return unavailable("--ranks nccl runs one rank per GPU: the mesh has " + std::to_string(ranks) +
                    " ranks and this machine " + std::to_string(gpus) +
                    " GPU(s) (use --ranks virtual)");
      for (int64_t r = 0; r < ranks; ++r) {
        owned.push_back(makeCudaDevice((int)r, why));
        if (!owned.back())
          return unavailable("GPU " + std::to_string(r) + ": " + why);
        rankDev.push_back(owned.back().get());
      }
      nccl = makeNcclCollectives(why);
      if (!nccl)
        return unavailable("NCCL: " + why);
    } else {
      owned.push_back(makeCudaDevice(0, why));
      if (!owned[0])
        return unavailable(why);
      rankDev.assign(ranks, owned[0].get());
    }
  }
  return "";
}

std::string replay::evalRefOnDevice(Device &dev, ReplayDtype dtype, Operation *op,
                                    const std::vector<NumTensor> &ins,
                                    const std::vector<double> &idx, NumTensor &out) {
  Lowering low{dev, Arith{dtype, SumOrder::Forward}};
  std::vector<DevTensor> held;
  for (const NumTensor &t : ins) {
    DevTensor d = low.make(t.shape);
    dev.upload(d.buf, t.data);
    held.push_back(d);
  }
  std::vector<const DevTensor *> ptrs;
  for (const DevTensor &d : held)
    ptrs.push_back(&d);
  std::string err;
  try {
    DevTensor r = low.evalRef(op, ptrs, idx);
    out.shape = r.shape;
    out.data = dev.download(r.buf);
    low.release(r);
  } catch (const Unsupported &u) {
    err = u.why;
  }
  for (DevTensor &d : held)
    low.release(d);
  return err;
}
