// CRC-32C (Castagnoli), the checksum of TFRecord framing, and TFRecord's masked form of it.
#pragma once
#include <cstdint>
#include <string_view>

namespace veomni {

// CRC-32C of data (reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF): crc32c("123456789") is
// 0xE3069283.
uint32_t crc32c(std::string_view data);

// TFRecord stores ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC over bytes that hold CRCs stays strong.
uint32_t mask_crc32c(uint32_t crc);

}  // namespace veomni
