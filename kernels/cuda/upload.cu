// Host tables to the device without waiting for it (ops::upload): the decode step's index tables.
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {

Tensor upload(const Tensor& host, Device device) {
  Tensor out = Tensor::empty(host.shape(), host.dtype(), device);
  cuda_rt::upload_from_host(out.raw_data(), host.raw_data(), host.nbytes());
  return out;
}

}  // namespace veomni::ops::cuda
