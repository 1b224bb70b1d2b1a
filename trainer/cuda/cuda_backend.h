// The CUDA backend: cuBLAS for every matrix product (strided-batched for
// attention), our kernels (trainer/cuda/kernels.cuh) for the rest. Same
// model, parameter layout, optimizer arithmetic and dropout masks as the CPU
// backend. A training step is captured once as a CUDA graph and replayed, so
// the small sweep models are not bound by kernel-launch overhead
// (NORMSWEEP_CUDA_GRAPHS=0 runs it eagerly). Every CUDA and cuBLAS error
// becomes a Status with the call and the message. This header includes no
// CUDA header.
#ifndef NORMSWEEP_TRAINER_CUDA_CUDA_BACKEND_H_
#define NORMSWEEP_TRAINER_CUDA_CUDA_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "trainer/backend.h"

namespace normsweep::trainer::cuda {

// options.device is "cuda" (device 0) or "cuda:N".
StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options);

// "cuda:N (name, memory, sm_XY)" for every visible GPU; empty when there is
// none or no driver.
std::vector<std::string> ListCudaDevices();

}  // namespace normsweep::trainer::cuda

#endif  // NORMSWEEP_TRAINER_CUDA_CUDA_BACKEND_H_
