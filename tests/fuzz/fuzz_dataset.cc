// Fuzz target: a veomni dataset file (HDF5 header, key schema, input_ids offsets, samples) opened by DatasetReader.
#include "data/dataset_reader.h"
#include "fuzz_util.h"

#include <hdf5.h>

// HDF5 keeps freed blocks on free lists of its own; with those off, AddressSanitizer sees every reuse of freed memory
// where it happens.
extern "C" int LLVMFuzzerInitialize(int*, char***) { return H5set_free_list_limits(0, 0, 0, 0, 0, 0) < 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = veomni::fuzz::write_scratch_file("dataset.h5", data, size);
  veomni::fuzz::expect_input_errors_only([&] {
    veomni::DatasetReader reader(path);
    // A few samples are enough to reach every key's reader; all of them would make large counts slow.
    for (int64_t i = 0; i < std::min<int64_t>(reader.num_samples(), 4); ++i) {
      (void)reader.sequence_length(i);
      (void)reader.read(i);
    }
  });
  return 0;
}
