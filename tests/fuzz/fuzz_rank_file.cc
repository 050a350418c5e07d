// Fuzz target: one rank's checkpoint shard (HDF5) opened and read as rank 0 of 1 at step 3, the identity of the seed.
#include "ckpt/rank_shard_file.h"
#include "fuzz_util.h"

#include <hdf5.h>

// HDF5 keeps freed blocks on free lists of its own; with those off, AddressSanitizer sees every reuse of freed memory
// where it happens.
extern "C" int LLVMFuzzerInitialize(int*, char***) { return H5set_free_list_limits(0, 0, 0, 0, 0, 0) < 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = veomni::fuzz::write_scratch_file("rank-00000-of-00001.h5", data, size);
  veomni::fuzz::expect_input_errors_only([&] {
    const veomni::RankShardReader reader(path, 0, veomni::MeshShape{}, 3);
    (void)reader.position();
    float values[4];
    for (veomni::ShardField field : veomni::kShardFields) reader.read(field, "w", 4, 0, 4, values);
  });
  return 0;
}
