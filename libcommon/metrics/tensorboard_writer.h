// TensorBoard event files of scalar metrics (what `tensorboard --logdir` plots), written through protobuf.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace veomni {

// Whether this build writes TensorBoard files: it needs protobuf (libprotobuf-dev and protoc) at configure time.
bool tensorboard_supported();

// "events.out.tfevents.<unix seconds>.<hostname>", the name TensorBoard looks for in a log directory.
std::string tensorboard_event_file_name(int64_t unix_seconds, const std::string& hostname);

// Appends scalar summaries to a new event file in a directory. Each add_scalars call writes one event (one value per
// metric, float32 as TensorBoard stores scalars) and flushes it, so a live TensorBoard sees every step and a crash
// loses at most the record being written (TensorBoard skips a truncated last record). A second writer in the same
// directory (a resumed run) starts its own file; TensorBoard merges the files of a directory and keeps the newest
// value of a repeated step.
class TensorBoardWriter {
 public:
  // Creates dir (and its parents) and the event file, and writes the file_version record "brain.Event:2". Throws
  // InputError on a build without protobuf, and Error naming the path when the file cannot be created.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event_bytes);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace veomni
