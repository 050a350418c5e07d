// Reads TensorBoard event files back (veomni's own and any scalar summaries of others), every record's CRCs checked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace veomni {

struct TensorBoardScalar {
  int64_t step = 0;
  double wall_time = 0;
  std::string tag;
  float value = 0;
};

struct TensorBoardEventFile {
  std::string path;
  std::string file_version;  // of the file_version record ("brain.Event:2"); "" when the file has none
  std::vector<TensorBoardScalar> scalars;  // in file order
};

// One event file. Throws InputError naming the file and the record's byte offset for a bad CRC, a truncated record
// or an event protobuf cannot parse; InputError on a build without protobuf.
TensorBoardEventFile read_tensorboard_event_file(const std::string& path);

// The event files of a log directory (names holding "tfevents"), sorted by name (their creation time).
std::vector<std::string> list_tensorboard_event_files(const std::string& dir);

}  // namespace veomni
