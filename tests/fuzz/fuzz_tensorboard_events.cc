// Fuzz target: a TensorBoard event file (TFRecord framing, then Event protobufs where the build has protobuf), as
// veomni's event reader reads it.
#include "fuzz_util.h"
#include "metrics/tensorboard_reader.h"
#include "metrics/tensorboard_writer.h"
#include "metrics/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = veomni::fuzz::write_scratch_file("events.out.tfevents.0.fuzz", data, size);
  veomni::fuzz::expect_input_errors_only([&] {
    if (veomni::tensorboard_supported())
      (void)veomni::read_tensorboard_event_file(path);
    else
      (void)veomni::read_tfrecords(path);
  });
  return 0;
}
