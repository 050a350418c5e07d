// Writes the binary seeds of the fuzz targets (a small dataset, a rank file, a checkpoint's metadata.json) with
// the library's own writers, so that they can be made again when a format changes: make_seeds <tests/fuzz/corpus>.
#include <filesystem>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/rank_shard_file.h"
#include "core/tensor.h"
#include "data/dataset_writer.h"
#include "model/model_config.h"

namespace fs = std::filesystem;
using namespace veomni;

namespace {

void write_dataset_seed(const fs::path& corpus) {
  DatasetInfo info;
  info.producer = "make_seeds";
  DatasetWriterOptions options;
  options.compression_level = 0;  // fewer bytes the fuzzer must keep consistent
  options.chunk_bytes = 64;       // a few bytes a chunk: the seed stays small enough to mutate
  DatasetWriter writer((corpus / "dataset" / "text.h5").string(), info, options);
  for (int64_t n : {3, 5}) {
    std::vector<int32_t> ids(n), labels(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = labels[i] = static_cast<int32_t>(10 + i);
    writer.append(Sample{{"input_ids", Tensor::from_vector(ids, {n})}, {"labels", Tensor::from_vector(labels, {n})}});
  }
  writer.close();
}

// Rank 0 of 1 at step 3 with one parameter "w" of 4 elements: the identity fuzz_rank_file.cc opens.
RankFileInfo write_rank_file_seed(const fs::path& corpus, const MeshShape& mesh, const TrainingPosition& position) {
  RankShardWriter writer((corpus / "rank_file" / rank_file_name(0, 1)).string(), 0, mesh, position);
  for (ShardField field : kShardFields)
    writer.write(field, "w", Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}));
  return writer.finish();
}

void write_metadata_seed(const fs::path& corpus, const MeshShape& mesh, const TrainingPosition& position,
                         const RankFileInfo& rank_file, const fs::path& model_config) {
  CheckpointMetadata m;
  m.producer = "make_seeds";
  m.mesh = mesh;
  m.position = position;
  m.data_plan = DataPlanInfo{"train.h5", 2, 1, 64, 32, true};
  m.model_config = load_model_config(model_config.string());
  m.params.push_back(checkpoint_param("w", {2, 2}, false, mesh));
  m.rank_files.push_back(rank_file);
  const fs::path dir = corpus / "ckpt_metadata" / "ck";
  fs::create_directories(dir);
  write_checkpoint_metadata(m, dir.string());
  fs::rename(dir / kCheckpointMetadataFile, corpus / "ckpt_metadata" / "metadata.json");
  fs::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_seeds <tests/fuzz/corpus> <configs/model_configs/qwen3_toy>\n");
    return 2;
  }
  const fs::path corpus = argv[1];
  const MeshShape mesh{};
  const TrainingPosition position{3, 3, 0, 3, 42, 10, 1e-4};
  for (const char* target : {"dataset", "rank_file", "ckpt_metadata"}) fs::create_directories(corpus / target);
  write_dataset_seed(corpus);
  write_metadata_seed(corpus, mesh, position, write_rank_file_seed(corpus, mesh, position), argv[2]);
  return 0;
}
