// A 64-bit content checksum of a whole file, recorded for every rank file so that any damaged byte (data, HDF5
// metadata, attributes) is found before a resume or a merge trusts the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace veomni {

// Word-wise FNV-1a over the file's bytes (any single changed word always changes the result) mixed with its length.
// Throws InputError naming the path when it cannot be read.
uint64_t file_checksum(const std::string& path);

// "fnv1a64w:0123456789abcdef", the form metadata.json records, and back (nullopt for any other text).
std::string format_checksum(uint64_t checksum);
std::optional<uint64_t> parse_checksum(const std::string& text);

}  // namespace veomni
