// Event-file reader: TFRecord records parsed as metrics/tensorboard_event.proto's Event.
#include "metrics/tensorboard_reader.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "metrics/tensorboard_writer.h"
#include "metrics/tfrecord.h"
#ifdef VEOMNI_HAVE_TENSORBOARD
#include "metrics/tensorboard_event.pb.h"
#endif

namespace veomni {

TensorBoardEventFile read_tensorboard_event_file(const std::string& path) {
  VEOMNI_INPUT_CHECK(tensorboard_supported(),
                     "{}: this build of veomni cannot read TensorBoard files (protobuf was not found when it was "
                     "configured)", path);
  TensorBoardEventFile out;
  out.path = path;
#ifdef VEOMNI_HAVE_TENSORBOARD
  for (const TfRecord& record : read_tfrecords(path)) {
    tensorboard::Event event;
    VEOMNI_INPUT_CHECK(event.ParseFromString(record.data),
                       "{}: record at byte offset {}: its {} bytes are not a TensorBoard Event", path, record.offset,
                       record.data.size());
    if (event.has_file_version()) out.file_version = event.file_version();
    if (!event.has_summary()) continue;
    for (const tensorboard::Summary::Value& v : event.summary().value())
      out.scalars.push_back({event.step(), event.wall_time(), v.tag(), v.simple_value()});
  }
#endif
  return out;
}

std::vector<std::string> list_tensorboard_event_files(const std::string& dir) {
  std::error_code ec;
  VEOMNI_INPUT_CHECK(std::filesystem::is_directory(dir, ec), "TensorBoard directory '{}' does not exist", dir);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename().string().find("tfevents") != std::string::npos)
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace veomni
