// Reading a media file whole into memory, with errors that name it (decoders work on the bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace veomni {

// The file's bytes; InputError naming the path when it is missing, unreadable or empty.
std::vector<uint8_t> read_media_file(const std::string& path);

}  // namespace veomni
