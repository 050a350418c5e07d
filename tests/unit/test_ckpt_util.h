// Shared helpers of the checkpoint tests: a one-rank communicator, scratch directories, parameter lists of tiny
// models, random full tensors, checkpoints written from full tensors for any mesh, and byte-level file damage; also
// the one-rank mesh and the byte and record comparisons that the FSDP and safetensors tests share.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/rank_shard_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "model/causal_lm.h"
#include "parallel/shard_spec.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

namespace veomni::test {

namespace fs = std::filesystem;

// The communicator of a single process: every collective is the identity.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void allreduce_sum(Tensor&) override {}
  void allreduce_sum(std::vector<double>&) override {}
  void allreduce_sum(std::vector<int64_t>&) override {}
  void allreduce_max(std::vector<double>&) override {}
  void allgather(const Tensor& local, Tensor& out) override { out.copy_from(local); }
  void allgather(const std::vector<int64_t>& local, std::vector<int64_t>& out) override { out = local; }
  void reduce_scatter_sum(const Tensor& in, Tensor& out) override { out.copy_from(in); }
  void all_to_all_rows(const Tensor& send, const std::vector<int64_t>&, Tensor& recv,
                       const std::vector<int64_t>&) override {
    recv.copy_from(send);
  }
  void broadcast(Tensor&, int) override {}
  void broadcast(std::string&, int) override {}
  void barrier() override {}
};

using ScratchDir = veomni::testing::ScratchDir;

using veomni::testing::expect_input_error;

// Parameter names, shapes and expert flags of a model, no values allocated.
struct ParamList {
  explicit ParamList(const ModelConfig& config) {
    ModelOptions options;
    options.hooks.params = &no_values;
    model = std::make_unique<CausalLM>(config, options);
  }
  const std::vector<std::unique_ptr<Parameter>>& all() const { return model->params().all(); }
  ParamHooks no_values;
  std::unique_ptr<CausalLM> model;
};

inline Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return t;
}

// Full tensors of one field per parameter name.
using FullTensors = std::map<std::string, Tensor>;

// Full tensors for every parameter and field (seeded by field and parameter index).
inline std::map<ShardField, FullTensors> random_state(const ParamList& params, uint64_t seed) {
  std::map<ShardField, FullTensors> out;
  for (ShardField field : kShardFields) {
    uint64_t i = 0;
    for (const auto& p : params.all())
      out[field][p->name] = random_tensor(p->shape, seed * 1000 + static_cast<uint64_t>(field) * 100 + i++);
  }
  return out;
}

// rank r's padded shard of a full tensor under `mesh`, cut by the one shard definition.
inline Tensor shard_of(const Tensor& full, const Shape& shape, bool expert, const MeshShape& mesh, int64_t rank) {
  const ShardSpec spec = shard_spec_for(shape, expert, mesh, rank);
  const FlatRange range = full_tensor_range(spec, shape);
  Tensor shard = Tensor::zeros({spec.shard_numel}, DType::F32);
  shard.slice(0, range.end - range.begin).copy_from(full.view({full.numel()}).slice(range.begin, range.end));
  return shard;
}

// Writes a complete checkpoint directory of `state` as `mesh` would have saved it at `position`.
inline CheckpointMetadata write_checkpoint(const std::string& dir, const ModelConfig& config, const ParamList& params,
                                           const std::map<ShardField, FullTensors>& state, const MeshShape& mesh,
                                           const TrainingPosition& position) {
  fs::create_directories(dir);
  CheckpointMetadata m;
  m.producer = "test";
  m.mesh = mesh;
  m.position = position;
  m.model_config = config;
  for (const auto& p : params.all()) m.params.push_back(checkpoint_param(p->name, p->shape, p->is_expert, mesh));
  for (int64_t r = 0; r < mesh.world; ++r) {
    RankShardWriter writer((fs::path(dir) / rank_file_name(r, mesh.world)).string(), r, mesh, position);
    for (const auto& p : params.all())
      for (ShardField field : kShardFields)
        writer.write(field, p->name, shard_of(state.at(field).at(p->name), p->shape, p->is_expert, mesh, r));
    m.rank_files.push_back(writer.finish());
  }
  write_checkpoint_metadata(m, dir);
  return m;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Flips one byte inside the stored values of `t` (found by its bytes in the file); false when not found.
inline bool corrupt_tensor_bytes(const std::string& path, const Tensor& t) {
  std::string bytes = read_bytes(path);
  const std::string needle(static_cast<const char*>(t.raw_data()), std::min<size_t>(t.nbytes(), 64));
  const size_t at = bytes.find(needle);
  if (at == std::string::npos) return false;
  bytes[at + needle.size() / 2] = static_cast<char>(bytes[at + needle.size() / 2] ^ 0x5a);
  write_bytes(path, bytes);
  return true;
}

// A single process's mesh: every communicator is the local one.
inline DeviceMesh one_rank_mesh() {
  DeviceMesh mesh;
  mesh.shape = MeshShape{1, 1, 1};
  mesh.rank = 0;
  mesh.world = mesh.sp = mesh.ep = mesh.ep_fsdp = std::make_shared<LocalCommunicator>();
  return mesh;
}

// Same dtype, shape and bytes.
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// A tensor's values on the host as f32, whatever its device and dtype.
inline std::vector<float> host_floats(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  if (host.dtype() != DType::F32) host = host.to_dtype(DType::F32);
  return host.to_float_vector();
}

// Where two runs' records first differ, or "" when they are the same bits.
inline std::string first_difference(const std::vector<std::vector<float>>& a,
                                    const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return fmt::format("{} records against {}", a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return fmt::format("record {}: {} values against {}", i, a[i].size(), b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k)
      if (std::memcmp(&a[i][k], &b[i][k], sizeof(float)) != 0)
        return fmt::format("record {} element {}: {:.9g} against {:.9g}", i, k, a[i][k], b[i][k]);
  }
  return "";
}

}  // namespace veomni::test
