// A small ParamStore shaped like a tied two-layer MoE model, for the FSDP tests (overlap, frozen shards, offload).
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dist/device_mesh.h"
#include "model/param.h"

namespace veomni::testing {

// A store shaped like a tied two-layer MoE model: embed; two layers of a matrix, an expert tensor (sharded over
// ep_fsdp, a communicator of its own) and a norm vector; the head's norm and the shared embedding. Odd sizes, so
// every shard is padded. Values depend on the element's place in the full tensor only, as FSDP requires.
inline std::unique_ptr<ParamStore> synthetic_store(const DeviceMesh& mesh, Device device = Device::cpu(),
                                                   const std::vector<std::string>& frozen = {}) {
  auto store = std::make_unique<ParamStore>();
  store->begin_group("embed");
  Parameter* embed = store->add("embed", {11, 6});
  for (int l = 0; l < 2; ++l) {
    store->begin_group(fmt::format("layers.{}", l));
    store->add(fmt::format("layers.{}.w", l), {7, 5});
    Parameter* experts = store->add(fmt::format("layers.{}.experts", l), {4, 3, 5}, true);
    const int64_t per_rank = 4 / mesh.shape.ep;
    experts->local_begin = mesh.ep_rank() * per_rank;
    experts->local_end = experts->local_begin + per_rank;
    store->add(fmt::format("layers.{}.norm", l), {6});
  }
  store->begin_group("head");
  store->add("norm", {6});
  store->add_shared(embed);
  for (size_t i = 0; i < store->all().size(); ++i) {
    Parameter& p = *store->all()[i];
    const Shape local = p.local_shape();
    const int64_t row = shape_numel(local) / local.at(0);
    std::vector<float> v(static_cast<size_t>(shape_numel(local)));
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = std::sin(0.37f * static_cast<float>(static_cast<int64_t>(k) + p.local_begin * row) +
                      1.3f * static_cast<float>(i));
    p.value = Tensor::from_vector(v, local).to(device);
    p.trainable = std::find(frozen.begin(), frozen.end(), p.name) == frozen.end();
  }
  return store;
}

}  // namespace veomni::testing
