// Tensor maps of bf16 matrices, encoded through cuTensorMapEncodeTiled as the runtime's driver entry point gives it.
#include "kernels/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace veomni::ops::cuda {
namespace {

// The toolkit's own declaration of the 12.0 entry point, so the compiler checks the call against it.
using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// The entry point as the 12.0 driver API declares it (the first with tensor maps); null where the driver lacks it.
EncodeTiled encode_tiled() {
  static const EncodeTiled encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // not sticky: clear it for the next call's check
      return EncodeTiled{nullptr};
    }
    return reinterpret_cast<EncodeTiled>(function);
  }();
  return encode;
}

}  // namespace

bool tensor_maps_available() { return encode_tiled() != nullptr; }

CUtensorMap bf16_tensor_map(const void* base, std::array<uint64_t, 3> dims, std::array<uint64_t, 2> strides,
                            std::array<uint32_t, 3> box) {
  const EncodeTiled encode = encode_tiled();
  VEOMNI_CHECK(encode != nullptr, "tensor maps: the CUDA driver has no cuTensorMapEncodeTiled (a driver for CUDA 12 "
               "or later has it)");
  CUtensorMap map{};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims.data(), strides.data(),
             box.data(), element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  VEOMNI_CHECK(result == CUDA_SUCCESS,
               "tensor maps: cuTensorMapEncodeTiled refused dims {}x{}x{}, strides {} {} bytes, box {}x{}x{} at {} "
               "(driver error {})",
               dims[0], dims[1], dims[2], strides[0], strides[1], box[0], box[1], box[2], base,
               static_cast<int>(result));
  return map;
}

}  // namespace veomni::ops::cuda
