// TensorBoardWriter: Event messages (metrics/tensorboard_event.proto) in TFRecord framing, flushed per step.
#include "metrics/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "metrics/tfrecord.h"
#ifdef VEOMNI_HAVE_TENSORBOARD
#include "metrics/tensorboard_event.pb.h"
#endif

namespace veomni {

namespace {

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Opens a file that does not exist yet ("x": two writers in one second get two files, name.1, name.2, ...).
std::FILE* create_new_file(const std::filesystem::path& dir, const std::string& name, std::string& path) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    path = (dir / (attempt == 0 ? name : name + "." + std::to_string(attempt))).string();
    if (std::FILE* f = std::fopen(path.c_str(), "wbx")) return f;
    if (errno != EEXIST) break;
  }
  throw Error(fmt::format("cannot create the TensorBoard event file '{}': {}", path, std::strerror(errno)));
}

#ifdef VEOMNI_HAVE_TENSORBOARD
std::string serialize(const tensorboard::Event& event) {
  std::string bytes;
  VEOMNI_CHECK(event.SerializeToString(&bytes), "protobuf could not serialize a TensorBoard event");
  return bytes;
}
#endif

}  // namespace

bool tensorboard_supported() {
#ifdef VEOMNI_HAVE_TENSORBOARD
  return true;
#else
  return false;
#endif
}

std::string tensorboard_event_file_name(int64_t unix_seconds, const std::string& hostname) {
  return fmt::format("events.out.tfevents.{}.{}", unix_seconds, hostname);
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  VEOMNI_INPUT_CHECK(tensorboard_supported(),
                     "this build of veomni cannot write TensorBoard files (protobuf was not found when it was "
                     "configured) (hint: set train.use_tensorboard false, or install libprotobuf-dev and "
                     "protobuf-compiler and configure again)");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create the TensorBoard directory '{}': {}", dir, ec.message()));
  const double now = unix_seconds_now();
  file_ = create_new_file(dir, tensorboard_event_file_name(static_cast<int64_t>(now), host_name()), path_);
#ifdef VEOMNI_HAVE_TENSORBOARD
  tensorboard::Event event;
  event.set_wall_time(now);
  event.set_file_version("brain.Event:2");
  write_record(serialize(event));
#endif
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
#ifdef VEOMNI_HAVE_TENSORBOARD
  tensorboard::Event event;
  event.set_wall_time(unix_seconds_now());
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : values) {
    tensorboard::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(serialize(event));
#else
  (void)step;
  (void)values;
#endif
}

void TensorBoardWriter::write_record(const std::string& event_bytes) {
  const std::string record = frame_tfrecord(event_bytes);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    throw Error(fmt::format("cannot write the TensorBoard event file '{}': {}", path_, std::strerror(errno)));
}

}  // namespace veomni
