// The contract between trainer/backend.cc and the CUDA module
// (trainer/cuda/module_entry.cc). Both sides are built from one tree with
// one compiler, so C++ types cross it; the version guards against a stale
// module next to a newer binary. Bump it when Backend, BackendOptions,
// Status or the entry points change.
#ifndef NORMSWEEP_TRAINER_CUDA_MODULE_ABI_H_
#define NORMSWEEP_TRAINER_CUDA_MODULE_ABI_H_

#include "trainer/backend.h"

namespace normsweep::trainer {

inline constexpr int kCudaModuleAbi = 1 + 1000 * static_cast<int>(sizeof(BackendOptions));

// Entry points, resolved with dlsym.
using CudaModuleAbiFn = int (*)();
using CudaCreateFn = Backend* (*)(const BackendOptions* options, Status* error);
using CudaListFn = void (*)(std::vector<std::string>* out);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_CUDA_MODULE_ABI_H_
