// Fuzz target: model.safetensors.index.json of a sharded HF directory whose shard files are the fixed seed shards.
#include <filesystem>

#include "fuzz_util.h"
#include "io/hf_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The index names shards by file name; two valid ones are copied once beside it.
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d = veomni::fuzz::scratch_dir() / "hf";
    std::filesystem::create_directories(d);
    for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
      std::filesystem::copy_file(std::filesystem::path(VEOMNI_FUZZ_SHARDS_DIR) / shard, d / shard,
                                 std::filesystem::copy_options::overwrite_existing);
    return d;
  }();
  const std::string index = (dir / veomni::kHfWeightsIndexFile).string();
  std::filesystem::remove(index);
  veomni::fuzz::write_scratch_file("hf/model.safetensors.index.json", data, size);
  veomni::fuzz::expect_input_errors_only([&] {
    const veomni::HfCheckpointReader reader(dir.string());
    for (const std::string& name : reader.names()) (void)reader.read(name);
  });
  return 0;
}
