// Whole-file reads for the media decoders.
#include "media/media_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace veomni {

std::vector<uint8_t> read_media_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  VEOMNI_INPUT_CHECK(in.good(), "{}: cannot open media file ({})", path, std::strerror(errno));
  const std::streamsize size = in.tellg();
  VEOMNI_INPUT_CHECK(size > 0, "{}: media file is empty", path);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  VEOMNI_INPUT_CHECK(in.read(reinterpret_cast<char*>(bytes.data()), size).good(), "{}: read failed after {} bytes",
                     path, in.gcount());
  return bytes;
}

}  // namespace veomni
